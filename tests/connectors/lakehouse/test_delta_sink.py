"""The Delta sink against real parts: PostgreSQL → JDBC source → topic → Delta tables in the test's
directory, read back by delta-rs's own reader (and by Spark over the files of a CDC table)."""

from __future__ import annotations

import datetime as dt
import socket
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from connect_core.connectors.lakehouse.delta import DeltaSinkConfig, DeltaSinkConnector
from connect_core.runtime.context import Runtime
from connect_core.runtime.execution.runner import TaskRunner
from connect_core.sdk.records import TopicPartition
from tests.connectors.jdbc_helpers import Database, postgres, synced  # noqa: F401  (fixtures)
from tests.connectors.lakehouse.delta_helpers import read, sink_config, version_of

COLUMNS = ("id", "name", "amount", "ts")


@pytest.fixture
def lake(tmp_path: Path) -> Path:
    """The directory the tables go to (inside the test's `file.allowed.paths`)."""
    return tmp_path / "lake"


def _source(runtime: Runtime, postgres: Database, table: str, column: str = "id", mode: str = "incrementing") -> None:  # noqa: F811
    extra = {"incrementing.column.name": column} if mode == "incrementing" else {}
    runtime.create_connector(
        "src",
        postgres.source_config(**{"mode": mode, "table.whitelist": table, "topic.prefix": "", **extra}),
    )


def _orders(runtime: Runtime, postgres: Database) -> None:  # noqa: F811
    postgres.execute(
        "CREATE TABLE orders (id int PRIMARY KEY, name text, amount numeric(12,2), ts timestamptz)",
        "INSERT INTO orders SELECT g, 'n' || g, g * 1.25, timestamptz '2024-01-01 00:00:00+00' + g * interval '1 s' "
        "FROM generate_series(1, 500) g",
    )
    _source(runtime, postgres, "orders")


def test_a_topic_lands_in_a_new_table_then_only_new_rows_and_a_reset_writes_all_again(
    runtime: Runtime,
    runner: TaskRunner,
    postgres: Database,  # noqa: F811
    lake: Path,
) -> None:
    _orders(runtime, postgres)
    config = sink_config("orders", path=f"{lake}/${{topic}}")
    runtime.create_connector("sink", config)
    table = str(lake / "orders")
    assert synced(runner, "src", "sink")[1].rows == 500
    [dataset] = DeltaSinkConnector().lineage(DeltaSinkConfig.model_validate(config))
    assert (dataset.namespace, dataset.name) == (f"file://{socket.gethostname()}", table)
    source = postgres.rows(f"SELECT {', '.join(COLUMNS)} FROM orders ORDER BY id")
    assert read(table, COLUMNS) == source
    assert source[0] == (1, "n1", Decimal("1.25"), dt.datetime(2024, 1, 1, 0, 0, 1, tzinfo=dt.UTC))
    assert version_of(table, "sink", "orders") == 500  # the offsets, in the table's own commit
    assert DeltaTable(table).version() == 0  # the table was created by the commit of its rows

    postgres.execute("INSERT INTO orders VALUES (501, 'late', 9.99, NULL), (502, NULL, NULL, NULL)")
    before = set(DeltaTable(table).file_uris())
    run = synced(runner, "src", "sink")[1]
    assert run.rows == 2
    source = postgres.rows(f"SELECT {', '.join(COLUMNS)} FROM orders ORDER BY id")
    assert read(table, COLUMNS) == source
    assert DeltaTable(table).version() == 1 and version_of(table, "sink", "orders") == 502  # one commit per run
    # what the run reports (summed in /metrics, shown by the view): the files it added, their bytes, the version
    added = [Path(f) for f in set(DeltaTable(table).file_uris()) - before]
    assert (run.target["files_written"], run.target["bytes_written"]) == (
        len(added),
        sum(f.stat().st_size for f in added),
    )
    assert run.target["tables"] == [{"name": table, "version": "1"}]

    # DELETE /connectors/sink/offsets: the table's app transactions go back to 0 too, so the sink
    # writes every record again (an append: each row twice) instead of skipping what it held
    runtime.connectors.set_target_state("sink", "STOPPED")
    runtime.reset_offsets("sink")
    runtime.connectors.set_target_state("sink", "RUNNING")
    assert version_of(table, "sink", "orders") == 0
    assert synced(runner, "sink")[0].rows == 502
    assert read(table, COLUMNS) == sorted(source * 2, key=lambda r: r[0])


