"""Files of the platform only this user may read: made 0600 from their first byte, never through a link."""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path

from connect_core.sdk.errors import FatalError


def private_dir(path: Path) -> Path:
    """`path` made (0700) or checked: this user's alone, for the admin password and the pid file."""
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    found = path.stat()
    if found.st_uid != os.getuid():
        raise FatalError(f"`{path}` belongs to another user: the platform's password and pid file cannot be kept there")
    if found.st_mode & 0o077:
        path.chmod(0o700)
    return path


def write_private(path: Path, text: str, *, replace: bool = True) -> None:
    """Write `text` to `path`, readable by this user only from its first byte: a new file (0600, never
    through a link) under a temporary name in the same folder, renamed over `path` (a rename replaces a
    link there, never follows it) or, with `replace=False`, linked to `path` unless it exists already."""
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(8)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        with os.fdopen(fd, "w") as out:
            out.write(text)
        if replace:
            os.replace(tmp, path)
        else:
            with contextlib.suppress(FileExistsError):  # made meanwhile by another process: it stands
                os.link(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def read_private(path: Path, limit: int = 1 << 16) -> str:
    """The text of `path` (at most `limit` bytes), never read through a link (OSError then)."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as found:
        return found.read(limit).decode()
