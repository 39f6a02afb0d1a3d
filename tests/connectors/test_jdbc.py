"""JDBC source and sink against the machine's real MariaDB and PostgreSQL (shared SparkSession).

Every sync is checked by exact equality of source and target: row count and every
row's values (a per-row checksum would only hide which row differs).
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from connect_core.runtime.context import Runtime
from connect_core.runtime.execution.precheck import has_new_data
from connect_core.runtime.execution.runner import TaskRunner
from tests.connectors.jdbc_helpers import Database, create_upsert_sink, mariadb, postgres, synced, target  # noqa: F401  (fixtures)

CHECKED_COLUMNS = "id, name, amount, updated_at"


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
    create_upsert_sink(runtime, target, "m_orders", **{"table.name.format": "orders"})
    first = synced(runner, "src", "sink")
    assert first[0].rows == 3
    assert _same(mariadb, target, "orders")[2][1] == ""  # empty string stays empty, not NULL

    assert has_new_data(runtime, "src", 0) is False  # Airflow's check before a run: no Spark
    mariadb.execute("INSERT INTO orders (name, amount) VALUES ('c', 4), ('d', 5)")
    assert has_new_data(runtime, "src", 0) is True
    again = synced(runner, "src", "sink")
    assert again[0].rows == 2 and again[1].rows == 2  # only the new rows
    assert len(_same(mariadb, target, "orders")) == 5
    assert runtime.connectors.positions("src")['{"table":"orders"}'].offset == {"incrementing": 5}
    assert has_new_data(runtime, "src", 0) is False
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
    create_upsert_sink(runtime, target, "orders")
    assert synced(runner, "src")[0].rows == 600  # batch.max.rows
    assert synced(runner, "src")[0].rows == 400
    synced(runner, "sink")
    _same(postgres, target, "orders")

    # Updates move a row's timestamp forward; rows sharing one timestamp are all read (by id).
    postgres.execute(
        "UPDATE orders SET name = 'changed', updated_at = timestamp '2024-06-01' WHERE id IN (5, 6, 7)",
        "INSERT INTO orders VALUES (1001, 'new', 1, timestamp '2024-06-01')",
    )
    assert synced(runner, "src")[0].rows == 4
    synced(runner, "sink")
    assert _same(postgres, target, "orders")[4][1] == "changed"

    # A row stamped "now" is not read until it is older than the delay: a transaction committing late
    # with an earlier timestamp is not skipped.
    postgres.execute("INSERT INTO orders VALUES (1002, 'late', 2, localtimestamp)")
    assert has_new_data(runtime, "src", 0) is False
    assert runner.run("src", 0).rows == 0
    time.sleep(3.2)
    assert has_new_data(runtime, "src", 0) is True
    assert synced(runner, "src")[0].rows == 1
    assert has_new_data(runtime, "src", 0) is False
    synced(runner, "sink")
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
    create_upsert_sink(runtime, target, "orders")
    assert synced(runner, "src", "sink")[0].rows == 2
    mariadb.execute("UPDATE orders SET name = 'b1', updated_at = '2024-01-02' WHERE id = 2")
    assert synced(runner, "src")[0].rows == (2 if mode == "bulk" else 1)  # bulk copies everything again
    mariadb.execute("UPDATE orders SET name = 'b2', updated_at = '2024-01-03' WHERE id = 2")
    synced(runner, "src")
    # One sink batch now holds id 2 twice (b1, then b2): the newest offset wins.
    synced(runner, "sink")
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
    create_upsert_sink(runtime, target, "evens", **{"table.name.format": "orders"})
    synced(runner, "src", "sink")
    assert target.rows("SELECT id, amount FROM orders ORDER BY id")[0] == (2, 4)
    assert len(target.rows("SELECT id FROM orders")) == 5


MARIADB_TYPES = """
CREATE TABLE types (
  id INT PRIMARY KEY, ti TINYINT, si SMALLINT, mi MEDIUMINT, i INT, bi BIGINT, ubi BIGINT UNSIGNED,
  dec_ DECIMAL(30,10), f FLOAT, d DOUBLE, s VARCHAR(100), t TEXT, dt DATE, dtm DATETIME(6), ts TIMESTAMP(6) NULL,
  tm TIME(6), b BOOLEAN, bin BLOB, j JSON
)"""
MARIADB_ROWS = [
    "(1, -128, -32768, -8388608, -2147483648, -9223372036854775808, 18446744073709551615,"
    " '12345678901234567890.1234567890', 1.5, 0.1, 'héllo 中文 😀', 'a,\"b\"\\nc\\\\d', '1000-01-01',"
    " '2024-02-29 23:59:59.999999', '2024-03-01 12:00:00.000001', '13:14:15.123456', TRUE, X'0001FF',"
    ' \'{"a": [1, 2, "x"]}\')',
    "(2, 127, 32767, 8388607, 2147483647, 9223372036854775807, 0, '-0.0000000001', -3.25, 1e308, '', '',"
    " '9999-12-31', '1970-01-01 00:00:00', NULL, '00:00:00', FALSE, X'', '[]')",
    "(3, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)",
]


def _work_in(where: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Small windows and batches are read and written in the driver; `workers` sends even these
    few rows through Spark's Python workers, as a big table goes."""
    if where == "workers":
        monkeypatch.setattr("connect_core.connectors.jdbc.source.DRIVER_MAX_ROWS", 0)
        monkeypatch.setattr("connect_core.sdk.records.DRIVER_MAX_ROWS", 0)
        monkeypatch.setattr("connect_core.sdk.records.CONNECT_DRIVER_MAX_ROWS", 0)


