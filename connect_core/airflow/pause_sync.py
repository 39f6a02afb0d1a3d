"""Pausing a connector's DAG in Airflow pauses the connector; unpausing resumes it.

The other direction (REST/CLI pause → the DAG is paused) is `Runtime.set_target_state`. This one is
an ASGI middleware the Connect plugin installs in Airflow's api-server (`fastapi_root_middlewares`):
the UI's pause toggle and the REST API both pause DAGs with `PATCH /api/v2/dags/{dag_id}` or
`PATCH /api/v2/dags?dag_id_pattern=…`, and that server is the one place every such change passes.
It sees the change itself, with its direction, when it happens — unlike a poller comparing the two
states, which cannot tell which side moved last — and it answers the PATCH only once the
connector's target state has followed, so a client that reads the connector next sees it.

Airflow 3.3 has no listener hook for a DAG's pause. A pause made around the api-server (the
`airflow dags pause` CLI writing the database directly) is not mirrored.
"""

from __future__ import annotations

import json
import logging
import re
import threading
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import anyio

from connect_core.runtime.airflow_client import connector_for_dag, dag_id_for
from connect_core.runtime.store.connectors import ConnectorStore
from connect_core.runtime.store.states import TargetState
from connect_core.sdk.errors import NotFoundError

__all__ = ["DagPauseMirror", "mirror_pause"]

log = logging.getLogger(__name__)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
ASGIApp = Callable[[Scope, Callable[[], Awaitable[Message]], Callable[[Message], Awaitable[None]]], Awaitable[None]]

# `…/api/v2/dags` or `…/api/v2/dags/<dag id>` (the api-server may sit under a base path).
_DAGS_PATH = re.compile(r"/api/v2/dags(?:/[^/]+)?/?")
#: Largest PATCH answer buffered for inspection (a bulk pause of many DAGs); a bigger one passes as is.
_MAX_BODY = 4 * 1024 * 1024

#: (target state, whether its DAG is now paused) → the target state that follows the DAG's pause.
_FOLLOWING_PAUSE: dict[tuple[str, bool], TargetState] = {
    (TargetState.RUNNING, True): TargetState.PAUSED,
    (TargetState.PAUSED, False): TargetState.RUNNING,
}


def mirror_pause(store: ConnectorStore, dag_id: str, paused: bool) -> str | None:
    """Set the target state of the connector of `dag_id` to follow its DAG's pause: RUNNING → PAUSED,
    PAUSED → RUNNING (a STOPPED connector stays stopped). The new state, or None if nothing changed."""
    name = _connector(store, dag_id)
    if name is None:
        return None
    state = store.get(name).target_state
    wanted = _FOLLOWING_PAUSE.get((state, paused))
    if wanted is None:
        return None
    store.set_target_state(name, wanted)
    log.info("connector `%s` is %s: its DAG `%s` was %s in Airflow", name, wanted, dag_id, _verb(paused))
    return wanted


def _verb(paused: bool) -> str:
    return "paused" if paused else "unpaused"


def _connector(store: ConnectorStore, dag_id: str) -> str | None:
    name = connector_for_dag(dag_id)
    if name is None:
        return None
    try:
        store.get(name)
        return name
    except NotFoundError:
        # A name stored before names had to map verbatim (`a b` → `connect__a_b`).
        return next((n for n in store.names() if dag_id_for(n) == dag_id), None)


class DagPauseMirror:
    """ASGI middleware: after Airflow answers a DAG PATCH with 200, mirror each Connect DAG's `is_paused`."""

    def __init__(self, app: ASGIApp, store: Callable[[], ConnectorStore] | None = None) -> None:
        self.app = app
        self._store_factory = store or _default_store
        self._store: ConnectorStore | None = None
        self._lock = threading.Lock()

    async def __call__(
        self, scope: Scope, receive: Callable[[], Awaitable[Message]], send: Callable[[Message], Awaitable[None]]
    ) -> None:
        if scope["type"] != "http" or scope["method"] != "PATCH" or not _DAGS_PATH.search(scope["path"]):
            await self.app(scope, receive, send)
            return
        start: Message | None = None
        bodies: list[Message] = []
        size = 0
        passing = False  # not a 200, or too big to inspect: hand on as it comes

        async def hold(message: Message) -> None:
            nonlocal start, passing, size
            if passing or message["type"] not in ("http.response.start", "http.response.body"):
                await send(message)
            elif message["type"] == "http.response.start" and message["status"] != 200:
                passing = True
                await send(message)
            elif message["type"] == "http.response.start":
                start = message
            else:
                bodies.append(message)
                size += len(message.get("body", b""))
                if size > _MAX_BODY:
                    passing = True
                    for held in [start, *bodies]:
                        await send(held)  # type: ignore[arg-type]

        await self.app(scope, receive, hold)
        if passing or start is None:
            return
        # Answer only once the connector has followed, so a client reading it next sees the change.
        await anyio.to_thread.run_sync(self._mirror, b"".join(m.get("body", b"") for m in bodies))
        for message in [start, *bodies]:
            await send(message)

    def _mirror(self, body: bytes) -> None:
        try:
            answer = json.loads(body)
            dags = answer.get("dags", [answer]) if isinstance(answer, dict) else []
            changes = [(d["dag_id"], d["is_paused"]) for d in dags if isinstance(d, dict) and "is_paused" in d]
            changes = [(dag_id, paused) for dag_id, paused in changes if connector_for_dag(str(dag_id))]
            if not changes:
                return
            store = self._connector_store()
            for dag_id, paused in changes:
                mirror_pause(store, str(dag_id), bool(paused))
        except Exception:  # Airflow's answer stands; the connector keeps its state, and says so in the log
            log.exception("could not mirror a DAG pause to its Connect connector")

    def _connector_store(self) -> ConnectorStore:
        with self._lock:
            if self._store is None:
                self._store = self._store_factory()
            return self._store


def _default_store() -> ConnectorStore:
    from connect_core.runtime.settings import Settings
    from connect_core.runtime.store.db import database_url, make_engine

    settings = Settings()
    return ConnectorStore(make_engine(database_url(settings), pool_size=1, max_overflow=2))
