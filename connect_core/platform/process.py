"""Who the running platform is, and how `connect airflow down` stops exactly it.

`connect airflow up` holds a lock on `airflow/platform.lock` for its whole life (`PlatformLease`) and
records itself and each process it starts (pid, start time, process group) in `airflow/platform.json`.
`down` signals only while that lock is held, only processes that are still the ones recorded (same
start time; through a pidfd where the kernel has them), and never a process group `up` did not make.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import select
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from connect_core.platform._files import private_dir, read_private, write_private
from connect_core.sdk.errors import FatalError


def pid_file(home: Path) -> Path:
    """Where a running platform of the data directory `home` says who it is (`connect airflow down`)."""
    return home / "airflow" / "platform.json"


def lock_file(home: Path) -> Path:
    """The file a running `connect airflow up` of `home` holds locked for its whole life: a pid file
    whose lock nobody holds is stale, whatever process its pid names now."""
    return home / "airflow" / "platform.lock"


_UP = "`connect airflow up`"  # how reports name the platform's own process


@dataclass(frozen=True)
class RecordedProcess:
    """A process of the platform, as `up` recorded it: its pid and start time (clock ticks since boot,
    `/proc/<pid>/stat` field 22: a reused pid has another), and whether `up` made it a process group."""

    name: str
    pid: int
    start: int
    group: bool = False


@dataclass(frozen=True)
class PlatformRecord:
    """What `platform.json` says: the `connect airflow up` process, its data directory and address, and
    the processes it started (Airflow's components, the warm pool's server and worker), as they started."""

    up: RecordedProcess
    home: str
    url: str
    started: float
    processes: tuple[RecordedProcess, ...] = ()

    @classmethod
    def parse(cls, text: str) -> PlatformRecord | None:
        """The record `text` holds, or None if it is not one (an older format, a crafted file)."""
        try:
            data = json.loads(text)
            up = RecordedProcess(_UP, _pid(data["pid"]), _ticks(data["start"]))
            processes = tuple(
                RecordedProcess(str(p["name"]), _pid(p["pid"]), _ticks(p["start"]), p["group"] is True)
                for p in data.get("processes", [])
            )
            return cls(up, str(data["home"]), str(data["url"]), float(data["started"]), processes)
        except (ValueError, KeyError, TypeError, AttributeError):
            return None

    def dump(self) -> str:
        return json.dumps(
            {
                "pid": self.up.pid,
                "start": self.up.start,
                "home": self.home,
                "url": self.url,
                "started": self.started,
                "processes": [
                    {"name": p.name, "pid": p.pid, "start": p.start, "group": p.group} for p in self.processes
                ],
            }
        )


def _pid(value: object) -> int:
    if type(value) is not int or value <= 1:  # 0, -1 and 1 would signal groups, everything, init
        raise ValueError(f"not a pid: {value!r}")
    return value


def _ticks(value: object) -> int:
    if type(value) is not int or value < 0:
        raise ValueError(f"not a start time: {value!r}")
    return value


@dataclass(frozen=True)
class _Stat:
    state: str
    pgrp: int
    start: int


def _stat(pid: int) -> _Stat | None:
    """State, process group and start time of process `pid` (`/proc/<pid>/stat`), or None if gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
        fields = text[text.rindex(")") + 2 :].split()  # after the command name, which may hold anything
        return _Stat(fields[0], int(fields[2]), int(fields[19]))
    except (OSError, ValueError, IndexError):
        return None


def _start_ticks(pid: int) -> int:
    found = _stat(pid)
    if found is None:
        raise ProcessLookupError(f"process {pid} is gone")
    return found.start


