"""Every `connect …` command the README and the docs show, checked against the CLI itself: the command
path exists and every option it passes is one that command takes. A newcomer copies them verbatim."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import typer

from connect_core.cli import app

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")), *sorted((ROOT / "examples").rglob("*.md"))]
# `connect` at a shell line's start (after an optional prompt) or inside inline code
_BLOCK_LINE = re.compile(r"^\s*(?:\$ )?(connect [^\n#|&>]*?)\s*(?:#.*)?$", re.MULTILINE)
_INLINE = re.compile(r"`(connect [^`]+)`")


def _shell_commands(text: str) -> list[str]:
    """The `connect` lines of fenced shell blocks (continuation lines joined) and inline code spans."""
    found: list[str] = []
    for block in re.findall(r"```(?:bash|sh|shell|console)?\n(.*?)```", text, re.DOTALL):
        joined = re.sub(r"\\\n\s*", " ", block)
        found += [m.group(1) for m in _BLOCK_LINE.finditer(joined)]
    prose = re.sub(r"```.*?```", "", text, flags=re.DOTALL)
    found += [m.group(1) for m in _INLINE.finditer(prose)]
    return found


def _commands() -> list[tuple[str, str]]:
    return [(str(doc.relative_to(ROOT)), cmd) for doc in DOCS for cmd in _shell_commands(doc.read_text())]


COMMANDS = _commands()


def test_the_docs_show_commands() -> None:
    assert len(COMMANDS) > 30  # the extraction itself works: the README alone shows dozens


def _options(command: object) -> dict[str, object]:
    return {opt: param for param in command.params for opt in (*param.opts, *param.secondary_opts)}  # type: ignore[attr-defined]


def _check_options(where: str, command: object, words: list[str]) -> list[str]:
    """The leading options of `words` that `command` takes (with their values) consumed; the rest returned."""
    known = _options(command)
    while words and words[0].startswith("-") and words[0] != "-":
        option = words.pop(0).split("=", 1)[0]
        assert option in known or option == "--help", f"{where} takes no option `{option}`"
        if option in known and not getattr(known[option], "is_flag", False) and words and "=" not in option:
            words.pop(0)
    return words


def _alternatives(command: str) -> list[str]:
    """`connect pause|resume NAME` is two commands."""
    match = re.search(r"(\S+\|\S+)", command)
    if not match:
        return [command]
    return [command.replace(match.group(1), alt, 1) for alt in match.group(1).split("|")]


@pytest.mark.parametrize(("doc", "command"), COMMANDS, ids=[f"{d}:{c[:60]}" for d, c in COMMANDS])
def test_a_documented_command_exists_with_its_options(doc: str, command: str) -> None:
    for one in _alternatives(command):
        # `[--dry-run]` and `…` are a synopsis's notation, not shell
        words = shlex.split(one.replace("[", " ").replace("]", " ").replace("…", " ").replace("...", " "))[1:]
        group = typer.main.get_command(app)  # Typer's own (vendored) click: commands by duck type
        path = ["connect"]
        while getattr(group, "commands", None) is not None:
            words = _check_options(f"{doc}: `{one}`: `{' '.join(path)}`", group, words)
            assert words, f"{doc}: `{one}` names no command"
            sub = group.commands.get(words[0])  # type: ignore[attr-defined]
            assert sub is not None, f"{doc}: `{one}`: `{' '.join(path)}` has no command `{words[0]}`"
            path.append(words.pop(0))
            group = sub
        known = _options(group)
        for word in words:
            option = word.split("=", 1)[0]
            if option.startswith("-") and option != "-" and not re.fullmatch(r"-\d+", option):
                assert option in known or option == "--help", (
                    f"{doc}: `{one}`: `{' '.join(path)}` takes no option `{option}`"
                )
