"""What the REST API adds to the management room: JSON bytes kept until the store changes.

The operations are the runtime's (`LocalManagement`); this keeps the JSON of whole lists and of
single statuses, and answers Kafka's `GET /` and `/health`.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

from connect_core import __version__
from connect_core.runtime.context import Runtime
from connect_core.runtime.management import LocalManagement
from connect_core.runtime.store.changes import ChangeListener
from connect_core.runtime.store.connectors import Listing, Page

__all__ = ["ConnectService", "server_info"]


def server_info() -> dict[str, Any]:
    """Kafka's `GET /`: needs no database, so it answers while the metadata store is down."""
    return {"version": __version__, "commit": "connect-core", "kafka_cluster_id": "connect-core"}


#: Statuses kept as JSON at most (one per connector read since the store last changed).
_MAX_KEPT_STATUSES = 20_000


@dataclass(frozen=True)
class _Kept:
    """JSON as of a change count: current while the listener has heard of no later change."""

    version: int
    body: bytes
    #: when its read began (time.monotonic)
    started: float = 0.0


class ConnectService(LocalManagement):
    """The management room as the REST API serves it.

    The JSON of whole lists and of single statuses is kept until the store's change counter moves:
    the counter is followed by LISTEN/NOTIFY, so a hot read of a store that did not change costs no
    query. Pages are read, never kept. A write through this service drops what it keeps.
    """

    def __init__(self, runtime: Runtime) -> None:
        super().__init__(runtime, on_write=self._changed)
        self._lists: dict[str, _Kept] = {}
        self._statuses: dict[str, _Kept] = {}
        self._building: dict[str, threading.Lock] = {}
        self._start = threading.Lock()
        #: Bumped by every write of this service: what was read before a write is not kept after it.
        self._writes = 0
        self._changes: ChangeListener | None = None

    def close(self) -> None:
        if self._changes is not None:
            self._changes.close()

    def server_info(self) -> dict[str, Any]:
        return server_info()

    def check_store(self) -> str | None:
        """One round trip to the metadata store (for /health): why this server cannot serve yet (the
        schema is not at this code's migrations), or None; raises what the driver raised."""
        from connect_core.runtime.store import migrate

        with self.rt.engine.connect() as conn:
            at = migrate.current(conn)
        if at != migrate.head():
            return (
                f"the metadata schema is at revision {at or 'none'}, this server needs {migrate.head()}: "
                "run `connect db upgrade` (servers also upgrade it when they start)"
            )
        return None

    def _changed(self) -> None:
        """This service wrote: drop what it keeps, so that its next read sees the write."""
        self._writes += 1
        self._lists, self._statuses = {}, {}

    def _current(self, kept: _Kept | None) -> bytes | None:
        """`kept`'s JSON if no later change was heard, without any I/O (for async endpoints). The
        first call starts the listener that follows the change counter (only servers need it)."""
        if self._changes is None:
            with self._start:
                if self._changes is None:
                    self._changes = ChangeListener(self.rt.engine)
            return None
        # While the listener is disconnected it hears no NOTIFY, so nothing kept is served: when
        # the store is down, reads answer 503 rather than a state nobody can vouch for.
        if kept is None or not self._changes.connected or kept.version < self._changes.version():
            return None
        return kept.body

    def _vouched_version(self) -> int | None:
        """The change count the listener has heard, read before a query: what the query reads is
        at least that new. None while the listener cannot vouch for it."""
        changes = self._changes
        return changes.version() if changes is not None and changes.connected and changes.version() >= 0 else None

    def cached_list(self, view: str) -> bytes | None:
        """The whole list's JSON in `view` if it is current (no I/O); else None."""
        return self._current(self._lists.get(view))

    def cached_status(self, name: str) -> bytes | None:
        """The connector's status JSON if it is current (no I/O); else None."""
        return self._current(self._statuses.get(name))

    def status_json(self, name: str) -> bytes:
        """The connector's status as JSON: one query for that connector, kept until the store changes."""
        vouched, writes = self._vouched_version(), self._writes
        body = json.dumps(self.status(name)).encode()
        if vouched is not None and writes == self._writes:  # no write of ours since the read began
            if len(self._statuses) >= _MAX_KEPT_STATUSES:
                self._statuses = {}
            self._statuses[name] = _Kept(vouched, body)
        return body

    def list_json(self, view: str, expand: Collection[str], render: Callable[[Listing], Any]) -> bytes:
        """The whole list's JSON in `view`: `render` of every connector with `expand` (`info`,
        `status`), kept until the store changes. One rebuild at a time per view: the requests
        that waited for it take its result, as it was read after they arrived."""
        arrived = time.monotonic()
        with self._building.setdefault(view, threading.Lock()):
            kept = self._lists.get(view)
            if kept is not None and kept.started >= arrived:
                return kept.body
            version = self.rt.connectors.change_count()
            if kept is not None and kept.version >= version:
                return kept.body
            writes, started = self._writes, time.monotonic()
            listing = self.listing(expand, Page())
            body = json.dumps(render(listing)).encode()
            if writes == self._writes:  # no write of ours since the read began: it is current
                self._lists[view] = _Kept(listing.version, body, started)
            return body