@pytest.mark.parametrize(
    ("reader", "where"),
    [("connectorx", "driver"), ("connectorx", "workers"), ("Spark's JDBC reader", "workers")],
    ids=["connectorx-driver", "connectorx-workers", "jdbc"],
)
def test_mariadb_types_arrive_in_postgres_value_for_value(
    reader: str,
    where: str,
    runtime: Runtime,
    runner: TaskRunner,
    mariadb: Database,  # noqa: F811
    target: Database,  # noqa: F811
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Value for value, read by connectorx (Arrow: in the driver, and in Spark's workers as a big
    window is) and by Spark's JDBC reader (an ENUM column, a type the Arrow path does not read,
    sends the table there)."""
    from datetime import date, datetime, time
    from decimal import Decimal

    _work_in(where, monkeypatch)
    mariadb.execute("SET time_zone = '+00:00'", MARIADB_TYPES, "INSERT INTO types VALUES " + ", ".join(MARIADB_ROWS))
    if reader != "connectorx":
        mariadb.execute("ALTER TABLE types ADD COLUMN e ENUM('x', 'y')")
    caplog.set_level("INFO", logger="connect")
    runtime.create_connector(
        "src",
        mariadb.source_config(
            **{"table.whitelist": "types", "topic.prefix": "", "mode": "incrementing", "incrementing.column.name": "id"}
        ),
    )
    create_upsert_sink(runtime, target, "types")
    synced(runner, "src", "sink")
    assert f"types: reading the window through {reader}" in caplog.text
    if reader == "connectorx":
        assert f"through connectorx {'in the driver' if where == 'driver' else 'in 1 Spark partition'}" in caplog.text
    got = [_plain(r)[:19] for r in target.rows("SELECT * FROM types ORDER BY id")]
    assert got[0] == (
        1,
        -128,
        -32768,
        -8388608,
        -2147483648,
        -9223372036854775808,
        Decimal("18446744073709551615"),
        Decimal("12345678901234567890.1234567890"),
        1.5,
        0.1,
        "héllo 中文 😀",
        'a,"b"\nc\\d',
        date(1000, 1, 1),
        datetime(2024, 2, 29, 23, 59, 59, 999999),
        got[0][14],  # TIMESTAMP: an instant, checked below
        time(13, 14, 15, 123456),
        True,
        b"\x00\x01\xff",
        '{"a": [1, 2, "x"]}',
    )
    assert got[0][14].isoformat() == "2024-03-01T12:00:00.000001+00:00"
    assert got[1][7:] == (
        Decimal("-0.0000000001"),
        -3.25,
        1e308,
        "",  # empty string, not NULL
        "",
        date(9999, 12, 31),
        datetime(1970, 1, 1),
        None,
        time(0),
        False,
        b"",  # empty bytes, not NULL
        "[]",
    )
    assert got[2] == (3, *([None] * 18))
    types = dict(target.rows("SELECT column_name, data_type FROM information_schema.columns WHERE table_name='types'"))
    assert types["dec_"] == "numeric" and types["dtm"] == "timestamp without time zone"
    assert types["ts"] == "timestamp with time zone" and types["tm"] == "time without time zone"
    assert types["b"] == "boolean" and types["bin"] == "bytea" and types["ubi"] == "numeric"


@pytest.mark.parametrize(
    ("copy_format", "where"),
    [("binary", "driver"), ("binary", "workers"), ("csv", "driver")],
    ids=["binary-driver", "binary-workers", "csv"],
)
def test_postgres_types_round_trip_exactly(
    copy_format: str,
    where: str,
    runtime: Runtime,
    runner: TaskRunner,
    postgres: Database,  # noqa: F811
    target: Database,  # noqa: F811
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Value for value, through the sink's binary COPY (types it encodes itself; from the driver,
    and from Spark's workers as a big batch goes) and its CSV COPY (a `time` and a `uuid` column
    send the table down the path where PostgreSQL parses text)."""
    _work_in(where, monkeypatch)
    text_only = copy_format == "csv"
    columns = [
        "id int PRIMARY KEY", "si smallint", "i integer", "bi bigint", "n numeric(38,10)", "r real",
        "d double precision", "t text", "vc varchar(20)", "dt date", "ts timestamp(6)", "tz timestamptz(6)",
        "tm time(6)", "b boolean", "bin bytea", "j json", "jb jsonb", "u uuid",
    ]  # fmt: skip
    rows = [
        [
            "1", "-32768", "-2147483648", "-9223372036854775808", "1234567890123456789012345678.0123456789",
            "3.4e38", "2.2250738585072014e-308", "E'tab\\tquote\"comma,nl\\n😀 中'", "''", "'0001-01-01'",
            "'2000-01-01 00:00:00.000001'", "'2024-06-30 23:59:59.999999+02'", "'23:59:59.999999'", "true",
            "'\\x00ff'::bytea", "'{\"k\": [1, null]}'", "'{\"z\": 1, \"a\": {\"b\": true}}'",
            "'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'",
        ],
        [
            "2", "32767", "2147483647", "9223372036854775807", "-0.0000000001", "-0.0", "'Infinity'", "NULL",
            "NULL", "'2024-02-29'", "NULL", "NULL", "'00:00:00'", "false", "''", "'[]'", "'null'", "NULL",
        ],
        ["3", *["NULL"] * 17],
    ]  # fmt: skip
    keep = [i for i, c in enumerate(columns) if text_only or c.split()[0] not in ("tm", "u")]
    postgres.execute(
        f"CREATE TABLE types ({', '.join(columns[i] for i in keep)})",
        "INSERT INTO types VALUES " + ", ".join(f"({', '.join(r[i] for i in keep)})" for r in rows),
    )
    caplog.set_level("INFO", logger="connect")
    runtime.create_connector(
        "src",
        postgres.source_config(
            **{"table.whitelist": "types", "topic.prefix": "", "mode": "incrementing", "incrementing.column.name": "id"}
        ),
    )
    create_upsert_sink(runtime, target, "types")
    synced(runner, "src", "sink")
    source = postgres.rows("SELECT * FROM types ORDER BY id")
    copied = target.rows("SELECT * FROM types ORDER BY id")
    assert [_plain(r) for r in copied] == [_plain(r) for r in source]
    # the CSV COPY goes through Spark's own rows, always in the workers
    source_side = "the driver" if where == "driver" and not text_only else "Spark's workers"
    assert f"COPYed ({copy_format}) into the empty table from {source_side}" in caplog.text
    assert f"through COPY {'in the driver' if where == 'driver' else 'in 1 Spark partition'}" in caplog.text
    query = "SELECT column_name, data_type FROM information_schema.columns WHERE table_name='types' ORDER BY 1"
    assert target.rows(query) == postgres.rows(query).__class__(
        [(c, "text" if t == "character varying" else t) for c, t in postgres.rows(query)]
    )


