"""The Iceberg sink against real parts: PostgreSQL → JDBC source → topic → Iceberg tables in a SQL
catalog on the machine's PostgreSQL, read back by pyiceberg and by pyarrow over the data files."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from pathlib import Path

import pytest

from connect_core.runtime.context import Runtime
from connect_core.runtime.execution.runner import TaskRunner
from connect_core.runtime.store.metrics import MetricsStore
from connect_core.sdk.records import TopicPartition
from tests.connectors.jdbc_helpers import Database, postgres, synced, target  # noqa: F401  (fixtures)
from tests.connectors.lakehouse.iceberg_helpers import Lake, sink_config

COLUMNS = ("id", "name", "amount", "ts")


@pytest.fixture
def lake(target: Database, tmp_path: Path) -> Lake:  # noqa: F811
    """A SQL catalog in a fresh PostgreSQL database, its warehouse in the test's directory."""
    return Lake(target, tmp_path / "warehouse")


def _orders_source(runtime: Runtime, postgres: Database) -> None:  # noqa: F811
    postgres.execute(
        "CREATE TABLE orders (id int PRIMARY KEY, name text, amount numeric(12,2), ts timestamptz)",
        "INSERT INTO orders SELECT g, 'n' || g, g * 1.25, timestamptz '2024-01-01 00:00:00+00' + g * interval '1 s' "
        "FROM generate_series(1, 500) g",
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


def test_a_topic_lands_in_a_new_table_then_only_new_rows_and_a_reset_writes_all_again(
    runtime: Runtime,
    runner: TaskRunner,
    postgres: Database,  # noqa: F811
    lake: Lake,
) -> None:
    _orders_source(runtime, postgres)
    runtime.create_connector("sink", sink_config(lake, "orders", "shop.orders"))
    run = synced(runner, "src", "sink")[1]
    assert run.rows == 500
    snapshot = lake.catalog().load_table("shop.orders").current_snapshot()
    assert snapshot is not None  # the run reports the table and the snapshot it made (the view shows it)
    assert run.target["tables"] == [{"name": "shop.orders", "version": str(snapshot.snapshot_id)}]
    source = postgres.rows(f"SELECT {', '.join(COLUMNS)} FROM orders ORDER BY id")
    assert lake.scan("shop.orders", COLUMNS) == source
    assert lake.parquet("shop.orders", COLUMNS) == source
    assert source[0] == (1, "n1", Decimal("1.25"), dt.datetime(2024, 1, 1, 0, 0, 1, tzinfo=dt.UTC))
    assert json.loads(lake.offsets("shop.orders") or "{}") == {"orders": {"0": 500}}

    postgres.execute("INSERT INTO orders VALUES (501, 'late', 9.99, NULL), (502, NULL, NULL, NULL)")
    assert synced(runner, "src", "sink")[1].rows == 2
    source = postgres.rows(f"SELECT {', '.join(COLUMNS)} FROM orders ORDER BY id")
    assert lake.scan("shop.orders", COLUMNS) == source == lake.parquet("shop.orders", COLUMNS)
    assert len(lake.catalog().load_table("shop.orders").history()) == 2  # one commit per run
    # what /metrics sums for the sink: its two appends' data files and their bytes, as the table has them
    (task,) = [t for t in MetricsStore(runtime.engine).snapshot(60).runs if t.connector == "sink"]
    live = [t.file for t in lake.catalog().load_table("shop.orders").scan().plan_files()]
    assert (task.files_written, task.bytes_written) == (len(live), sum(f.file_size_in_bytes for f in live))

    # DELETE /connectors/sink/offsets: the table's own record of them goes too, so the sink writes
    # every record again (an append: each row twice) instead of skipping what the table held
    runtime.connectors.set_target_state("sink", "STOPPED")
    runtime.reset_offsets("sink")
    runtime.connectors.set_target_state("sink", "RUNNING")
    assert synced(runner, "sink")[0].rows == 502
    assert lake.scan("shop.orders", COLUMNS) == sorted(source * 2, key=lambda r: r[0])


def _rerun_after_losing_the_runtime_commit(runtime: Runtime, runner: TaskRunner) -> None:
    """Run the sink, then put its runtime offsets back where they were: the state a kill between
    the Iceberg commit and the runtime's commit leaves (the table has the batch, Connect does not)."""
    before = runtime.connectors.sink_offsets("sink")
    synced(runner, "sink")
    after = runtime.connectors.sink_offsets("sink")
    runtime.connectors.set_target_state("sink", "STOPPED")
    # the store's offsets alone (`runtime.alter_sink_offsets` would tell the sink, as a user's alter does)
    runtime.connectors.alter_sink_offsets("sink", {tp: before[tp].offset if tp in before else None for tp in after})
    runtime.connectors.set_target_state("sink", "RUNNING")


def test_a_batch_redelivered_after_the_iceberg_commit_is_not_written_twice(
    runtime: Runtime,
    runner: TaskRunner,
    postgres: Database,  # noqa: F811
    lake: Lake,
) -> None:
    _orders_source(runtime, postgres)
    runtime.create_connector("sink", sink_config(lake, "orders", "shop.orders"))
    synced(runner, "src")
    _rerun_after_losing_the_runtime_commit(runtime, runner)  # the table has all 500; Connect's offset: none
    assert runtime.connectors.sink_offsets("sink") == {}
    again = synced(runner, "sink")[0]
    assert again.rows == 500  # the batch is read again and its offsets committed …
    source = postgres.rows(f"SELECT {', '.join(COLUMNS)} FROM orders ORDER BY id")
    assert lake.scan("shop.orders", COLUMNS) == source  # … but nothing was written twice
    assert len(lake.catalog().load_table("shop.orders").history()) == 1
    assert {tp.partition: c.offset for tp, c in runtime.connectors.sink_offsets("sink").items()} == {0: 500}

    postgres.execute("INSERT INTO orders SELECT g, 'm' || g, g, NULL FROM generate_series(501, 600) g")
    synced(runner, "src", "sink")
    assert lake.scan("shop.orders", COLUMNS) == postgres.rows(f"SELECT {', '.join(COLUMNS)} FROM orders ORDER BY id")


def _changes_source(runtime: Runtime, postgres: Database) -> None:  # noqa: F811
    """A change log as a CDC source's unwrapped topic carries it: each row a change with its op."""
    postgres.execute("CREATE TABLE changes (seq bigint PRIMARY KEY, id int, name text, qty int, op text)")
    runtime.create_connector(
        "src",
        postgres.source_config(
            **{
                "mode": "incrementing",
                "incrementing.column.name": "seq",
                "table.whitelist": "changes",
                "topic.prefix": "",
            }
        ),
    )


def _replay(postgres: Database) -> list[tuple[object, ...]]:  # noqa: F811
    """What the source table's rows are after every change, computed from the log itself."""
    rows: dict[int, tuple[object, ...]] = {}
    for _seq, id_, name, qty, op in postgres.rows("SELECT seq, id, name, qty, op FROM changes ORDER BY seq"):
        if op == "d":
            rows.pop(id_, None)
        else:
            rows[id_] = (id_, name, qty, op)
    return [rows[k] for k in sorted(rows)]


def test_cdc_upserts_and_deletes_converge_and_rewrite_only_the_files_holding_the_keys(
    runtime: Runtime,
    runner: TaskRunner,
    postgres: Database,  # noqa: F811
    lake: Lake,
    spark,  # type: ignore[no-untyped-def]
) -> None:
    _changes_source(runtime, postgres)
    runtime.create_connector(
        "sink",
        sink_config(
            lake,
            "changes",
            "shop.stock",
            **{"iceberg.tables.cdc-field": "op", "iceberg.tables.default-id-columns": "id"},
        ),
    )
    cols = ("id", "name", "qty", "op")
    postgres.execute(
        "INSERT INTO changes VALUES (1, 1, 'a', 1, 'c'), (2, 2, 'b', 2, 'c'), (3, 3, 'c', 3, 'r'), (4, 4, 'd', 4, 'c'),"
        " (5, 1, 'a', 10, 'u'), (6, 1, 'a', 11, 'u'),"  # updated twice in one batch
        " (7, 2, NULL, NULL, 'd'),"  # deleted
        " (8, 3, NULL, NULL, 'd'), (9, 3, 'c', 30, 'c')"  # deleted, then the key inserted again
    )
    synced(runner, "src", "sink")
    assert (
        lake.scan("shop.stock", cols) == _replay(postgres) == [(1, "a", 11, "u"), (3, "c", 30, "c"), (4, "d", 4, "c")]
    )
    assert lake.parquet("shop.stock", cols) == _replay(postgres)
    [first] = lake.data_files("shop.stock")

    postgres.execute("INSERT INTO changes SELECT 100 + g, 100 + g, 'n', g, 'c' FROM generate_series(1, 6) g")
    synced(runner, "src", "sink")
    [second] = set(lake.data_files("shop.stock")) - {first}  # new keys: the first file is not rewritten

    # an update and a delete of keys of the second batch: only its file is rewritten
    postgres.execute("INSERT INTO changes VALUES (200, 103, 'changed', 99, 'u'), (201, 104, NULL, NULL, 'd')")
    synced(runner, "src", "sink")
    files = set(lake.data_files("shop.stock"))
    assert first in files and second not in files and len(files) == 3  # + the second rewritten + the new rows
    expected = _replay(postgres)
    assert lake.scan("shop.stock", cols) == expected == lake.parquet("shop.stock", cols)
    spark_rows = spark.read.parquet(*lake.data_files("shop.stock")).select(*cols).orderBy("id").collect()
    assert [tuple(r) for r in spark_rows] == expected  # Spark reading the files sees the same rows
    assert json.loads(lake.offsets("shop.stock") or "{}") == {"changes": {"0": 17}}


def _evolving_source(runtime: Runtime, postgres: Database) -> None:  # noqa: F811
    postgres.execute(
        "CREATE TABLE items (id int PRIMARY KEY, qty int, price real)",
        "INSERT INTO items VALUES (1, 1, 1.5), (2, 2, 2.5)",
    )
    runtime.create_connector(
        "src",
        postgres.source_config(**{"mode": "bulk", "table.whitelist": "items", "topic.prefix": ""}),
    )


def test_schema_evolves_by_added_columns_and_widening_and_refuses_other_changes(
    runtime: Runtime,
    runner: TaskRunner,
    postgres: Database,  # noqa: F811
    lake: Lake,
) -> None:
    _evolving_source(runtime, postgres)
    runtime.create_connector(
        "sink",
        sink_config(
            lake,
            "items",
            "shop.items",
            **{"iceberg.tables.upsert-mode-enabled": "true", "iceberg.tables.default-id-columns": "id"},
        ),
    )
    synced(runner, "src", "sink")
    schema = lake.catalog().load_table("shop.items").schema()
    assert (str(schema.find_type("qty")), str(schema.find_type("price"))) == ("int", "float")

    # without evolve-schema-enabled a new column fails the run, naming it and the fix
    postgres.execute("ALTER TABLE items ADD COLUMN note text", "ALTER TABLE items ALTER COLUMN qty TYPE bigint")
    postgres.execute("UPDATE items SET note = 'n' || id, qty = qty + 5000000000")
    synced(runner, "src")
    failed = runner.run("sink", 0)
    assert failed.state == "FAILED"
    assert "`note` (string)" in failed.message and "iceberg.tables.evolve-schema-enabled" in failed.message

    config = runtime.connectors.get("sink").config
    runtime.update_connector("sink", {**config, "iceberg.tables.evolve-schema-enabled": "true"})
    synced(runner, "sink")
    schema = lake.catalog().load_table("shop.items").schema()
    assert (str(schema.find_type("qty")), str(schema.find_type("note"))) == ("long", "string")
    source = postgres.rows("SELECT id, qty, price, note FROM items ORDER BY id")
    assert lake.scan("shop.items", ("id", "qty", "price", "note")) == source  # upserted: no duplicate keys
    assert source[0][1] == 5000000001

    # float → string is no widening Iceberg knows: a clear error, the table untouched
    postgres.execute("ALTER TABLE items ALTER COLUMN price TYPE text")
    synced(runner, "src")
    failed = runner.run("sink", 0)
    assert failed.state == "FAILED"
    assert "column `price` of table `shop.items` is float and the records hold string" in failed.message
    assert lake.scan("shop.items", ("id", "qty", "price", "note")) == source


def test_dynamic_routes_fill_each_table_and_an_offset_alteration_reaches_them(
    runtime: Runtime,
    runner: TaskRunner,
    postgres: Database,  # noqa: F811
    lake: Lake,
) -> None:
    postgres.execute(
        "CREATE TABLE events (id int PRIMARY KEY, dest text, body text)",
        "INSERT INTO events SELECT g, CASE WHEN g % 3 = 0 THEN 'lake.threes' ELSE 'lake.others' END, 'b' || g "
        "FROM generate_series(1, 30) g",
    )
    runtime.create_connector(
        "src",
        postgres.source_config(
            **{
                "mode": "incrementing",
                "incrementing.column.name": "id",
                "table.whitelist": "events",
                "topic.prefix": "",
            }
        ),
    )
    config = sink_config(
        lake,
        "events",
        "",
        **{"iceberg.tables.dynamic-enabled": "true", "iceberg.tables.route-field": "dest"},
    )
    runtime.create_connector("sink", config)
    synced(runner, "src", "sink")
    threes = postgres.rows("SELECT id, dest, body FROM events WHERE id % 3 = 0 ORDER BY id")
    others = postgres.rows("SELECT id, dest, body FROM events WHERE id % 3 <> 0 ORDER BY id")
    assert lake.scan("lake.threes", ("id", "dest", "body")) == threes
    assert lake.scan("lake.others", ("id", "dest", "body")) == others

    # PATCH /connectors/sink/offsets to offset 24 (the rows of ids 25…30): each table's own record
    # follows, so those rows are written again (appended: twice) and no others
    runtime.connectors.set_target_state("sink", "STOPPED")
    runtime.alter_sink_offsets("sink", {TopicPartition("events", 0): 24})
    runtime.connectors.set_target_state("sink", "RUNNING")
    synced(runner, "sink")  # reads the whole segment again (30 records); the tables take 24… only
    assert lake.scan("lake.threes", ("id", "dest", "body")) == sorted(threes + [r for r in threes if r[0] > 24])
    assert lake.scan("lake.others", ("id", "dest", "body")) == sorted(others + [r for r in others if r[0] > 24])


def test_a_table_whose_files_lie_outside_the_warehouse_is_refused(
    runtime: Runtime,
    runner: TaskRunner,
    postgres: Database,  # noqa: F811
    lake: Lake,
    tmp_path: Path,
) -> None:
    """A catalog entry (made by someone else, or a REST server's answer) naming a location outside
    `iceberg.catalog.warehouse`: the sink writes no file there, even inside `file.allowed.paths`."""
    import pyarrow as pa

    _orders_source(runtime, postgres)
    catalog = lake.catalog()
    catalog.create_namespace("shop")
    elsewhere = tmp_path / "elsewhere"
    catalog.create_table(
        "shop.orders", schema=pa.schema([("id", pa.int32()), ("name", pa.string())]), location=str(elsewhere)
    )
    runtime.create_connector("sink", sink_config(lake, "orders", "shop.orders"))
    synced(runner, "src")
    failed = runner.run("sink", 0)
    assert failed.state == "FAILED"
    assert "outside the warehouse `iceberg.catalog.warehouse`: refused" in failed.message
    assert not list(elsewhere.rglob("*.parquet"))
    assert runtime.connectors.sink_offsets("sink") == {}


def test_a_big_batch_is_written_by_the_workers_once_into_plain_and_partitioned_tables(
    runtime: Runtime,
    runner: TaskRunner,
    postgres: Database,  # noqa: F811
    lake: Lake,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A batch above the driver's share (here: any) is never collected into the driver: Spark's
    workers write the data files and the driver commits them, with the same guarantees."""
    from connect_core.runtime.topics import segments
    from connect_core.sdk.records import ArrowRecords

    monkeypatch.setattr(segments, "driver_max_rows", lambda spark: 0)

    def collected(*args: object, **kwargs: object) -> None:
        raise AssertionError("an append collected its records into the driver")

    monkeypatch.setattr(ArrowRecords, "collect_arrow", collected)
    _orders_source(runtime, postgres)
    runtime.create_connector(
        "sink",
        sink_config(lake, "orders", "shop.orders,shop.by_day", **{"iceberg.table.shop.by_day.partition-by": "day(ts)"}),
    )
    synced(runner, "src")
    _rerun_after_losing_the_runtime_commit(runtime, runner)  # both tables committed; Connect's offsets lost
    assert synced(runner, "sink")[0].rows == 500  # read again, written to neither table again
    source = postgres.rows(f"SELECT {', '.join(COLUMNS)} FROM orders ORDER BY id")
    for table in ("shop.orders", "shop.by_day"):
        assert lake.scan(table, COLUMNS) == source == lake.parquet(table, COLUMNS)
        assert len(lake.catalog().load_table(table).history()) == 1
        assert json.loads(lake.offsets(table) or "{}") == {"orders": {"0": 500}}
    by_day = lake.catalog().load_table("shop.by_day")
    assert str(by_day.spec().fields[0].transform) == "day"
    assert len(lake.data_files("shop.by_day")) == 1  # 500 seconds of 2024-01-01: one day

    postgres.execute(
        "INSERT INTO orders SELECT g, 'm' || g, g, timestamptz '2024-01-02' FROM generate_series(501, 600) g"
    )
    synced(runner, "src", "sink")
    source = postgres.rows(f"SELECT {', '.join(COLUMNS)} FROM orders ORDER BY id")
    for table in ("shop.orders", "shop.by_day"):
        assert lake.scan(table, COLUMNS) == source == lake.parquet(table, COLUMNS)
    assert len(lake.data_files("shop.by_day")) == 2
