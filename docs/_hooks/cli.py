"""MkDocs hook: the CLI reference, from the Typer app itself (Typer's own `utils docs` renderer)."""

from __future__ import annotations

from typing import Any

import typer
from mkdocs.structure.files import File, Files
from typer.cli import get_docs_for_click

from connect_core.cli import app

PAGE = "reference/cli.md"


def on_files(files: Files, config: Any) -> Files:
    files.append(File.generated(config, PAGE, content=cli_markdown()))
    return files


def cli_markdown() -> str:
    command = typer.main.get_command(app)
    body = get_docs_for_click(obj=command, ctx=typer.Context(command), name="connect", title="CLI commands")
    intro = "Generated from the `connect` command's own help. How the commands fit together: [Using the CLI](../cli.md).\n\n"
    title, _, rest = body.partition("\n\n")
    return f"{title}\n\n{intro}{rest}"