class _Process:
    """A recorded process, checked to be that very process (its start time) and, where the kernel
    has them, held by a pidfd: a pid reused between the check and a signal is never signalled."""

    def __init__(self, recorded: RecordedProcess, fd: int | None) -> None:
        self.recorded, self._fd = recorded, fd

    @classmethod
    def find(cls, recorded: RecordedProcess) -> _Process | None:
        """The process `recorded` names, if that very process still runs."""
        fd = None
        if hasattr(os, "pidfd_open"):
            try:
                fd = os.pidfd_open(recorded.pid)
            except ProcessLookupError:
                return None
            except OSError:  # a kernel without pidfds: the start time is checked again before each signal
                fd = None
        found = cls(recorded, fd)  # the pidfd, opened first, is the process whose start time is checked now
        if not found.alive():
            found.close()
            return None
        return found

    def alive(self) -> bool:
        if self._fd is not None and select.select([self._fd], [], [], 0)[0]:
            return False  # a pidfd reads ready once its process exited
        found = _stat(self.recorded.pid)
        return found is not None and found.start == self.recorded.start and found.state not in "ZX"

    def wait(self, timeout: float) -> bool:
        """Wait up to `timeout` s for it to exit; whether it did."""
        deadline = time.monotonic() + timeout
        while self.alive():
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            if self._fd is not None:
                select.select([self._fd], [], [], min(left, 1.0))
            else:
                time.sleep(min(left, 0.2))
        return True

    def send(self, sig: int) -> None:
        """Signal this process (never another one that took its pid)."""
        try:
            if self._fd is not None:
                signal.pidfd_send_signal(self._fd, sig)
            elif self.alive():
                os.kill(self.recorded.pid, sig)
        except ProcessLookupError:
            pass

    def kill(self) -> None:
        """SIGKILL to it and, if `up` made it a process group, to that group: only while it still
        leads it (its pid, held by the leader, cannot name another group meanwhile), never this one's."""
        found = _stat(self.recorded.pid)
        leads = found is not None and found.pgrp == self.recorded.pid and found.start == self.recorded.start
        if self.recorded.group and leads and self.alive() and self.recorded.pid != os.getpgrp():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.recorded.pid, signal.SIGKILL)
        self.send(signal.SIGKILL)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __str__(self) -> str:
        return f"{self.recorded.name} (pid {self.recorded.pid})"


def _read_record(home: Path) -> PlatformRecord | None:
    """The pid file of `home`, if it is one this user wrote (never read through a link)."""
    path = pid_file(home)
    try:
        if path.parent.stat().st_uid != os.getuid() or path.parent.stat().st_mode & 0o022:
            return None  # a folder someone else can write to: its pid file could name anything
        return PlatformRecord.parse(read_private(path))
    except (OSError, UnicodeDecodeError):
        return None


