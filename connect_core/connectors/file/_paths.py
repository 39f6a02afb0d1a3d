"""File names in file connector configs: made absolute at create time, unless a config provider fills them in."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["absolute", "check_directory", "has_placeholder"]


def has_placeholder(filename: str) -> bool:
    return "${" in filename


def check_directory(filename: str, *, writable: bool = False) -> dict[str, list[str]]:
    """The `filename` problems a connector's `validate` reports: its directory must exist (and be writable)."""
    if has_placeholder(filename):
        return {}  # resolved only where the task runs: checked then
    parent = Path(filename).expanduser().resolve().parent
    if not parent.is_dir():
        return {"filename": [f"directory `{parent}` does not exist"]}
    if writable and not os.access(parent, os.W_OK):
        return {"filename": [f"directory `{parent}` is not writable"]}
    return {}


def absolute(filename: str) -> str:
    """Relative names resolve against the directory the connector was created from (as the seed's do)."""
    return filename if has_placeholder(filename) else str(Path(filename).expanduser().resolve())
