"""An incremental snapshot's chunks read in parallel by Spark tasks: every task reads in the run's
one snapshot (the low watermark), so a change committed while they read is not in their rows; the
rows and the progress are those of the one-at-a-time read; a task's failure on a row gives the
table up as the driver's would."""

from __future__ import annotations

import time
from typing import Any

import pytest

from connect_core.connectors.cdc.config import PostgresCdcConfig
from connect_core.connectors.cdc.postgres import _incremental, _server
from connect_core.testing.servers import PgServer
from tests.connectors.cdc._pipelines import pg_capture


def _setup(pg_db: PgServer, rows: int = 1000) -> None:
    pg_db.execute(
        "CREATE TABLE items (id int, region text, label text, PRIMARY KEY (region, id))",
        f"INSERT INTO items SELECT g, 'r' || (g % 3), 'item ' || g FROM generate_series(1, {rows}) g",
    )


def _config(pg_db: PgServer, **extra: str) -> PostgresCdcConfig:
    return PostgresCdcConfig.model_validate(
        pg_capture(pg_db, "public.items", **{"incremental.snapshot.chunk.size": "70", **extra})
    )


def _tables(cfg: PostgresCdcConfig) -> dict[str, _server.Table]:
    with _server.connect(cfg) as conn:
        return {t.qualified: t for t in _server.captured_tables(conn, cfg)}


def _read_all(cfg: PostgresCdcConfig, spark: Any, limit: int) -> tuple[list[tuple[Any, ...]], list[dict[str, Any]]]:
    """Every run's rows of the table, and the progress after each run."""
    tables = _tables(cfg)
    progress: dict[str, Any] | None = {"table": "public.items", "queue": []}
    rows: list[tuple[Any, ...]] = []
    after: list[dict[str, Any]] = []
    while progress is not None:
        chunk = _incremental.read_chunks(cfg, tables, progress, limit, spark)
        assert chunk is not None and chunk.skipped is None
        rows += chunk.rows
        progress = chunk.progress
        after.append(dict(progress or {}))
        assert len(after) < 50
    return rows, after


def test_parallel_reads_give_the_rows_and_progress_of_the_one_at_a_time_read(pg_db: PgServer, spark: Any) -> None:
    _setup(pg_db)
    tasks: list[int] = []
    in_tasks = _incremental._read_in_tasks

    def counted(*args: Any, **kwargs: Any) -> Any:
        tasks.append(args[4])  # how many at once
        return in_tasks(*args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_incremental, "_read_in_tasks", counted)
        parallel, progress = _read_all(_config(pg_db, **{"incremental.snapshot.parallel.reads": "3"}), spark, 400)
        assert tasks == [3, 3, 3]  # 400 + 400 + 200 rows, in 6, 6 and 3 chunks of 70
        one_by_one, same_progress = _read_all(
            _config(pg_db, **{"incremental.snapshot.parallel.reads": "1"}), spark, 400
        )
        assert tasks == [3, 3, 3]  # not through Spark
    assert parallel == one_by_one
    assert progress == same_progress
    # each row once, in the order of the key (its columns in the table's order: id, region)
    assert [(int(r[0]), r[1]) for r in parallel] == [(g, f"r{g % 3}") for g in range(1, 1001)]
    assert [p.get("chunks") for p in progress[:2]] == [6, 12]
    assert progress[1]["last_key"] == ["800", "r2"]  # the 800th key


def test_every_task_reads_in_the_snapshot_the_watermark_was_taken_with(pg_db: PgServer, spark: Any) -> None:
    _every_task_reads_in_the_snapshot(pg_db, spark)


@pytest.mark.spark_connect
def test_on_a_spark_connect_pool_too(pg_db: PgServer, spark_connect_url: str) -> None:
    from pyspark.sql import SparkSession

    session = SparkSession.builder.remote(spark_connect_url).create()
    try:
        _every_task_reads_in_the_snapshot(pg_db, session)
    finally:
        session.stop()


def _every_task_reads_in_the_snapshot(pg_db: PgServer, spark: Any) -> None:
    _setup(pg_db, rows=600)
    cfg = _config(pg_db, **{"incremental.snapshot.parallel.reads": "4"})
    ranges, in_tasks = _incremental._ranges, _incremental._read_in_tasks
    tasks: list[int] = []

    def then_change(*args: Any, **kwargs: Any) -> Any:
        found = ranges(*args, **kwargs)
        # committed after the run's snapshot, before any task has read: no task sees it
        pg_db.execute(
            "UPDATE items SET label = 'newer'",
            "DELETE FROM items WHERE id % 2 = 0",
            "INSERT INTO items SELECT g, 'r0', 'late' FROM generate_series(601, 700) g",
        )
        return found

    def counted(*args: Any, **kwargs: Any) -> Any:
        tasks.append(args[4])
        return in_tasks(*args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_incremental, "_ranges", then_change)
        patch.setattr(_incremental, "_read_in_tasks", counted)
        chunk = _incremental.read_chunks(cfg, _tables(cfg), {"table": "public.items", "queue": []}, 10_000, spark)
    assert tasks == [4]  # 600 rows in 9 chunks of 70, by 4 tasks
    assert chunk is not None
    assert [(int(r[0]), r[2]) for r in chunk.rows] == [(g, f"item {g}") for g in range(1, 601)]
    assert chunk.progress is None  # read to its largest key: done
    # the changes are newer than every row: the stream's merge drops the rows they touched
    assert pg_db.rows("SELECT count(*), min(label) FROM items") == [(400, "late")]