def test_a_batch_redelivered_after_the_delta_commit_is_not_written_twice(
    runtime: Runtime,
    runner: TaskRunner,
    postgres: Database,  # noqa: F811
    lake: Path,
) -> None:
    _orders(runtime, postgres)
    table = str(lake / "orders")
    runtime.create_connector("sink", sink_config("orders", path=table))
    synced(runner, "src")
    # the state a kill between the Delta commit and the runtime's commit leaves: run the sink, then
    # put its runtime offsets back (the store's alone: `runtime.alter_sink_offsets` would tell the sink)
    synced(runner, "sink")
    runtime.connectors.set_target_state("sink", "STOPPED")
    runtime.connectors.alter_sink_offsets("sink", {TopicPartition("orders", 0): None})
    runtime.connectors.set_target_state("sink", "RUNNING")
    assert runtime.connectors.sink_offsets("sink") == {}

    again = synced(runner, "sink")[0]
    assert again.rows == 500  # the batch is read again and its offsets committed …
    source = postgres.rows(f"SELECT {', '.join(COLUMNS)} FROM orders ORDER BY id")
    assert read(table, COLUMNS) == source  # … but nothing was written twice
    assert DeltaTable(table).version() == 0  # and no second commit made
    assert {tp.partition: c.offset for tp, c in runtime.connectors.sink_offsets("sink").items()} == {0: 500}

    postgres.execute("INSERT INTO orders SELECT g, 'm' || g, g, NULL FROM generate_series(501, 600) g")
    synced(runner, "src", "sink")
    assert read(table, COLUMNS) == postgres.rows(f"SELECT {', '.join(COLUMNS)} FROM orders ORDER BY id")


def _replay(postgres: Database) -> list[tuple[object, ...]]:  # noqa: F811
    """What the source table's rows are after every change, computed from the log itself."""
    rows: dict[int, tuple[object, ...]] = {}
    for _seq, id_, name, qty, op in postgres.rows("SELECT seq, id, name, qty, op FROM changes ORDER BY seq"):
        if op == "d":
            rows.pop(id_, None)
        else:
            rows[id_] = (id_, name, qty, op)
    return [rows[k] for k in sorted(rows)]


def test_cdc_upserts_and_deletes_converge_in_one_merge_per_run(
    runtime: Runtime,
    runner: TaskRunner,
    postgres: Database,  # noqa: F811
    lake: Path,
    spark: Any,
) -> None:
    postgres.execute("CREATE TABLE changes (seq bigint PRIMARY KEY, id int, name text, qty int, op text)")
    _source(runtime, postgres, "changes", "seq")
    table = str(lake / "stock")
    runtime.create_connector(
        "sink",
        sink_config(
            "changes",
            path=table,
            **{"delta.tables.cdc-field": "op", "delta.tables.id-columns": "id", "delta.tables.partition-by": "op"},
        ),
    )
    cols = ("id", "name", "qty", "op")
    postgres.execute(
        "INSERT INTO changes VALUES (1, 1, 'a', 1, 'c'), (2, 2, 'b', 2, 'c'), (3, 3, 'c', 3, 'r'), (4, 4, 'd', 4, 'c')"
    )
    synced(runner, "src", "sink")
    assert read(table, cols) == _replay(postgres)
    assert DeltaTable(table).metadata().partition_columns == ["op"]  # an update moves a row across partitions
    postgres.execute(
        "INSERT INTO changes VALUES (5, 1, 'a', 10, 'u'), (6, 1, 'a', 11, 'u'),"  # updated twice in one batch
        " (7, 2, NULL, NULL, 'd'),"  # deleted
        " (8, 3, NULL, NULL, 'd'), (9, 3, 'c', 30, 'c'),"  # deleted, then the key inserted again
        " (10, 5, 'e', 5, 'c'), (11, 6, 'f', 6, 'c'), (12, 6, NULL, NULL, 'd')"  # new; new and gone in one batch
    )
    synced(runner, "src", "sink")
    expected = _replay(postgres)
    assert read(table, cols) == expected == [(1, "a", 11, "u"), (3, "c", 30, "c"), (4, "d", 4, "c"), (5, "e", 5, "c")]
    delta = DeltaTable(table)
    assert delta.version() == 1  # the second run's changes are one commit (a merge) …
    merge = delta.history(1)[0]
    assert merge["operation"] == "MERGE"
    metrics = merge["operationMetrics"]
    assert (metrics["num_target_rows_updated"], metrics["num_target_rows_deleted"]) == (2, 1)  # keys 1, 3 / key 2
    assert metrics["num_target_rows_inserted"] == 1  # key 5 (key 6 never reaches the table)
    assert version_of(table, "sink", "changes") == 12  # … carrying the offsets it reached

    postgres.execute("INSERT INTO changes VALUES (13, 3, NULL, NULL, 'd'), (14, 2, 'b', 20, 'c')")
    synced(runner, "src", "sink")
    expected = _replay(postgres)
    assert read(table, cols) == expected
    files = DeltaTable(table).file_uris()
    spark_rows = spark.read.option("basePath", table).parquet(*files).select(*cols).orderBy("id").collect()
    assert [tuple(r) for r in spark_rows] == expected  # Spark reading the live files sees the same rows