@contextlib.contextmanager
def _lock_probe(home: Path) -> Iterator[bool]:
    """For the block: whether no `connect airflow up` holds `home`'s lock (held shared meanwhile, so
    that none starts and writes its pid file while the caller removes a stale one)."""
    if not lock_file(home).parent.is_dir():
        yield True
        return
    fd = os.open(lock_file(home), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
        else:
            yield True
    finally:
        os.close(fd)


def _same_home(record: PlatformRecord, home: Path) -> bool:
    return record.home == str(home.resolve())


def _lock_holders(path: Path) -> set[int] | None:
    """The pids holding a flock on `path` (`/proc/locks`), or None where the kernel does not say."""
    try:
        found = path.stat()
        table = Path("/proc/locks").read_text()
    except OSError:
        return None
    inode = f"{os.major(found.st_dev):02x}:{os.minor(found.st_dev):02x}:{found.st_ino}"
    holders = set()
    for line in table.splitlines():
        fields = line.split()  # `1: FLOCK  ADVISORY  WRITE 1234 00:2f:5678 0 EOF`; waiters have `->`
        if len(fields) >= 6 and fields[1] == "FLOCK" and fields[5] == inode and fields[4].isdigit():
            holders.add(int(fields[4]))
    return holders


def running_platform(home: Path) -> PlatformRecord | None:
    """The platform running for `home`: the record of the `connect airflow up` that holds its lock,
    checked against that process (its start time, its hold of the lock in `/proc/locks`) and the data
    directory. None when no `up` holds the lock; FatalError when one does but the pid file does not
    name it (nothing is signalled then)."""
    with _lock_probe(home) as free:
        if free:
            return None
        record = _read_record(home)
        holders = _lock_holders(lock_file(home))
        named = record is not None and _same_home(record, home) and (holders is None or record.up.pid in holders)
        up = _Process.find(record.up) if record is not None and named else None
    if up is None:
        raise FatalError(
            f"a `connect airflow up` holds `{lock_file(home)}`, but `{pid_file(home)}` does not name it (it may be "
            "starting: try again); nothing was signalled. Stop it with Ctrl-C in its shell"
        )
    up.close()
    return record


@dataclass(frozen=True)
class StopReport:
    """What `stop_platform` did: whether a platform ran; if none did, whether it removed a stale pid file
    (no `up` held the lock) and the record that held, if one; what it had to kill (past the timeout, or
    left behind), and what survived that."""

    ran: bool
    removed_stale: bool = False
    stale: PlatformRecord | None = None
    killed: tuple[str, ...] = ()
    survived: tuple[str, ...] = ()


def clear_stale_platform(home: Path) -> StopReport:
    """With no `connect airflow up` holding `home`'s lock: remove its stale pid file, and kill what that
    recorded and still runs (each checked to be that very process: an `up` killed outright leaves its
    components running). With one holding it: nothing (`ran`)."""
    with _lock_probe(home) as free:
        if not free:
            return StopReport(ran=True)
        stale = _read_record(home)
        try:
            pid_file(home).unlink()
        except FileNotFoundError:
            return StopReport(ran=False)
        if stale is None or not _same_home(stale, home):
            return StopReport(ran=False, removed_stale=True, stale=stale)
        killed, survived = _kill_all(_find_all(stale.processes))
        return StopReport(ran=False, removed_stale=True, stale=stale, killed=killed, survived=survived)


def stop_platform(home: Path, *, timeout: float = 90.0, progress: Callable[[float], None] | None = None) -> StopReport:
    """SIGTERM to the platform running for `home` (it stops Airflow's components and its warm pool, as
    Ctrl-C does), then wait for it to exit; past `timeout`, SIGKILL to exactly the processes it recorded
    (each checked to be that very process), then to it. With none running, `clear_stale_platform`."""
    record = running_platform(home)
    up = _Process.find(record.up) if record is not None else None
    if record is None or up is None:
        return clear_stale_platform(home)
    started = time.monotonic()
    try:
        up.send(signal.SIGTERM)
        while not up.wait(1.0):
            waited = time.monotonic() - started
            if waited >= timeout:
                break
            if progress is not None:
                progress(waited)
        # Its record as of now (the warm pool's may have come in meanwhile); its children first, while
        # it still lives: a group leader that died stays a zombie, its pid (and group) not reusable.
        children = _find_all((_read_record(home) or record).processes)
        late = [up] if up.alive() else []
        killed, survived = _kill_all(children + late)
    finally:
        up.close()
    with _lock_probe(home) as free:
        if free:  # killed: its pid file is stale
            pid_file(home).unlink(missing_ok=True)
    return StopReport(ran=True, killed=killed, survived=survived)


def _find_all(recorded: tuple[RecordedProcess, ...]) -> list[_Process]:
    return [p for p in (_Process.find(r) for r in recorded) if p is not None]


def _kill_all(found: list[_Process]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """SIGKILL to each of `found`; (what was killed, what still runs 5 s later)."""
    try:
        for process in found:
            process.kill()
        survived = tuple(str(p) for p in found if not p.wait(5.0))
        return tuple(str(p) for p in found), survived
    finally:
        for process in found:
            process.close()


class PlatformLease:
    """What a running `connect airflow up` holds for its data directory, from its first step to its
    last: SIGTERM (`connect airflow down`) and SIGINT (Ctrl-C) handlers that raise KeyboardInterrupt
    once (a second signal does not cut the clean-up short), the lock of `lock_file`, and the pid file,
    to which `record` adds each process it starts. All are given back on leaving, however it ends."""

    _LOCK_WAIT_S = 2.0  # a `down` holds the lock shared for a moment only

    def __init__(self, home: Path, url: str) -> None:
        self._home, self._url = home, url
        self._record: PlatformRecord | None = None
        self._fd: int | None = None
        self._mutex = threading.Lock()  # the warm pool's thread records too
        self._stopping = False
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> PlatformLease:
        for sig in (signal.SIGTERM, signal.SIGINT):
            self._previous[sig] = signal.signal(sig, self._on_signal)
        try:
            private_dir(self._home / "airflow")
            self._fd = self._lock()
            up = RecordedProcess(_UP, os.getpid(), _start_ticks(os.getpid()))
            self._record = PlatformRecord(up, str(self._home.resolve()), self._url, time.time())
            write_private(pid_file(self._home), self._record.dump())
        except BaseException:
            self._leave()
            raise
        return self

    def __exit__(self, *_: object) -> None:
        self._leave()

    def record(self, name: str, pid: int, *, group: bool) -> None:
        """Add process `pid` (`name`; `group`: started with start_new_session) to the pid file: a
        `down` that has to kill kills it too."""
        with self._mutex:
            if self._record is None:  # left already
                return
            try:
                recorded = RecordedProcess(name, pid, _start_ticks(pid), group)
            except ProcessLookupError:
                return
            self._record = replace(self._record, processes=(*self._record.processes, recorded))
            write_private(pid_file(self._home), self._record.dump())

    def _on_signal(self, *_: object) -> None:
        if not self._stopping:
            self._stopping = True
            raise KeyboardInterrupt

    def _lock(self) -> int:
        fd = os.open(lock_file(self._home), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        deadline = time.monotonic() + self._LOCK_WAIT_S
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return fd
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    break
                time.sleep(0.05)
        os.close(fd)
        record = _read_record(self._home)
        shown = f" (pid {record.up.pid}, {record.url})" if record is not None else ""
        raise FatalError(
            f"a `connect airflow up` already runs for `{self._home}`{shown}; stop it with `connect airflow down`"
        )

    def _leave(self) -> None:
        with self._mutex:
            if self._record is not None:
                pid_file(self._home).unlink(missing_ok=True)  # before the lock goes: never another up's file
                self._record = None
            if self._fd is not None:
                os.close(self._fd)  # releases the lock
                self._fd = None
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()
