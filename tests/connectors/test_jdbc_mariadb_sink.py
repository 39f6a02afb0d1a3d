"""The JDBC sink into a real MariaDB: every type value for value, upsert and update by key (the newest
offset wins), exactly once across a crash at any point, and offsets reset through Connect."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import pytest

from connect_core.runtime.context import Runtime
from connect_core.runtime.execution.runner import TaskRunner
from connect_core.sdk.testing import faults
from tests.connectors.jdbc_helpers import Database, create_upsert_sink, mariadb_target, postgres, synced  # noqa: F401  (fixtures)

PG_TYPES = """
CREATE TABLE types (
  id int PRIMARY KEY, si smallint, i integer, bi bigint, n numeric(30,10), r real, d double precision,
  t text, v varchar(20), b boolean, dt date, ts timestamp(6), tz timestamptz(6), bs bytea
)"""
PG_ROWS = (
    "(1, -32768, -2147483648, -9223372036854775808, 12345678901234567890.1234567890, 1.5, 0.1, "
    "'héllo 中文 😀 ''q'' \\ \"d\"', '', true, '1000-01-01', '2024-02-29 23:59:59.999999', "
    "'2024-03-01 12:00:00.000001+02', '\\x0001ff'), "
    "(2, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL), "
    "(3, 32767, 2147483647, 9223372036854775807, -0.0000000001, -2.25, 1e300, E'multi\\nline,\\tcsv', "
    "'x', false, '9999-12-31', '1970-01-01 00:00:00', '2038-01-19 03:14:08+00', '\\x')"
)


def _source(runtime: Runtime, postgres: Database, table: str, **extra: Any) -> None:  # noqa: F811
    runtime.create_connector(
        "src",
        postgres.source_config(
            **{"mode": "incrementing", "incrementing.column.name": "id", "table.whitelist": table, "topic.prefix": ""}
            | extra
        ),
    )


@pytest.mark.parametrize("binary", [False, True], ids=["load-data", "inserts"])
def test_every_type_value_for_value_into_a_table_the_sink_creates(
    runtime: Runtime,
    runner: TaskRunner,
    postgres: Database,  # noqa: F811
    mariadb_target: Database,  # noqa: F811
    binary: bool,
) -> None:
    """Staged as text by `LOAD DATA` (tabs, newlines, backslashes escaped; NULL as \\N), or, with a
    binary column, by multi-row INSERTs: the same values either way."""
    postgres.execute(PG_TYPES, f"INSERT INTO types VALUES {PG_ROWS}")
    if not binary:
        postgres.execute("ALTER TABLE types DROP COLUMN bs")
    _source(runtime, postgres, "types")
    create_upsert_sink(runtime, mariadb_target, "types")
    assert [r.rows for r in synced(runner, "src", "sink")] == [3, 3]

    columns = "id, si, i, bi, n, r, d, t, v, b, dt, ts, tz" + (", bs" if binary else "")
    source = postgres.rows(f"SELECT {columns} FROM types ORDER BY id")
    written = mariadb_target.rows(f"SELECT {columns} FROM types ORDER BY id")
    assert len(written) == 3
    for src, dst in zip(source, written, strict=True):
        expected = list(src)
        expected[9] = None if src[9] is None else int(src[9])  # BOOLEAN is TINYINT(1)
        expected[12] = None if src[12] is None else src[12].astimezone(dt.UTC).replace(tzinfo=None)  # UTC
        if binary:
            expected[13] = None if src[13] is None else bytes(src[13])
        assert list(dst) == expected
    assert written[0][4] == Decimal("12345678901234567890.1234567890")
    assert written[1][1:] == (None,) * (13 if binary else 12)  # NULL stays NULL, '' stays '' (row 1's v)
    assert written[0][8] == ""
    kinds = dict(
        mariadb_target.rows(
            "SELECT column_name, column_type FROM information_schema.columns "
            "WHERE table_schema = DATABASE() AND table_name = 'types'"
        )
    )
    assert (kinds["id"], kinds["n"], kinds["ts"], kinds["t"]) == (
        "int(11)",
        "decimal(30,10)",
        "datetime(6)",
        "longtext",
    )
    assert synced(runner, "sink")[0].rows == 0


def test_upsert_and_update_keep_the_newest_row_per_key(
    runtime: Runtime,
    runner: TaskRunner,
    postgres: Database,  # noqa: F811
    mariadb_target: Database,  # noqa: F811
) -> None:
    postgres.execute(
        "CREATE TABLE orders (id int PRIMARY KEY, name text, seq int)",
        "INSERT INTO orders SELECT g, 'n' || g, g FROM generate_series(1, 50) g",
    )
    _source(runtime, postgres, "orders", mode="bulk")
    # a SQL transform keeps the batch a DataFrame: staged from Spark's workers, not from Arrow files
    sql = {"transforms": "q", "transforms.q.type": "SqlTransform", "transforms.q.query": "SELECT * FROM __THIS__"}
    create_upsert_sink(runtime, mariadb_target, "orders", **sql)
    synced(runner, "src")
    postgres.execute("UPDATE orders SET name = 'newer ' || id WHERE id % 5 = 0")
    synced(runner, "src")  # bulk: one sink batch holds every key twice
    assert synced(runner, "sink")[0].rows == 100
    rows = mariadb_target.rows("SELECT id, name FROM orders ORDER BY id")
    assert len(rows) == 50 and rows[4] == (5, "newer 5") and rows[5] == (6, "n6")

    # update mode: rows with no match are not inserted; the newest of a key's rows wins
    runtime.create_connector(
        "updater",
        {**runtime.connectors.get("sink").config, "name": "updater", "insert.mode": "update"},
    )
    postgres.execute("UPDATE orders SET name = 'first'", "INSERT INTO orders VALUES (51, 'new', 51)")
    synced(runner, "src")
    postgres.execute("UPDATE orders SET name = 'second ' || id")
    synced(runner, "src")
    synced(runner, "updater")
    rows = mariadb_target.rows("SELECT id, name FROM orders ORDER BY id")
    assert len(rows) == 50 and {name for _, name in rows} == {f"second {i}" for i in range(1, 51)}


@pytest.mark.parametrize("point", ["mid_sink", "before_commit"])
def test_a_crash_at_any_point_loses_and_duplicates_nothing(
    runtime: Runtime,
    runner: TaskRunner,
    postgres: Database,  # noqa: F811
    mariadb_target: Database,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
    point: str,
) -> None:
    """`mid_sink`: staged, not merged; `before_commit`: the target committed, the runtime did not.
    A plain insert (no key) would show any row written twice."""
    postgres.execute(
        "CREATE TABLE events (id int PRIMARY KEY, name text)",
        "INSERT INTO events SELECT g, 'e' || g FROM generate_series(1, 1000) g",
    )
    _source(runtime, postgres, "events")
    create_upsert_sink(
        runtime, mariadb_target, "events", **{"insert.mode": "insert", "pk.mode": "none", "pk.fields": ""}
    )
    synced(runner, "src")

    def crash(at: str) -> None:
        if at == point:
            raise RuntimeError(f"crashed at {at}")

    monkeypatch.setattr(faults, "checkpoint", crash)
    failed = runner.run("sink", 0)
    assert failed.state == "FAILED" and f"crashed at {point}" in failed.message
    assert runtime.connectors.sink_offsets("sink") == {}
    monkeypatch.undo()

    postgres.execute("INSERT INTO events SELECT g, 'e' || g FROM generate_series(1001, 1500) g")
    synced(runner, "src", "sink")
    assert mariadb_target.rows("SELECT COUNT(*), COUNT(DISTINCT id), MIN(id), MAX(id) FROM events") == [
        (1500, 1500, 1, 1500)
    ]
    stages = mariadb_target.rows(  # its own database's: information_schema shows the whole server's
        "SELECT COUNT(*) FROM information_schema.tables "
        "WHERE table_schema = DATABASE() AND table_name LIKE 'connect_stage%'"
    )
    assert stages == [(0,)]


def test_tolerance_none_names_the_record_and_an_offset_reset_writes_again(
    runtime: Runtime,
    runner: TaskRunner,
    postgres: Database,  # noqa: F811
    mariadb_target: Database,  # noqa: F811
) -> None:
    postgres.execute(
        "CREATE TABLE names (id int PRIMARY KEY, name text)",
        "INSERT INTO names SELECT g, CASE WHEN g = 700 THEN repeat('x', 30) ELSE 'n' || g END "
        "FROM generate_series(1, 1000) g",
    )
    mariadb_target.execute("CREATE TABLE names (id INT PRIMARY KEY, name VARCHAR(10))")
    _source(runtime, postgres, "names")
    create_upsert_sink(runtime, mariadb_target, "names")
    synced(runner, "src")
    failed = runner.run("sink", 0)
    assert (failed.state, failed.error_kind) == ("FAILED", "data")
    assert "Data too long for column 'name' (partition 0, offset 699)" in failed.message
    assert mariadb_target.rows("SELECT COUNT(*) FROM names") == [(0,)]

    mariadb_target.execute("ALTER TABLE names MODIFY name VARCHAR(40)")
    assert synced(runner, "sink")[0].rows == 1000
    mariadb_target.execute("DELETE FROM names WHERE id > 10")
    runtime.connectors.set_target_state("sink", "STOPPED")
    runtime.reset_offsets("sink")  # DELETE /connectors/sink/offsets: the target's offsets go too
    runtime.connectors.set_target_state("sink", "RUNNING")
    assert synced(runner, "sink")[0].rows == 1000
    assert mariadb_target.rows("SELECT COUNT(*) FROM names") == [(1000,)]