def test_schema_evolves_by_added_columns_and_widening_and_refuses_other_changes(
    runtime: Runtime,
    runner: TaskRunner,
    postgres: Database,  # noqa: F811
    lake: Path,
) -> None:
    postgres.execute(
        "CREATE TABLE items (id int PRIMARY KEY, qty int, price real)",
        "INSERT INTO items VALUES (1, 1, 1.5), (2, 2, 2.5)",
    )
    _source(runtime, postgres, "items", mode="bulk")
    table = str(lake / "items")
    config = sink_config(
        "items", path=table, **{"delta.tables.upsert-mode-enabled": "true", "delta.tables.id-columns": "id"}
    )
    runtime.create_connector("sink", config)
    synced(runner, "src", "sink")
    types = {f.name: f.type.type for f in DeltaTable(table).schema().fields}
    assert (types["qty"], types["price"]) == ("integer", "float")

    # without evolve-schema-enabled a new column fails the run, naming it and the fix
    postgres.execute("ALTER TABLE items ADD COLUMN note text", "ALTER TABLE items ALTER COLUMN qty TYPE bigint")
    postgres.execute("UPDATE items SET note = 'n' || id, qty = qty + 5000000000")
    synced(runner, "src")
    failed = runner.run("sink", 0)
    assert failed.state == "FAILED"
    assert "`note` (string)" in failed.message and "delta.tables.evolve-schema-enabled" in failed.message

    runtime.update_connector("sink", {**config, "delta.tables.evolve-schema-enabled": "true"})
    synced(runner, "sink")
    types = {f.name: f.type.type for f in DeltaTable(table).schema().fields}
    assert (types["qty"], types["note"]) == ("long", "string")  # int → long, and a new column
    source = postgres.rows("SELECT id, qty, price, note FROM items ORDER BY id")
    assert read(table, ("id", "qty", "price", "note")) == source  # upserted: no duplicate keys, no lost digits
    assert source[0][1] == 5000000001

    # float → string is no widening: a clear error naming the column and both types, the table untouched
    version = DeltaTable(table).version()
    postgres.execute("ALTER TABLE items ALTER COLUMN price TYPE text")
    synced(runner, "src")
    failed = runner.run("sink", 0)
    assert failed.state == "FAILED"
    assert f"column `price` of Delta table `{table}` is float and the records hold string" in failed.message
    assert read(table, ("id", "qty", "price", "note")) == source and DeltaTable(table).version() == version


