"""File names in file connector configs, and opening them safely.

Where a file may be is not decided here: `filename` is a `LocalPath`, which the runtime confines
to `file.allowed.paths` (at create and again where the task runs, handing the task the resolved
path). What is decided here is what it may be: a regular file. A FIFO would block the reader
forever waiting for a writer, a device such as `/dev/zero` never ends, a directory is no file.
"""

from __future__ import annotations

import errno
import os
import stat

from connect_core.sdk import ConfigError, LineageDataset, RetriableError

__all__ = ["absolute", "check_target", "file_dataset", "has_placeholder", "open_regular"]


def has_placeholder(filename: str) -> bool:
    return "${" in filename


def _real(filename: str) -> str:
    # os.path, not pathlib: it never raises for `~unknown-user` or a symlink loop.
    return os.path.realpath(os.path.expanduser(filename))


def _kind(mode: int) -> str | None:
    """What a non-regular file is, in words; None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    for test, name in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def _kind_of(path: str) -> str:
    try:
        return _kind(os.stat(path).st_mode) or "not a regular file"
    except OSError:
        return "not a regular file"


def _not_regular(filename: str, kind: str) -> str:
    return f"`{filename}` is {kind}: file connectors read and write regular files only; fix `filename`"


def check_target(filename: str, *, writable: bool = False) -> dict[str, list[str]]:
    """The `filename` problems a connector's `validate` reports: an existing file must be a regular
    one, and its directory must exist (and be writable)."""
    if has_placeholder(filename):
        return {}  # resolved only where the task runs: checked then
    if "\x00" in filename:
        return {"filename": ["contains a NUL byte, which no file name can hold"]}
    real = _real(filename)
    try:
        kind = _kind(os.stat(real).st_mode)
    except OSError:
        kind = None  # absent (created later) or unreadable: the directory check below says more
    if kind:
        return {"filename": [_not_regular(filename, kind)]}
    parent = os.path.dirname(real)
    if not os.path.isdir(parent):
        return {"filename": [f"directory `{parent}` does not exist"]}
    if writable and not os.access(parent, os.W_OK):
        return {"filename": [f"directory `{parent}` is not writable"]}
    return {}


def absolute(filename: str) -> str:
    """Relative names resolve against the directory the connector was created from (as the seed's do)."""
    return filename if has_placeholder(filename) else _real(filename)


def open_regular(path: str, flags: int, *, purpose: str) -> int:
    """A descriptor of `path` opened with `flags`, refused unless it is a regular file.

    `O_NONBLOCK` makes opening a FIFO return at once instead of waiting for its other end (it
    changes nothing for a regular file); `O_NOFOLLOW` refuses a last component swapped for a
    symlink after the runtime resolved and checked the path. The type is checked on the open
    descriptor, so it is the type of what will be read or written.
    """
    try:
        fd = os.open(path, flags | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)
    except FileNotFoundError as exc:
        raise RetriableError(f"{purpose} `{path}` does not exist; create it or fix `filename`") from exc
    except PermissionError as exc:
        raise RetriableError(f"{purpose} `{path}` cannot be opened by this process: {exc.strerror}") from exc
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise RetriableError(f"{purpose} `{path}` became a symlink after it was checked; not following it") from exc
        if exc.errno in (errno.EISDIR, errno.ENXIO, errno.ENODEV):  # a directory, a FIFO with no reader, …
            raise ConfigError(_not_regular(path, _kind_of(path))) from exc
        raise RetriableError(f"{purpose} `{path}` cannot be opened: {exc.strerror}") from exc
    kind = _kind(os.fstat(fd).st_mode)
    if kind:
        os.close(fd)
        raise ConfigError(_not_regular(path, kind))
    return fd


def file_dataset(filename: str) -> LineageDataset:
    """A file as OpenLineage names it: this host's file system, the real path."""
    import socket

    return LineageDataset(f"file://{socket.gethostname()}", _real(filename))
