"""The `connect` command (Typer): manage connectors (locally or over REST) and run them."""

from __future__ import annotations

import logging
import sys

from connect_core.cli import _apply, _local, _manage, _pools, _schemas, _topics  # noqa: F401  (they register their commands)
from connect_core.cli._app import app, debugging, door_problem, print_error
from connect_core.runtime.security import install_log_masking

__all__ = ["app", "main"]


def main() -> None:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    install_log_masking()
    try:
        app()
    except Exception as exc:  # what no command turned into a message: one line if it is a failure at the door
        problem = door_problem(exc)
        if problem is None or debugging():
            raise  # a bug: Typer shows the traceback
        print_error(problem)
        sys.exit(1)