def test_an_offset_alteration_reaches_the_table_and_upkeep_keeps_the_rows(
    runtime: Runtime,
    runner: TaskRunner,
    postgres: Database,  # noqa: F811
    lake: Path,
) -> None:
    postgres.execute(
        "CREATE TABLE events (id int PRIMARY KEY, body text)",
        "INSERT INTO events SELECT g, 'b' || g FROM generate_series(1, 30) g",
    )
    _source(runtime, postgres, "events")
    table = str(lake / "events")
    config = sink_config("events", path=table)
    runtime.create_connector("sink", config)
    synced(runner, "src", "sink")
    rows = postgres.rows("SELECT id, body FROM events ORDER BY id")

    # PATCH /connectors/sink/offsets to offset 24 (ids 25…30): the table's app transaction follows,
    # so those rows are written again (appended: twice) and no others
    runtime.connectors.set_target_state("sink", "STOPPED")
    runtime.alter_sink_offsets("sink", {TopicPartition("events", 0): 24})
    runtime.connectors.set_target_state("sink", "RUNNING")
    assert version_of(table, "sink", "events") == 24
    synced(runner, "sink")
    expected = sorted(rows + [r for r in rows if r[0] > 24])
    assert read(table, ("id", "body")) == expected

    # a few more small commits, then upkeep: compaction to one file, vacuum of the replaced ones
    for g in range(31, 34):
        postgres.execute(f"INSERT INTO events VALUES ({g}, 'b{g}')")
        synced(runner, "src", "sink")
    expected = sorted(expected + [(g, f"b{g}") for g in range(31, 34)])
    before = set(DeltaTable(table).file_uris())
    assert len(before) == 5
    connector = DeltaSinkConnector()
    cfg = DeltaSinkConfig.model_validate(config)
    metrics = connector.optimize(cfg)[table]
    assert (metrics["numFilesRemoved"], metrics["numFilesAdded"]) == (5, 1)
    assert read(table, ("id", "body")) == expected
    removed = connector.vacuum(cfg, retention_hours=0)[table]
    assert {str(Path(table) / f) for f in removed} == {u.removeprefix("file://") for u in before}
    assert sorted(p.name for p in Path(table).glob("*.parquet")) == [
        Path(u).name for u in DeltaTable(table).file_uris()
    ]
    assert read(table, ("id", "body")) == expected  # the same rows, from one file
    assert version_of(table, "sink", "events") == 33  # upkeep keeps the offsets
    postgres.execute("INSERT INTO events VALUES (34, 'b34')")
    synced(runner, "src", "sink")
    assert read(table, ("id", "body")) == sorted([*expected, (34, "b34")])


