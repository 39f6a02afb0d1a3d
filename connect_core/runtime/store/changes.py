"""Knowing, without a query per request, how far the store's change counter has moved.

A background thread LISTENs on `connect_changes` (NOTIFYed at commit by the
triggers of migration 0002) and, as a safety net, reads the counter itself
every `poll_seconds`. `version()` is then a memory read.

The listener outlives the database: when its connection is lost (the server
stopped, restarted or became unreachable) it reports itself disconnected and
reconnects every `poll_seconds` until the server is back. While disconnected
it cannot vouch for any cached data (NOTIFYs are lost), which `connected` says.
"""

from __future__ import annotations

import logging
import select
import threading
from typing import Any

from sqlalchemy import Engine, text

__all__ = ["ChangeListener"]

log = logging.getLogger(__name__)


class ChangeListener:
    def __init__(self, engine: Engine, poll_seconds: float = 5.0) -> None:
        self._engine = engine
        self._poll = poll_seconds
        # Unknown until the thread's first read: the constructor does no I/O, so an async caller
        # never blocks on a database that is slow or down.
        self._version = -1
        self._connected = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="connect-change-listener", daemon=True)
        self._thread.start()

    def version(self) -> int:
        """The counter as last heard; -1 before the first read."""
        return self._version

    @property
    def connected(self) -> bool:
        """Whether the listener is LISTENing now, so that `version()` is current."""
        return self._connected

    def close(self) -> None:
        self._stop.set()

    def _read(self) -> int:
        with self._engine.connect() as conn:
            return int(conn.execute(text("SELECT n FROM connect.change_counter WHERE id = 1")).scalar() or 0)

    def _run(self) -> None:
        failures = 0
        while not self._stop.is_set():
            try:
                self._listen()
            except Exception as exc:  # the database went away: retry, whatever the error
                self._connected = False
                failures += 1
                if failures == 1:  # once per outage, not every poll
                    log.warning("change listener lost the metadata store (%s); reconnecting", type(exc).__name__)
                self._stop.wait(self._poll)
                continue
            failures = 0

    def _listen(self) -> None:
        raw: Any = self._engine.raw_connection()
        try:
            conn = raw.driver_connection
            conn.autocommit = True
            with conn.cursor() as cur:
                cur.execute("LISTEN connect_changes")
            self._version = max(self._version, self._read())  # changes made before LISTEN took effect
            if not self._connected:
                log.info("change listener is following the metadata store")
            self._connected = True
            while not self._stop.is_set():
                if select.select([conn], [], [], self._poll) == ([], [], []):
                    self._version = max(self._version, self._read())
                    continue
                conn.poll()
                while conn.notifies:
                    note = conn.notifies.pop(0)
                    self._version = max(self._version, int(note.payload or 0))
        finally:
            self._connected = False
            try:
                raw.invalidate()  # never back to the pool: it LISTENs and is in autocommit
            except Exception:
                log.debug("closing the listener's connection failed", exc_info=True)