def test_a_task_that_fails_on_a_row_gives_the_table_up_and_a_lost_snapshot_fails_the_run(
    pg_db: PgServer, spark: Any
) -> None:
    import pyarrow as pa

    _setup(pg_db, rows=300)
    cfg = _config(pg_db, **{"incremental.snapshot.parallel.reads": "2"})
    real = _incremental._read_chunk_tasks

    def failing(cfg: PostgresCdcConfig, exported: str, wave: list[Any], width: int, batches: Any) -> Any:
        # run in the Spark task (pickled by value): a read that fails on a row, as a filter's cast can
        broken = [(i, "SELECT 1 / (id - id) FROM items", ()) for i, _, _ in wave]
        return real(cfg, exported, broken, width, batches)

    progress = {"table": "public.items", "queue": ["public.other"]}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_incremental, "_read_chunk_tasks", failing)
        chunk = _incremental.read_chunks(cfg, _tables(cfg), progress, 10_000, spark)
    assert chunk is not None
    assert chunk.skipped == "its filter failed on a row (DivisionByZero, SQLSTATE 22012)"
    assert chunk.rows == []
    assert chunk.progress is not None and chunk.progress["table"] == "public.other"  # the next one

    # a snapshot no transaction exports (its exporter gone): no row's fault, the task fails
    one = iter([pa.record_batch({"id": pa.array([0], pa.int64())})])
    with pytest.raises(Exception, match="invalid snapshot identifier"):
        list(real(cfg, "00000003-00000001-1", [(0, "SELECT 1", ())], 1, one))


@pytest.mark.parametrize("parallel", ["1", "3"])
def test_names_with_percent_signs_are_read(pg_db: PgServer, spark: Any, parallel: str) -> None:
    pg_db.execute(
        'CREATE TABLE "items %s" ("id %" int PRIMARY KEY, "label %%" text)',
        """INSERT INTO "items %s" SELECT g, '100%' || g FROM generate_series(1, 50) g""",
    )
    cfg = PostgresCdcConfig.model_validate(
        pg_capture(
            pg_db,
            "public.items %s",
            **{"incremental.snapshot.chunk.size": "7", "incremental.snapshot.parallel.reads": parallel},
        )
    )
    tables = _tables(cfg)
    progress: dict[str, Any] | None = {"table": "public.items %s", "queue": []}
    rows: list[tuple[Any, ...]] = []
    while progress is not None:
        chunk = _incremental.read_chunks(cfg, tables, progress, 20, spark)
        assert chunk is not None and chunk.skipped is None
        rows += chunk.rows
        progress = chunk.progress
    assert rows == [(str(g), f"100%{g}") for g in range(1, 51)]


def test_the_runs_transaction_outlives_a_server_idle_timeout_while_the_tasks_read(pg_db: PgServer, spark: Any) -> None:
    _setup(pg_db, rows=300)
    pg_db.execute(f"ALTER DATABASE {pg_db.database} SET idle_in_transaction_session_timeout = '500ms'")
    cfg = _config(pg_db, **{"incremental.snapshot.parallel.reads": "2"})
    in_tasks = _incremental._read_in_tasks

    def slow(*args: Any, **kwargs: Any) -> Any:
        time.sleep(1.5)  # a busy pool: the job waits for a slot while the driver's transaction is idle
        return in_tasks(*args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_incremental, "_read_in_tasks", slow)
        chunk = _incremental.read_chunks(cfg, _tables(cfg), {"table": "public.items", "queue": []}, 10_000, spark)
    assert chunk is not None and len(chunk.rows) == 300


def test_a_read_in_the_snapshot_behind_a_queued_ddl_fails_instead_of_waiting_for_ever(
    pg_db: PgServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading

    import psycopg2

    from connect_core.connectors.cdc.postgres import _snapshot

    _setup(pg_db, rows=10)
    cfg = _config(pg_db)
    exporter = pg_db.connect()
    exporter.autocommit = False
    ddl = threading.Thread(target=pg_db.execute, args=("ALTER TABLE items ADD COLUMN extra int",))
    try:
        with exporter.cursor() as cur:
            cur.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
            cur.execute("SELECT count(*) FROM items")  # holds the table's lock, as the run's transaction does
            cur.execute("SELECT pg_export_snapshot()")
            (exported,) = cur.fetchone()
        ddl.start()  # queued behind the exporter; a read queues behind it: no one moves, unbounded
        time.sleep(0.5)
        monkeypatch.setattr(_snapshot, "LOCK_TIMEOUT_S", 1)
        with (
            pytest.raises(psycopg2.errors.LockNotAvailable),
            _snapshot.in_snapshot(cfg, exported) as conn,
            conn.cursor() as cur,
        ):
            cur.execute("SELECT count(*) FROM items")
    finally:
        exporter.rollback()  # the DDL goes through
        exporter.close()
        ddl.join(timeout=30)
    assert not ddl.is_alive()
    assert pg_db.rows("SELECT count(extra) FROM items") == [(0,)]
