"""The metadata store's bounds and recovery, against real Postgres servers.

The change listener survives a server restart; every connection carries a statement and a
lock timeout, and what they raise is classified (503 / 409) rather than left to a 500.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import psycopg2
import pytest
from sqlalchemy import text
from sqlalchemy.exc import OperationalError

from connect_core.runtime.cluster.pools import PoolStore
from connect_core.runtime.store import db, migrate
from connect_core.runtime.store.changes import ChangeListener
from connect_core.runtime.store.connectors import ConnectorStore
from connect_core.runtime.store.db import make_engine, store_fault
from tests.rest._throwaway_pg import ThrowawayPostgres


def _until(condition: Callable[[], bool], seconds: float) -> float:
    started = time.monotonic()
    while not condition():
        assert time.monotonic() - started < seconds, f"not within {seconds} s"
        time.sleep(0.02)
    return time.monotonic() - started


def _bump(url: str) -> None:
    """A change by another process (the CLI, a runner): the counter moves and NOTIFY is sent."""
    conn = psycopg2.connect(url)
    with conn, conn.cursor() as cur:
        cur.execute("UPDATE connect.change_counter SET n = n + 1 WHERE id = 1")
        cur.execute("SELECT pg_notify('connect_changes', (SELECT n FROM connect.change_counter)::text)")
    conn.close()


def test_change_listener_reconnects_after_a_restart(pg: ThrowawayPostgres) -> None:
    engine = make_engine(pg.url)
    migrate.upgrade(engine)
    listener = ChangeListener(engine, poll_seconds=0.5)
    try:
        _until(lambda: listener.connected, 5)
        before = listener.version()
        _bump(pg.url)
        _until(lambda: listener.version() > before, 2)

        pg.stop("immediate")  # a crash: the listener's connection dies under it
        _until(lambda: not listener.connected, 5)
        pg.start()
        _until(lambda: listener.connected, 5)  # it came back by itself

        heard = listener.version()
        _bump(pg.url)
        _until(lambda: listener.version() > heard, 2)
    finally:
        listener.close()
        engine.dispose()


def test_every_connection_bounds_statements_and_lock_waits(database_url: str) -> None:
    engine = make_engine(database_url, statement_timeout=1.0)
    migrate.upgrade(engine)
    try:
        with engine.connect() as conn:
            assert conn.execute(text("SHOW statement_timeout")).scalar() == "1s"
            assert conn.execute(text("SHOW lock_timeout")).scalar() == "500ms"
            conn.rollback()  # the settings outlive a rollback: they were committed at connect
            assert conn.execute(text("SHOW statement_timeout")).scalar() == "1s"
            with pytest.raises(OperationalError) as slow:
                conn.execute(text("SELECT pg_sleep(3)"))
        assert store_fault(slow.value) == db.TIMEOUT
    finally:
        engine.dispose()


def test_a_change_waiting_on_a_locked_connector_ends_as_a_conflict(database_url: str) -> None:
    engine = make_engine(database_url, statement_timeout=1.0)
    migrate.upgrade(engine)
    store = ConnectorStore(engine)
    store.create("c", connector_class="X", type="source", config={}, task_configs=[{}])
    holder = psycopg2.connect(database_url)
    try:
        with holder.cursor() as cur:  # an admin's transaction that sits on the connector
            cur.execute("SELECT 1 FROM connect.connectors WHERE name = 'c' FOR UPDATE")
        started = time.monotonic()
        with pytest.raises(OperationalError) as waited:
            store.set_target_state("c", "PAUSED")
        assert time.monotonic() - started < 1.0  # the lock timeout, not the statement timeout
        assert store_fault(waited.value) == db.CONFLICT
    finally:
        holder.close()
        engine.dispose()


def test_unstorable_values_are_named() -> None:
    assert db.unstorable({"a": {"b": ["ok", "x\x00y"]}}) == (("a", "b", 1), "a NUL character (\\u0000)")
    assert db.unstorable({"k\x00": 1})[0] == ("k\x00",)
    assert db.unstorable({"a": "\ud800"})[1].startswith("an unpaired surrogate")
    assert db.unstorable({"a": float("nan")})[0] == ("a",)
    assert db.unstorable({"a": [1, 2.5, None, True, {"b": "ok"}]}) is None
    deep: object = "x\x00"
    for _ in range(10_000):  # no recursion: a deep hostile body is walked, not a RecursionError
        deep = [deep]
    assert db.unstorable(deep) is not None


def test_a_rebalance_that_loses_a_lock_wait_runs_again(database_url: str) -> None:
    engine = make_engine(database_url, statement_timeout=1.0)  # lock waits end after 0.5 s
    migrate.upgrade(engine)
    store, pools = ConnectorStore(engine), PoolStore(engine)
    pools.add("local", "local[1]", capacity=10)
    store.create("c", connector_class="X", type="source", config={}, task_configs=[{}])
    holder = psycopg2.connect(database_url)
    release = threading.Timer(0.8, holder.rollback)
    try:
        with holder.cursor() as cur:  # a delete in progress holds the connector for 0.8 s
            cur.execute("SELECT 1 FROM connect.connectors WHERE name = 'c' FOR UPDATE")
        release.start()
        result = pools.rebalance("sticky", 30)
        assert result.moved == 2  # the connector and its task, placed by the second attempt
    finally:
        release.join()
        holder.close()
        engine.dispose()
