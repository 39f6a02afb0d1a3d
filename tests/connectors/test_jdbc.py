"""JDBC source and sink against the machine's real MariaDB and PostgreSQL (shared SparkSession).

Every sync is checked by exact equality of source and target: row count and every
row's values (a per-row checksum would only hide which row differs).
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from connect_core.runtime.context import Runtime
from connect_core.runtime.runner import TaskRunner
from tests.connectors.jdbc_helpers import Database, mariadb, postgres, target  # noqa: F401  (fixtures)

CHECKED_COLUMNS = "id, name, amount, updated_at"


def _sink(runtime: Runtime, target: Database, topic: str, **extra: Any) -> None:  # noqa: F811
    runtime.create_connector(
        "sink",
        {
            "connector.class": "JdbcSinkConnector",
            "connection.url": target.jdbc_url,
            "topics": topic,
            "insert.mode": "upsert",
            "pk.mode": "record_value",
            "pk.fields": "id",
            "auto.create": True,
            **extra,
        },
    )


def _sync(runner: TaskRunner, *connectors: str) -> list[Any]:
    results = [runner.run(c, 0) for c in connectors]
    for r in results:
        assert r.state == "SUCCEEDED", r.message
    return results


def _same(source: Database, target: Database, table: str, columns: str = CHECKED_COLUMNS) -> list[tuple[Any, ...]]:  # noqa: F811
    src = source.rows(f"SELECT {columns} FROM {table} ORDER BY id")
    dst = target.rows(f"SELECT {columns} FROM {table} ORDER BY id")
    assert dst == src
    return dst


def test_incrementing_mariadb_to_postgres(
    runtime: Runtime,
    runner: TaskRunner,
    mariadb: Database,  # noqa: F811
    target: Database,  # noqa: F811
) -> None:
    mariadb.execute(
        "CREATE TABLE orders (id BIGINT AUTO_INCREMENT PRIMARY KEY, name VARCHAR(50), amount DECIMAL(12,2), "
        "updated_at DATETIME(6))",
        "INSERT INTO orders (name, amount, updated_at) VALUES ('a', 1.50, '2024-01-01 10:00:00.000001'), "
        "('b', NULL, '2024-01-01 10:00:01'), ('', 3.00, NULL)",
    )
    runtime.create_connector(
        "src",
        mariadb.source_config(
            **{
                "mode": "incrementing",
                "incrementing.column.name": "id",
                "table.whitelist": "orders",
                "topic.prefix": "m_",
            }
        ),
    )
    _sink(runtime, target, "m_orders", **{"table.name.format": "orders"})
    first = _sync(runner, "src", "sink")
    assert first[0].rows == 3
    assert _same(mariadb, target, "orders")[2][1] == ""  # empty string stays empty, not NULL

    mariadb.execute("INSERT INTO orders (name, amount) VALUES ('c', 4), ('d', 5)")
    again = _sync(runner, "src", "sink")
    assert again[0].rows == 2 and again[1].rows == 2  # only the new rows
    assert len(_same(mariadb, target, "orders")) == 5
    assert runtime.connectors.positions("src")['{"table":"orders"}'].offset == {"incrementing": 5}
    idle = runner.run("src", 0)
    assert idle.state == "SUCCEEDED" and idle.rows == 0


def test_timestamp_incrementing_picks_up_updates_and_waits_out_the_delay(
    runtime: Runtime,
    runner: TaskRunner,
    postgres: Database,  # noqa: F811
    target: Database,  # noqa: F811
) -> None:
    postgres.execute(
        "CREATE TABLE orders (id bigint PRIMARY KEY, name text, amount numeric(12,2), updated_at timestamp(6))",
        "INSERT INTO orders SELECT g, 'n' || g, g * 1.25, timestamp '2024-01-01' + g * interval '1 second' "
        "FROM generate_series(1, 1000) g",
    )
    runtime.create_connector(
        "src",
        postgres.source_config(
            **{
                "mode": "timestamp+incrementing",
                "incrementing.column.name": "id",
                "timestamp.column.name": "updated_at",
                "timestamp.delay.interval.ms": 3000,
                "table.whitelist": "orders",
                "topic.prefix": "",
                "batch.max.rows": 600,
            }
        ),
    )
    _sink(runtime, target, "orders")
    assert _sync(runner, "src")[0].rows == 600  # batch.max.rows
    assert _sync(runner, "src")[0].rows == 400
    _sync(runner, "sink")
    _same(postgres, target, "orders")

    # Updates move a row's timestamp forward; rows sharing one timestamp are all read (by id).
    postgres.execute(
        "UPDATE orders SET name = 'changed', updated_at = timestamp '2024-06-01' WHERE id IN (5, 6, 7)",
        "INSERT INTO orders VALUES (1001, 'new', 1, timestamp '2024-06-01')",
    )
    assert _sync(runner, "src")[0].rows == 4
    _sync(runner, "sink")
    assert _same(postgres, target, "orders")[4][1] == "changed"

    # A row stamped "now" is not read until it is older than the delay: a transaction committing late
    # with an earlier timestamp is not skipped.
    postgres.execute("INSERT INTO orders VALUES (1002, 'late', 2, localtimestamp)")
    assert runner.run("src", 0).rows == 0
    time.sleep(3.2)
    assert _sync(runner, "src")[0].rows == 1
    _sync(runner, "sink")
    assert len(_same(postgres, target, "orders")) == 1002


@pytest.mark.parametrize("mode", ["bulk", "timestamp"])
def test_bulk_and_timestamp_modes(
    mode: str,
    runtime: Runtime,
    runner: TaskRunner,
    mariadb: Database,  # noqa: F811
    target: Database,  # noqa: F811
) -> None:
    mariadb.execute(
        "CREATE TABLE orders (id INT PRIMARY KEY, name VARCHAR(20), amount DECIMAL(12,2), updated_at DATETIME(6))",
        "INSERT INTO orders VALUES (1, 'a', 1, '2024-01-01 00:00:01'), (2, 'b', 2, '2024-01-01 00:00:02')",
    )
    extra = {"timestamp.column.name": "updated_at"} if mode == "timestamp" else {}
    runtime.create_connector(
        "src", mariadb.source_config(mode=mode, **{"table.whitelist": "orders", "topic.prefix": "", **extra})
    )
    _sink(runtime, target, "orders")
    assert _sync(runner, "src", "sink")[0].rows == 2
    mariadb.execute("UPDATE orders SET name = 'b2', updated_at = '2024-01-02' WHERE id = 2")
    assert _sync(runner, "src")[0].rows == (2 if mode == "bulk" else 1)  # bulk copies everything again
    _sync(runner, "sink")
    assert _same(mariadb, target, "orders")[1][1] == "b2"


def test_query_mode(runtime: Runtime, runner: TaskRunner, postgres: Database, target: Database) -> None:  # noqa: F811
    postgres.execute(
        "CREATE TABLE orders (id int PRIMARY KEY, name text, amount numeric(12,2), updated_at timestamp)",
        "INSERT INTO orders SELECT g, 'n' || g, g, NULL FROM generate_series(1, 10) g",
    )
    runtime.create_connector(
        "src",
        postgres.source_config(
            mode="incrementing",
            query="SELECT id, name, amount * 2 AS amount, updated_at FROM orders WHERE id % 2 = 0",
            **{"incrementing.column.name": "id", "topic.prefix": "evens"},
        ),
    )
    _sink(runtime, target, "evens", **{"table.name.format": "orders"})
    _sync(runner, "src", "sink")
    assert target.rows("SELECT id, amount FROM orders ORDER BY id")[0] == (2, 4)
    assert len(target.rows("SELECT id FROM orders")) == 5
