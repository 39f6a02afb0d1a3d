"""File names in file connector configs: made absolute at create time, unless a config provider fills them in."""

from __future__ import annotations

from pathlib import Path

__all__ = ["absolute", "has_placeholder"]


def has_placeholder(filename: str) -> bool:
    return "${" in filename


def absolute(filename: str) -> str:
    """Relative names resolve against the directory the connector was created from (as the seed's do)."""
    return filename if has_placeholder(filename) else str(Path(filename).expanduser().resolve())
