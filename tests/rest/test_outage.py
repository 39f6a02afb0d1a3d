"""The metadata database goes away under a served app, and comes back.

Requests that need the store answer 503 with `Retry-After` within seconds and a message
naming the store (no driver text, no address); what needs no store (`GET /`) still answers;
`/health` says why the worker is unhealthy; when the server is back, the same app serves again.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from connect_core.rest.app import create_app
from connect_core.rest.auth import bearer_or_loopback
from connect_core.runtime.context import Runtime
from connect_core.runtime.settings import Settings
from tests.rest._throwaway_pg import ThrowawayPostgres
from tests.rest.conftest import Served, serve

#: Every route family that needs the store: Kafka's reads (fast path and not) and writes, RocketMQ's, pools.
NEEDS_STORE: list[tuple[str, str, Any]] = [
    ("GET", "/connectors", None),
    ("GET", "/connectors?expand=status", None),
    ("GET", "/connectors/src/status", None),
    ("GET", "/connectors/src/config", None),
    ("POST", "/connectors", "a valid config"),
    ("PATCH", "/connectors/src/config", {"extra": "1"}),
    ("PUT", "/connectors/src/pause", None),
    ("GET", "/connectors/list", None),
    ("GET", "/rocketmq/connectors/src/status", None),
    ("GET", "/pools", None),
]


@pytest.fixture
def served(pg: ThrowawayPostgres, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Served, Runtime]]:
    monkeypatch.setenv("CONNECT_FILE_ALLOWED_PATHS", str(tmp_path))  # as tests/conftest.py's `settings`
    rt = Runtime.open(Settings(database_url=pg.url, home=tmp_path / "home", file_allowed_paths=str(tmp_path)))
    gen = serve(create_app(lambda: rt, auth=[bearer_or_loopback(None)]))
    yield next(gen), rt
    next(gen, None)
    rt.close()


def _source(tmp_path: Path) -> dict[str, Any]:
    return {"connector.class": "FileSourceConnector", "file": str(tmp_path / "in.txt"), "topic": "t"}


def _assert_store_unavailable(response: httpx.Response, pg: ThrowawayPostgres) -> None:
    assert response.status_code == 503, response.text
    assert int(response.headers["retry-after"]) > 0
    body = response.json()
    if response.request.url.path in ("/connectors/list",) or response.request.url.path.startswith("/rocketmq/"):
        assert body["status"] == 503  # RocketMQ's envelope
        message = body["body"]
    else:
        assert body["error_code"] == 503
        message = body["message"]
    assert "metadata store" in message
    for leak in ("psycopg2", "OperationalError", "SQL", str(pg.port), "127.0.0.1", "postgres@", "connection to"):
        assert leak not in response.text, f"{leak!r} in {response.text}"


def test_store_outage_answers_503_then_recovers_by_itself(
    served: tuple[Served, Runtime], pg: ThrowawayPostgres, tmp_path: Path
) -> None:
    api, _rt = served
    with httpx.Client(base_url=api.url, timeout=30) as client:
        assert client.post("/connectors", json={"name": "src", "config": _source(tmp_path)}).status_code == 201
        assert client.get("/connectors/src/status").status_code == 200
        assert client.get("/health").json()["status"] == "healthy"

        pg.stop("fast")
        slowest = 0.0
        for method, path, body in NEEDS_STORE:
            started = time.monotonic()
            if body == "a valid config":
                body = {"name": "other", "config": _source(tmp_path)}
            response = client.request(method, path, json=body)
            slowest = max(slowest, time.monotonic() - started)
            _assert_store_unavailable(response, pg)
        assert slowest < 3, f"slowest 503 took {slowest:.2f} s"

        assert client.get("/").status_code == 200  # needs no database
        health = client.get("/health")
        assert health.status_code == 503
        assert health.json()["status"] == "unhealthy" and "metadata store" in health.json()["message"]

        pg.start()
        started = time.monotonic()
        while client.get("/connectors/src/status").status_code != 200:
            assert time.monotonic() - started < 10, "the app did not recover within 10 s"
            time.sleep(0.1)
        assert client.post("/connectors", json={"name": "after", "config": _source(tmp_path)}).status_code == 201
        assert client.get("/connectors").json() == ["after", "src"]
        assert client.get("/health").json()["status"] == "healthy"


def test_a_store_that_never_answers_is_a_503_within_the_connect_timeout(
    served: tuple[Served, Runtime], pg: ThrowawayPostgres
) -> None:
    """A network partition, not a stopped server: connections are accepted and never answered."""
    api, _rt = served
    with httpx.Client(base_url=api.url, timeout=60) as client:
        assert client.get("/connectors").status_code == 200
        pg.stop("fast")
        with socket.socket() as blackhole:  # the server's port now takes connections and says nothing
            blackhole.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            blackhole.bind(("127.0.0.1", pg.port))
            blackhole.listen(64)
            started = time.monotonic()
            response = client.get("/connectors/src/status")
            took = time.monotonic() - started
        _assert_store_unavailable(response, pg)
        connect_timeout = Settings().db_connect_timeout
        assert took < connect_timeout + 2, f"a 503 after {took:.1f} s"


def test_health_says_starting_while_the_schema_is_behind_this_server(served: tuple[Served, Runtime]) -> None:
    from sqlalchemy import text

    from connect_core.runtime.store import migrate

    api, rt = served
    with httpx.Client(base_url=api.url, timeout=30) as client:
        assert client.get("/health").json()["status"] == "healthy"
        with rt.engine.begin() as conn:  # as if an older server (or a downgrade) left the schema behind
            conn.execute(text("UPDATE connect.alembic_version SET version_num = '0005'"))
        try:
            health = client.get("/health")
            assert health.status_code == 503
            assert health.json() == {
                "status": "starting",
                "message": f"the metadata schema is at revision 0005, this server needs {migrate.head()}: "
                "run `connect db upgrade` (servers also upgrade it when they start)",
            }
        finally:
            with rt.engine.begin() as conn:
                conn.execute(text("UPDATE connect.alembic_version SET version_num = :v"), {"v": migrate.head()})
        assert client.get("/health").json()["status"] == "healthy"
