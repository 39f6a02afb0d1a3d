"""The `connect` command (Typer): manage connectors (locally or over REST) and run them."""

from __future__ import annotations

import logging

from connect_core.cli import _apply, _local, _manage, _pools, _topics  # noqa: F401  (they register their commands)
from connect_core.cli._app import app
from connect_core.runtime.security import install_log_masking

__all__ = ["app", "main"]


def main() -> None:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    install_log_masking()
    app()
