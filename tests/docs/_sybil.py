"""What the docs' examples are checked for, as Sybil parsers and evaluators.

* ```bash / ```sh / ```shell blocks, and the `$ ` lines of ```console blocks: every `connect …` command
  is parsed by the real CLI's own parsers, so an unknown command or option, an option missing its
  value or an argument too many fails. So is every `connect …` code span in the prose.
* ```json blocks parse; one that is a connector config (`connector.class`, or Kafka's create body
  `{"name", "config"}`) passes the runtime's own validation (the one `connect create` runs) with no
  error. Validation needs no store: a config with a `${env:…}` password is not checked against its
  server, as on create.

`<!-- skip: next -->` before a block is a counter-example, not checked.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import typer
from sybil import Document, Example, Region, Sybil
from sybil.parsers.markdown import CodeBlockParser, SkipParser

from connect_core.cli import app
from connect_core.runtime.plugins import PluginRegistry
from connect_core.runtime.security import ConfigProviders
from connect_core.runtime.security.paths import AllowedPaths
from connect_core.runtime.validation import validate_connector

ROOT = Path(__file__).resolve().parents[2]
# README, docs/, and the bench files the site includes (pymdownx.snippets).
DOCUMENTS = [
    ROOT / "README.md",
    *sorted(p for p in (ROOT / "docs").rglob("*.md") if "_hooks" not in p.parts),
    *sorted((ROOT / "bench").glob("*.md")),
]
_SHELL = ("bash", "sh", "shell")
_CLI = typer.main.get_command(app)  # Typer's own (vendored) click: its commands are used by duck type
_REGISTRY = PluginRegistry()
# Docs show `${env:…}` and `${file:…}` placeholders; a deployment opts in to them (CONNECT_CONFIG_PROVIDERS).
_PROVIDERS = ConfigProviders({"env", "file", "airflow"})
_OPERATORS = {"|", "||", "&&", ";", "&", ">", ">>", "<", "(", ")"}


def check_connect_command(line: str, *, complete: bool = True) -> None:
    """`line` (a shell line or a synopsis like `connect pause|resume NAME [--dry-run]`) is one or more
    `connect` commands the CLI takes; unless `complete`, required arguments may be left out (prose
    names a command: "`connect run` prints…")."""
    for command in _synopsis_alternatives(line):
        for words in _connect_invocations(command):
            _parse(words, line, complete)


def _synopsis_alternatives(line: str) -> list[str]:
    """`connect pause|resume NAME` is two commands; `[--dry-run]` and `…` are notation, not shell."""
    line = re.sub(r"[\[\]]|…|\.\.\.", " ", line)
    match = re.search(r"(?<=\s)([\w-]+(?:\|[\w-]+)+)(?=\s|$)", line)
    if not match:
        return [line]
    return [line[: match.start()] + alt + line[match.end() :] for alt in match.group(1).split("|")]


def _connect_invocations(line: str) -> Iterator[list[str]]:
    """The words of each `connect` command of a shell line (pipes, `&&`, `;` split it; `VAR=…` prefixes,
    redirections and comments are the shell's)."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    words: list[str] = []
    for token in [*lexer, ";"]:
        if token not in _OPERATORS:
            words.append(token)
            continue
        while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", words[0]):
            words.pop(0)
        if words and Path(words[0]).name == "connect":
            yield words[1:]
        words = []


def _parse(words: list[str], line: str, complete: bool) -> None:
    command, path, ctx = _CLI, ["connect"], None
    while True:
        ctx = command.context_class(command, info_name=path[-1], parent=ctx)
        try:
            opts, args, _ = command.make_parser(ctx).parse_args(args=list(words))
        except Exception as exc:  # the CLI's own UsageError: an unknown option, a missing value
            raise AssertionError(f"`{line}`: `{' '.join(path)}`: {exc.format_message()}") from None  # type: ignore[attr-defined]
        if "help" in opts:
            return
        subcommands = getattr(command, "commands", None)
        if subcommands is None:
            break
        if not args and not complete:
            return  # prose naming a group: "`connect pools …`"
        assert args, f"`{line}`: `{' '.join(path)}` needs a command (one of {', '.join(sorted(subcommands))})"
        assert args[0] in subcommands, f"`{line}`: `{' '.join(path)}` has no command `{args[0]}`"
        command, words = subcommands[args[0]], args[1:]
        path.append(args[0])
    assert not args or ctx.allow_extra_args, f"`{line}`: `{' '.join(path)}` takes no argument {args[0]!r}"
    missing = [p.opts[0] for p in command.params if p.required and p.name not in opts]
    assert not (complete and missing), f"`{line}`: `{' '.join(path)}` needs {', '.join(missing)}"


def _shell_lines(source: str, console: bool) -> Iterator[str]:
    """A block's command lines: continuation lines joined; in a console block only the `$ ` lines."""
    for line in re.sub(r"\\\n\s*", " ", source).splitlines():
        if console:
            if line.startswith("$ "):
                yield line[2:]
        elif line.strip() and not line.lstrip().startswith("#"):
            yield line


def evaluate_shell(example: Example) -> None:
    console = example.region.lexemes.get("arguments") == "console"
    for line in _shell_lines(str(example.parsed), console):
        check_connect_command(line)


def evaluate_json(example: Example) -> None:
    try:
        value: Any = json.loads(str(example.parsed))
    except json.JSONDecodeError as exc:
        raise AssertionError(f"not JSON: {exc}") from None
    if isinstance(value, dict) and "connector.class" in value:
        check_connector_config(value.get("name", "example"), value)
    elif isinstance(value, dict) and {"name", "config"} <= value.keys() and isinstance(value["config"], dict):
        check_connector_config(value["name"], value["config"])


def check_connector_config(name: str, config: dict[str, Any]) -> None:
    """The validation `connect create` runs (less the check against stored connectors' claims)."""
    validate_connector(name, config, _REGISTRY, _PROVIDERS, AllowedPaths([Path.cwd()]))


_FENCE = re.compile(r"^[ \t]*(```|~~~).*?^[ \t]*\1", re.MULTILINE | re.DOTALL)
_CODE_SPAN = re.compile(r"(?<!`)`((?:\S*/)?connect [^`\n]+)`(?!`)")


def inline_commands(document: Document) -> Iterator[Region]:
    """A Sybil parser: the `connect …` code spans of the prose (not those inside fenced blocks)."""
    fenced = [m.span() for m in _FENCE.finditer(document.text)]
    for match in _CODE_SPAN.finditer(document.text):
        if not any(start <= match.start() < end for start, end in fenced):
            yield Region(match.start(), match.end(), match.group(1), _evaluate_inline)


def _evaluate_inline(example: Example) -> None:
    check_connect_command(str(example.parsed), complete=False)


SYBIL = Sybil(
    parsers=[
        *(CodeBlockParser(language, evaluate_shell) for language in (*_SHELL, "console")),
        CodeBlockParser("json", evaluate_json),
        SkipParser(),
        inline_commands,
    ],
)


def examples() -> list[Example]:
    return [example for path in DOCUMENTS for example in SYBIL.parse(path).examples()]
