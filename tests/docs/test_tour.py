"""The getting-started tour's first block, run for real as a newcomer copies it: `connect create` and
`connect run` through a real spark-submit, in a fresh directory, on a database of this test's own."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from sybil import Document
from sybil.parsers.markdown.lexers import FencedCodeBlockLexer

pytestmark = pytest.mark.spark_submit

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "getting-started.md"
MARKER = "<!-- tour: run -->"


def _tour_block() -> str:
    """The first ```bash block after the marker."""
    text = GUIDE.read_text()
    after = text.index(MARKER)
    blocks = [r for r in FencedCodeBlockLexer("bash")(Document(text, str(GUIDE))) if r.start > after]
    return str(blocks[0].lexemes["source"])


def test_the_tour_runs_as_written(tmp_path: Path, empty_database_url: str) -> None:
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    (tmp_path / ".venv").symlink_to(ROOT / ".venv")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CONNECT_HOME", "CONNECT_REST", "CONNECT_TOPICS"))}
    env |= {"CONNECT_DATABASE_URL": empty_database_url, "SPARK_LOCAL_IP": "127.0.0.1"}
    proc = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", _tour_block()],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, f"the tour exited {proc.returncode}:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    tour = tmp_path / ".connect" / "tour"
    assert (tour / "test-sink-file.txt").read_text().splitlines() == ["Hello", "RocketMQ", "Connect"]
    assert "fileSinkConnector (SINK): RUNNING" in proc.stdout