def test_a_table_directory_that_is_a_symlink_out_of_the_allowed_paths_is_refused(
    runtime: Runtime,
    runner: TaskRunner,
    postgres: Database,  # noqa: F811
    lake: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """`${topic}` fills in a directory name the runtime could not check at create: a symlink there
    leading out of the configured directory is refused where the task runs, nothing written."""
    _orders(runtime, postgres)
    outside = tmp_path_factory.mktemp("outside")
    lake.mkdir()
    (lake / "orders").symlink_to(outside, target_is_directory=True)
    runtime.create_connector("sink", sink_config("orders", path=f"{lake}/${{topic}}"))
    synced(runner, "src")
    failed = runner.run("sink", 0)
    assert failed.state == "FAILED"
    assert "leads out of" in failed.message
    assert list(outside.iterdir()) == []
    assert runtime.connectors.sink_offsets("sink") == {}

    # a link below the table's directory (its log, here): delta-rs would follow it; refused too
    (lake / "orders").unlink()
    (lake / "orders").mkdir()
    (lake / "orders" / "_delta_log").symlink_to(outside, target_is_directory=True)
    failed = runner.run("sink", 0)
    assert failed.state == "FAILED" and "holds a symbolic link (`_delta_log`)" in failed.message
    assert list(outside.iterdir()) == []


def test_an_offset_reset_gets_the_config_a_run_gets_and_refuses_what_it_cannot_apply(
    runtime: Runtime,
    runner: TaskRunner,
    postgres: Database,  # noqa: F811
    tmp_path: Path,
) -> None:
    """`DELETE …/offsets` tells the sink with its paths confined as a run's are (a directory swapped
    for a link out of the allowed paths since create is refused, nothing written there), and before
    the store forgets its offsets: a reset the sink cannot apply changes nothing."""
    import shutil

    from connect_core.sdk.errors import ConfigError

    lake, outside = tmp_path / "lake", tmp_path.parent / f"{tmp_path.name}-outside"
    _orders(runtime, postgres)
    runtime.create_connector("sink", sink_config("orders", path=f"{lake}/orders"))
    synced(runner, "src", "sink")
    runtime.set_target_state("sink", "STOPPED")
    shutil.move(str(lake), str(outside))
    lake.symlink_to(outside, target_is_directory=True)
    log = sorted(p.name for p in (outside / "orders" / "_delta_log").iterdir())
    with pytest.raises(ConfigError, match="outside the directories"):
        runtime.reset_offsets("sink")
    assert sorted(p.name for p in (outside / "orders" / "_delta_log").iterdir()) == log  # nothing committed there
    assert runtime.connectors.sink_offsets("sink") != {}  # and the store kept its offsets

    lake.unlink()
    shutil.move(str(outside), str(lake))
    routed = sink_config(
        "orders",
        path=f"{lake}/${{topic}}",
        **{
            "transforms": "r",
            "transforms.r.type": "org.apache.kafka.connect.transforms.RegexRouter",
            "transforms.r.regex": "(.*)",
            "transforms.r.replacement": "$1",
        },
    )
    runtime.update_connector("sink", routed)
    kept = runtime.connectors.sink_offsets("sink")
    with pytest.raises(ConfigError):  # its tables cannot be found from the config: refused whole
        runtime.reset_offsets("sink")
    assert runtime.connectors.sink_offsets("sink") == kept


def test_a_big_batch_is_written_by_the_workers_once_with_the_statistics_delta_rs_writes(
    runtime: Runtime,
    runner: TaskRunner,
    postgres: Database,  # noqa: F811
    lake: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A batch above the driver's share (here: any) is never collected into the driver: Spark's
    workers write the data files, the driver commits them with the offsets, once."""
    from connect_core.runtime.topics import segments
    from connect_core.sdk.records import ArrowRecords

    monkeypatch.setattr(segments, "driver_max_rows", lambda spark: 0)

    def collected(*args: object, **kwargs: object) -> None:
        raise AssertionError("an append collected its records into the driver")

    monkeypatch.setattr(ArrowRecords, "collect_arrow", collected)
    _orders(runtime, postgres)
    table = str(lake / "orders")
    runtime.create_connector("sink", sink_config("orders", path=table, **{"delta.tables.partition-by": "name"}))
    synced(runner, "src", "sink")
    source = postgres.rows(f"SELECT {', '.join(COLUMNS)} FROM orders ORDER BY id")
    assert read(table, COLUMNS) == source
    delta = DeltaTable(table)
    assert delta.version() == 0 and version_of(table, "sink", "orders") == 500
    assert delta.metadata().partition_columns == ["name"]
    adds = pa.table(delta.get_add_actions(flatten=True)).to_pydict()
    # each file's statistics, as delta-rs writes them: what lets a reader skip files
    assert sum(adds["num_records"]) == 500 and adds["min.id"] == adds["max.id"]
    assert sorted(adds["max.id"]) == list(range(1, 501))
    assert len(delta.file_uris(partition_filters=[("name", "=", "n7")])) == 1
    assert not [p for p in (lake / "orders").rglob("_delta_log") if p.parent != lake / "orders"]

    # the state a kill between the Delta commit and the runtime's leaves: the batch is read again,
    # written to the table no second time
    runtime.connectors.set_target_state("sink", "STOPPED")
    runtime.connectors.alter_sink_offsets("sink", {TopicPartition("orders", 0): None})
    runtime.connectors.set_target_state("sink", "RUNNING")
    assert synced(runner, "sink")[0].rows == 500
    assert read(table, COLUMNS) == source and DeltaTable(table).version() == 0

    postgres.execute("INSERT INTO orders SELECT g, 'm' || g, g, NULL FROM generate_series(501, 600) g")
    synced(runner, "src", "sink")
    assert read(table, COLUMNS) == postgres.rows(f"SELECT {', '.join(COLUMNS)} FROM orders ORDER BY id")
    assert DeltaTable(table).version() == 1
