"""A snapshot taken while the table is written: the snapshot and the stream after it meet exactly,
so the target converges to the source with no change lost or applied twice (PostgreSQL and
MariaDB sources, into PostgreSQL through unwrap + JDBC upserts and deletes)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from connect_core.connectors.cdc.postgres import _snapshot
from connect_core.runtime.context import Runtime
from connect_core.testing.servers import MariaDbServer, PgServer, unique_name
from tests.conftest import make_runner
from tests.connectors.cdc._pipelines import replica_sink
from tests.connectors.jdbc_helpers import Database, target  # noqa: F401  (fixtures)

ROWS = 20_000


def _pg(db: PgServer) -> tuple[dict[str, str], Callable[[str], None], str]:
    db.execute(
        "CREATE TABLE items (id int PRIMARY KEY, n int NOT NULL)",
        f"INSERT INTO items SELECT g, 0 FROM generate_series(1, {ROWS}) g",
    )
    config = {
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "database.hostname": db.host,
        "database.port": str(db.port),
        "database.user": db.user,
        "database.dbname": db.database,
        "topic.prefix": "srv",
        "slot.name": unique_name("slot"),
        "publication.name": unique_name("pub"),
        "table.include.list": "public.items",
        "snapshot.max.threads": "3",  # read in 3 ranges of the key at once (see the test's patch)
    }
    conn = db.connect()

    def execute(sql: str) -> None:
        with conn.cursor() as cur:
            cur.execute(sql)

    return config, execute, "srv.public.items"


def _mariadb(db: MariaDbServer) -> tuple[dict[str, str], Callable[[str], None], str]:
    db.execute(
        f"CREATE TABLE `{db.database}`.items (id int PRIMARY KEY, n int NOT NULL)",
        f"INSERT INTO `{db.database}`.items SELECT seq, 0 FROM seq_1_to_{ROWS}",
    )
    config = {
        "connector.class": "io.debezium.connector.mariadb.MariaDbConnector",
        "database.hostname": db.host,
        "database.port": str(db.port),
        "database.user": db.user,
        "database.password": db.password,
        "database.include.list": db.database,
        "topic.prefix": "srv",
    }
    conn = db.connect(admin=True)

    def execute(sql: str) -> None:
        with conn.cursor() as cur:
            cur.execute(sql)

    return config, execute, f"srv.{db.database}.items"


@pytest.mark.parametrize("kind", ["postgres", "mariadb"])
def test_writes_during_the_snapshot_are_neither_lost_nor_doubled(
    kind: str,
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
    runtime: Runtime,
    spark: Any,
    target: Database,  # noqa: F811
) -> None:
    monkeypatch.setattr(_snapshot, "CHUNK_MIN_BYTES", 0)  # chunk even this small table
    chunks: list[str] = []
    read_chunk = _snapshot._read_chunk
    monkeypatch.setattr(
        _snapshot, "_read_chunk", lambda conn, chunk: chunks.append(chunk.where) or read_chunk(conn, chunk)
    )
    db = request.getfixturevalue("pg_db" if kind == "postgres" else "mariadb_db")
    config, execute, topic = _pg(db) if kind == "postgres" else _mariadb(db)
    table = "items" if kind == "postgres" else f"`{db.database}`.items"
    runtime.create_connector("cdc", config)
    runtime.create_connector("sink", replica_sink(target.jdbc_url, topic))
    stop, written = threading.Event(), [0]

    def writer() -> None:  # small transactions touching rows of every part of the table, all the time
        i = 0
        while not stop.is_set():
            i += 1
            execute(f"UPDATE {table} SET n = n + 1 WHERE id % 997 = {i % 997}")
            execute(f"DELETE FROM {table} WHERE id = {(i * 7919) % ROWS + 1}")
            execute(f"INSERT INTO {table} VALUES ({ROWS + i}, {i})")
            written[0] = i
            time.sleep(0.002)

    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    runner = make_runner(runtime, spark)
    try:
        for _ in range(2):  # the snapshot, then a stream run, both while the writer writes
            for name in ("cdc", "sink"):
                result = runner.run(name, 0)
                assert result.state == "SUCCEEDED", result.message
    finally:
        stop.set()
        thread.join(10)
    assert written[0] > 20, "the writer barely ran: the snapshot was not taken under writes"
    if kind == "postgres":  # read by 3 connections, a range of the key each
        assert len(chunks) == 3 and all(where.startswith('WHERE "id" >=') for where in chunks)
    for name in ("cdc", "sink"):  # the rest of the stream
        assert runner.run(name, 0).state == "SUCCEEDED"
    query = "SELECT count(*), sum(id), sum(n), sum(id * n) FROM {}"
    assert target.rows(query.format("items")) == [tuple(int(v) for v in db.rows(query.format(table))[0])]
