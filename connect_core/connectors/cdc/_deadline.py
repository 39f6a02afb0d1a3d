"""A check of a database server that takes at most a given time, whatever the server and driver do.

A request (a REST create, a delete) waits on it, so its bound must hold in every case: a host that
accepts the connection and never answers, a server that answers the handshake and then stalls a
query. Driver timeouts do not cover them all (libpq has none for a query, pymysql none for the
handshake without `read_timeout`), so the check runs in a thread of its own that the caller waits
for at most `seconds`: past that the caller gets `ProbeTimeout` and goes on, and the sockets the
check registered are shut down, which makes the driver's blocked read fail and the thread end.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

from connect_core.sdk.errors import ConfigError, RetriableError

__all__ = ["MAX_CONCURRENT", "Interrupts", "ProbeTimeout", "ProbesBusy", "checked_server", "checked_signal", "within"]

#: Checks that may wait on servers at once in one process: each holds a REST worker thread for up to
#: its deadline, so many stalled ones would starve every other request.
MAX_CONCURRENT = 8
_slots = threading.BoundedSemaphore(MAX_CONCURRENT)

T = TypeVar("T")


class ProbeTimeout(Exception):
    """The check did not finish in time."""


class ProbesBusy(RetriableError):
    """As many checks as may run at once are waiting on their servers: try again shortly (a 503)."""


class Interrupts:
    """The connections a check opened, to be cut if it runs out of time (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._fds: list[int] = []
        self._expired = False

    def add(self, fd: int) -> None:
        """Cut the socket `fd` (a duplicate of it, so this never closes a descriptor reused since)
        when the deadline passes, or now if it has already."""
        dup = os.dup(fd)
        with self._lock:
            if not self._expired:
                self._fds.append(dup)
                return
        _cut(dup)

    def release(self) -> None:
        """The check is over: forget its sockets."""
        with self._lock:
            fds, self._fds = self._fds, []
        for fd in fds:
            os.close(fd)

    def expire(self) -> None:
        with self._lock:
            self._expired = True
            fds, self._fds = self._fds, []
        for fd in fds:
            _cut(fd)


def _cut(fd: int) -> None:
    """Shut the socket down (both ways): a read blocked on it in another thread returns at once."""
    with contextlib.suppress(OSError):
        sock = socket.socket(fileno=fd)
        try:
            sock.shutdown(socket.SHUT_RDWR)
        finally:
            sock.close()  # the duplicate only: the driver closes its own descriptor


class _Outcome(Generic[T]):
    def __init__(self) -> None:
        self.value: T | None = None
        self.error: BaseException | None = None


def within(seconds: float, check: Callable[[Interrupts], T], name: str = "probe") -> T:
    """`check(interrupts)`'s result, or its exception; ProbeTimeout when it has not returned within
    `seconds` (the thread is then left to end once its sockets are cut)."""
    if not _slots.acquire(timeout=min(seconds, 2.0)):
        raise ProbesBusy(
            f"{MAX_CONCURRENT} checks of database servers are waiting on their servers already: try again shortly"
        )
    try:
        return _within(seconds, check, name)
    finally:
        _slots.release()


def _within(seconds: float, check: Callable[[Interrupts], T], name: str) -> T:
    interrupts = Interrupts()
    outcome: _Outcome[T] = _Outcome()

    def run() -> None:
        try:
            outcome.value = check(interrupts)
        except BaseException as exc:  # handed to the caller
            outcome.error = exc
        finally:
            interrupts.release()

    thread = threading.Thread(target=run, name=name, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        interrupts.expire()
        raise ProbeTimeout(f"no answer within {seconds:g} s")
    if outcome.error is not None:
        raise outcome.error
    return outcome.value  # type: ignore[return-value]


def checked_server(
    what: str, server: str, timeout_ms: int, probe: Callable[[Interrupts], dict[str, list[str]]]
) -> dict[str, list[str]]:
    """The problems `probe` finds with the database `what` at `server`, by config key, within
    `timeout_ms` (`probe.timeout.ms`): a server that does not answer, cannot be reached or refuses a
    query makes the config invalid (under `database.hostname`); `ProbesBusy` stays a 503."""
    try:
        return within(timeout_ms / 1000, probe, f"{what.lower()}-cdc-probe")
    except ProbesBusy:
        raise  # a 503: nothing is wrong with the config
    except ProbeTimeout:
        return {
            "database.hostname": [
                f"{what} at {server} did not answer within {timeout_ms} ms "
                "(probe.timeout.ms): is the host and port right, and the server up?"
            ]
        }
    except ConfigError as exc:
        return dict(exc.errors) if exc.errors else {"database.hostname": [str(exc)]}
    except RetriableError as exc:
        return {"database.hostname": [str(exc)]}
    except Exception as exc:  # a query the server refused: the config cannot work as it is
        return {"database.hostname": [f"checking {what} at {server}: {str(exc).strip()}"]}


def checked_signal(
    what: str, server: str, timeout_ms: int, check: Callable[[Interrupts], dict[str, list[str]]]
) -> None:
    """A signal checked against the database `what` at `server` before it is queued, within
    `timeout_ms` (`probe.timeout.ms`): ConfigError (a 400) naming every problem `check` finds, by the
    signal's key at fault; RetriableError (a 503) when the server does not answer in time."""
    try:
        problems = within(timeout_ms / 1000, check, f"{what.lower()}-cdc-signal")
    except ProbeTimeout as exc:
        raise RetriableError(
            f"{what} at {server} did not answer within {timeout_ms} ms (probe.timeout.ms): the signal is not "
            "queued; send it again once the server answers"
        ) from exc
    if problems:
        raise ConfigError(
            "the signal cannot be acted on: " + "; ".join(p for found in problems.values() for p in found), problems
        )