def _plain(row: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(bytes(v) if isinstance(v, memoryview) else v for v in row)


def test_bad_input_is_a_clear_error_and_commits_nothing(
    runtime: Runtime,
    runner: TaskRunner,
    mariadb: Database,  # noqa: F811
    postgres: Database,  # noqa: F811
    target: Database,  # noqa: F811
) -> None:
    from connect_core.sdk.errors import ConfigError

    # An identifier is a name or an error, never SQL.
    with pytest.raises(ConfigError) as bad:
        runtime.create_connector(
            "evil", mariadb.source_config(**{"table.whitelist": "x; DROP TABLE y", "topic.prefix": ""})
        )
    assert "table.whitelist" in bad.value.errors and "not a plain SQL name" in str(bad.value)
    with pytest.raises(ConfigError) as bad_sink:
        runtime.create_connector(
            "evil-sink",
            {
                "connector.class": "JdbcSinkConnector",
                "connection.url": target.jdbc_url,
                "topics": "t",
                "table.name.format": "t;drop",
            },
        )
    assert "not a plain SQL name" in str(bad_sink.value)

    def fails(name: str, config: dict[str, Any], *expected: str) -> None:
        runtime.create_connector(name, config)
        result = runner.run(name, 0)
        assert result.state == "FAILED"
        for text in expected:
            assert text in result.message, result.message
        assert runtime.connectors.positions(name) == {}  # nothing committed

    mariadb.execute("CREATE TABLE t (id INT PRIMARY KEY, v TEXT)", "INSERT INTO t VALUES (1, 'x')")
    base = {"table.whitelist": "t", "topic.prefix": "", "mode": "incrementing"}
    fails(
        "no-column",
        mariadb.source_config(**base, **{"incrementing.column.name": "seq"}),
        "table `t` has no column `seq`",
    )
    fails(
        "no-table",
        mariadb.source_config(**{**base, "table.whitelist": "nope", "incrementing.column.name": "id"}),
        "table `nope` not found at 127.0.0.1:3306",
    )
    wrong_password = mariadb.source_config(
        **base, **{"incrementing.column.name": "id", "connection.password": "not-the-pw-7x"}
    )
    fails("wrong-password", wrong_password, "127.0.0.1:3306 refused the login", "wrong user or password")
    unreachable = {**wrong_password, "connection.url": "jdbc:postgresql://127.0.0.1:1/db", "connection.password": "pw"}
    fails("unreachable", unreachable, "cannot reach the database at 127.0.0.1:1")
    assert "not-the-pw-7x" not in str(runtime.connectors.last_runs("wrong-password")[0]["error"])

    # A column type the sink cannot map: the sink fails, its offsets stay where they were.
    postgres.execute("CREATE TABLE arr (id int PRIMARY KEY, tags int[])", "INSERT INTO arr VALUES (1, '{1,2}')")
    runtime.create_connector(
        "arr-src",
        postgres.source_config(**{"query": "SELECT id, tags FROM arr", "topic.prefix": "arr", "mode": "bulk"}),
    )
    assert runner.run("arr-src", 0).state == "SUCCEEDED"
    create_upsert_sink(runtime, target, "arr")
    failed = runner.run("sink", 0)
    assert failed.state == "FAILED" and "column `tags` has type array<int>" in failed.message
    assert runtime.connectors.sink_offsets("sink") == {}
    assert target.rows("SELECT to_regclass('arr')") == [(None,)]


def test_the_documented_mariadb_to_postgres_example_keeps_in_sync(
    runtime: Runtime,
    runner: TaskRunner,
    mariadb: Database,  # noqa: F811
    target: Database,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """examples/jdbc/*.json as the README shows them, pointed at this test's databases."""
    import json
    from pathlib import Path

    examples = Path(__file__).resolve().parents[2] / "examples" / "jdbc"
    source = json.loads((examples / "mariadb-orders-source.json").read_text())
    sink = json.loads((examples / "postgres-orders-sink.json").read_text())
    source["connection.url"] = mariadb.jdbc_url.split("?")[0]
    sink["connection.url"] = target.jdbc_url
    monkeypatch.setenv("SHOP_DB_PASSWORD", "")  # the example reads the password from the environment
    # ...through the `env` config provider, which a worker enables (CONNECT_CONFIG_PROVIDERS=env).
    monkeypatch.setattr(runtime.providers, "enabled", frozenset({"env"}))
    source["timestamp.delay.interval.ms"] = 0
    mariadb.execute(
        "CREATE TABLE orders (id INT AUTO_INCREMENT PRIMARY KEY, customer INT, total DECIMAL(10,2), "
        "status VARCHAR(20), updated_at DATETIME(6) DEFAULT NOW(6) ON UPDATE NOW(6))",
        "CREATE TABLE customers (id INT AUTO_INCREMENT PRIMARY KEY, name VARCHAR(50), "
        "updated_at DATETIME(6) DEFAULT NOW(6) ON UPDATE NOW(6))",
        "INSERT INTO customers (name) VALUES ('Ada'), ('Linus')",
        "INSERT INTO orders (customer, total, status) VALUES (1, 10.50, 'new'), (2, 99.99, 'new')",
    )
    runtime.create_connector("shop-source", source)
    runtime.create_connector("shop-sink", sink)
    assert len(runtime.connectors.get("shop-source").tasks) == 2  # one table per task

    def sync() -> None:
        for task in (0, 1):
            assert runner.run("shop-source", task).state == "SUCCEEDED"
        assert runner.run("shop-sink", 0).state == "SUCCEEDED"
        for table in ("orders", "customers"):
            src = mariadb.rows(f"SELECT * FROM {table} ORDER BY id")
            assert target.rows(f"SELECT * FROM shop_{table} ORDER BY id") == [tuple(r) for r in src]

    sync()
    time.sleep(0.01)
    mariadb.execute(
        "UPDATE orders SET status = 'paid' WHERE id = 1",
        "INSERT INTO orders (customer, total, status) VALUES (1, 5, 'new')",
        "UPDATE customers SET name = 'Ada L.' WHERE id = 1",
    )
    sync()
    assert target.rows("SELECT status FROM shop_orders WHERE id = 1") == [("paid",)]


def test_a_sink_offset_reset_writes_the_topic_again(
    runtime: Runtime,
    runner: TaskRunner,
    postgres: Database,  # noqa: F811
    target: Database,  # noqa: F811
) -> None:
    """The offsets kept in the target only guard the batch Connect has not committed: after a reset
    (Kafka's DELETE /connectors/{c}/offsets) the sink writes everything again."""
    postgres.execute(
        "CREATE TABLE orders (id int PRIMARY KEY, name text, amount numeric(12,2), updated_at timestamp)",
        "INSERT INTO orders SELECT g, 'n' || g, g, NULL FROM generate_series(1, 20) g",
    )
    runtime.create_connector(
        "src",
        postgres.source_config(
            **{
                "mode": "incrementing",
                "incrementing.column.name": "id",
                "table.whitelist": "orders",
                "topic.prefix": "",
            }
        ),
    )
    create_upsert_sink(runtime, target, "orders")
    synced(runner, "src", "sink")
    target.execute("DELETE FROM orders WHERE id > 10")
    runtime.connectors.set_target_state("sink", "STOPPED")
    runtime.reset_offsets("sink")  # what DELETE /connectors/sink/offsets does
    runtime.connectors.set_target_state("sink", "RUNNING")
    assert synced(runner, "sink")[0].rows == 20
    assert len(_same(postgres, target, "orders")) == 20


def test_an_empty_target_is_copied_into_directly_and_a_failed_copy_is_merged_instead(
    runtime: Runtime,
    runner: TaskRunner,
    postgres: Database,  # noqa: F811
    target: Database,  # noqa: F811
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Upserting into an empty table skips the staging table: each partition COPYs into the table.
    When that cannot work (here: the batch holds every key twice, from two bulk runs) the partitions
    that did commit are overwritten by merging the whole batch: newest row per key, no duplicates."""
    postgres.execute(
        "CREATE TABLE orders (id int PRIMARY KEY, name text, amount numeric(12,2), updated_at timestamp)",
        "CREATE TABLE items (id int PRIMARY KEY, name text, amount numeric(12,2), updated_at timestamp)",
        "INSERT INTO orders SELECT g, 'n' || g, g, NULL FROM generate_series(1, 300) g",
        "INSERT INTO items SELECT g, 'i' || g, g, NULL FROM generate_series(1, 300) g",
    )
    runtime.create_connector(
        "src", postgres.source_config(**{"mode": "bulk", "table.whitelist": "orders,items", "topic.prefix": ""})
    )
    create_upsert_sink(runtime, target, "orders")
    runtime.create_connector(
        "sink2",
        {**runtime.connectors.get("sink").config, "topics": "items", "name": "sink2"},
    )
    caplog.set_level("INFO", logger="connect")
    synced(runner, "src", "sink")
    assert "COPYed (binary) into the empty table" in caplog.text  # int, text, numeric, timestamp: binary COPY
    assert len(_same(postgres, target, "orders")) == 300

    synced(runner, "src")  # bulk: every item again...
    postgres.execute("UPDATE items SET name = 'newer ' || id WHERE id % 3 = 0")
    synced(runner, "src")  # ...and again, a third of them changed
    caplog.clear()
    assert synced(runner, "sink2")[0].rows == 900
    assert "merging the batch instead" in caplog.text
    rows = _same(postgres, target, "items")
    assert len(rows) == 300 and rows[2][1] == "newer 3"
    assert synced(runner, "sink2")[0].rows == 0  # the offsets went in with the merge
