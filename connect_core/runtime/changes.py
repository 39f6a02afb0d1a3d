"""Knowing, without a query per request, how far the store's change counter has moved.

A background thread LISTENs on `connect_changes` (NOTIFYed at commit by the
triggers of migration 0002) and, as a safety net, reads the counter itself
every `poll_seconds`. `version()` is then a memory read.
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
        self._version = self._read()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="connect-change-listener", daemon=True)
        self._thread.start()

    def version(self) -> int:
        return self._version

    def close(self) -> None:
        self._stop.set()

    def _read(self) -> int:
        with self._engine.connect() as conn:
            return int(conn.execute(text("SELECT n FROM connect.change_counter WHERE id = 1")).scalar() or 0)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._listen()
            except Exception:  # reconnect after a database restart; meanwhile poll
                log.warning("change listener lost its connection; retrying", exc_info=True)
                self._stop.wait(self._poll)

    def _listen(self) -> None:
        raw: Any = self._engine.raw_connection()
        try:
            conn = raw.driver_connection
            conn.autocommit = True
            with conn.cursor() as cur:
                cur.execute("LISTEN connect_changes")
            self._version = max(self._version, self._read())  # changes made before LISTEN took effect
            while not self._stop.is_set():
                if select.select([conn], [], [], self._poll) == ([], [], []):
                    self._version = max(self._version, self._read())
                    continue
                conn.poll()
                while conn.notifies:
                    note = conn.notifies.pop(0)
                    self._version = max(self._version, int(note.payload or 0))
        finally:
            raw.close()
