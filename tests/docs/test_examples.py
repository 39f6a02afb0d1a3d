"""Every example the README and docs/ show, run by Sybil (`tests/docs/_sybil.py` says what each kind
of block is checked for): a newcomer copies them verbatim."""

from __future__ import annotations

from pathlib import Path

import pytest
from sybil import Example

from tests.docs._sybil import ROOT, examples

EXAMPLES = examples()


def _id(example: Example) -> str:
    return f"{Path(example.path).relative_to(ROOT)}:{example.line}"


def test_the_docs_show_commands_and_configs() -> None:
    """The extraction itself works: the docs show dozens of commands and several configs."""
    kinds = [getattr(e.region.evaluator, "__name__", "") for e in EXAMPLES]
    assert kinds.count("_evaluate_inline") + kinds.count("evaluate_shell") > 30
    assert kinds.count("evaluate_json") > 5


@pytest.mark.parametrize("example", EXAMPLES, ids=_id)
def test_a_documented_example(example: Example) -> None:
    example.evaluate()
