"""The processes a warm pool runs on this machine (its Spark Connect server, its worker), found by
their pid files under `CONNECT_HOME/pools`.

A pid file records the process's start time as well as its pid, so that a stale file whose pid the
kernel has since given to another process never gets that process signalled.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = ["locked", "pid_alive", "running", "stop", "terminate", "write_pid_file"]


def _start_ticks(pid: int) -> int | None:
    """The process's start time (clock ticks since boot, `/proc/<pid>/stat` field 22), or None."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat[stat.rindex(")") + 2 :].split()[19])  # fields after the command name, which may hold spaces


@contextlib.contextmanager
def locked(path: Path, *, wait: bool = True) -> Iterator[bool]:
    """An exclusive lock on `path` (created 0600) for the block: two `connect pools start` or `stop`
    of one pool at once take turns. With `wait=False` the block gets False instead of waiting."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(fd)  # releases the lock


def write_pid_file(path: Path, pid: int, **extra: Any) -> None:
    """Record process `pid` (and `extra`) in `path`, readable by this user only."""
    path.write_text(json.dumps({"pid": pid, "start": _start_ticks(pid), **extra}))
    os.chmod(path, 0o600)


def running(path: Path) -> int | None:
    """The pid of the process `path` records, if that very process still runs."""
    try:
        recorded = json.loads(path.read_text())
        pid, start = int(recorded.get("pid", 0)), recorded.get("start")
    except (OSError, ValueError, AttributeError, TypeError):
        return None
    if not pid_alive(pid) or (start is not None and _start_ticks(pid) != start):
        return None
    return pid


def pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:  # a child of this process that died is a zombie until reaped
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return False
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie of another parent is as good as gone
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def terminate(pid: int, timeout: float = 30.0) -> None:
    """SIGTERM to the process's group, SIGKILL if it is still there after `timeout`."""
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not pid_alive(pid):
            return
        time.sleep(0.2)
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def stop(path: Path, timeout: float = 30.0) -> bool:
    """Stop the process `path` records (if it still runs) and delete the file; whether it ran."""
    if not path.exists():
        return False
    pid = running(path)
    if pid is not None:
        terminate(pid, timeout)
    path.unlink(missing_ok=True)
    return pid is not None
