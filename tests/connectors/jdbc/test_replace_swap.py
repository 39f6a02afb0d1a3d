"""A `replace` re-read into a real PostgreSQL and MariaDB (`SinkBatch.replacing`): the re-read's rows
go into a copy, the target is unchanged until the re-read ends, then holds exactly the re-read's
rows, swapped in atomically; every batch given again (a kill -9 before or after the swap) leaves
the same table."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import pytest

from connect_core.connectors.jdbc.sink import JdbcSinkTask
from connect_core.connectors.jdbc.targets import _replace
from connect_core.sdk import SinkBatch
from connect_core.sdk.connector import TaskContext
from connect_core.sdk.errors import ConfigError
from connect_core.sdk.records import Resync, TopicPartition
from tests.connectors.jdbc_helpers import Database, mariadb_target, sink_target, target  # noqa: F401  (fixtures)

TOPIC = "items"
_SCHEMA = "id int, name string, __topic string, __partition int, __offset long"


def _task(db: Database, **extra: Any) -> JdbcSinkTask:
    """A sink task as a fresh run opens it (its offsets read back from the target)."""
    config = {
        "connector.class": "JdbcSinkConnector",
        "connection.url": db.jdbc_url,
        "topics": TOPIC,
        "insert.mode": "upsert",
        "pk.mode": "record_value",
        "pk.fields": "id",
        "auto.create": True,
        **extra,
    }
    task = JdbcSinkTask(config, TaskContext("sink", 0, 1, logging.getLogger("test.replace")))
    task.open({})
    return task


def _batch(spark: Any, rows: list[tuple[int, str]], first: int, resync: Resync | None = None) -> SinkBatch:
    """Rows of `TOPIC` at offsets `first`, `first` + 1, …, (as a run reads them) of re-read `resync`."""
    data = spark.createDataFrame([(i, n, TOPIC, 0, first + k) for k, (i, n) in enumerate(rows)], _SCHEMA)
    replacing = {TOPIC: resync} if resync is not None else {}
    if not rows:  # the re-read's end, no rows of it in the batch
        return SinkBatch(data, 0, (), {}, replacing=replacing)
    return SinkBatch(data, len(rows), (TopicPartition(TOPIC, 0),), {TOPIC: data}, replacing=replacing)


def _rows(db: Database, table: str = TOPIC) -> list[tuple[Any, ...]]:
    return db.rows(f"SELECT id, name FROM {table} ORDER BY id")


def _tables(db: Database) -> list[str]:
    if db.kind == "mariadb":
        return sorted(
            r[0] for r in db.rows("SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE()")
        )
    return sorted(r[0] for r in db.rows("SELECT tablename FROM pg_tables WHERE schemaname = 'public'"))


#: The tables a target holds after a re-read: the sink's offsets and register, and the table.
_KEPT = sorted(["connect_sink_offsets", _replace.REGISTER, TOPIC])
OLD = [(1, "old1"), (2, "old2"), (3, "old3"), (4, "old4"), (5, "old5")]
PART_1 = [(1, "new1"), (2, "new2"), (3, "new3")]
PART_2 = [(4, "new4"), (6, "new6")]
REREAD = sorted(PART_1 + PART_2)


def test_a_reread_is_swapped_in_at_its_end_and_every_batch_given_again_changes_nothing(
    spark: Any,
    sink_target: Database,  # noqa: F811
) -> None:
    db = sink_target
    _task(db).write(spark, _batch(spark, OLD, 0))
    assert _rows(db) == OLD

    g1 = Resync(1, "replace", begins=True)
    _task(db).write(spark, _batch(spark, PART_1, 5, g1))
    assert _rows(db) == OLD  # the re-read's rows are in the copy, the target is untouched
    copy = _replace.side_name(TOPIC, _replace.COPY, TOPIC, 1, 63)
    assert _rows(db, copy) == PART_1
    # killed after the last part's rows landed and before the swap: the rerun swaps them in
    _task(db).write(spark, _batch(spark, PART_2, 8, Resync(1, "replace")))
    assert _rows(db) == OLD
    ends = Resync(1, "replace", ends=True)
    _task(db).write(spark, _batch(spark, PART_2, 8, ends))
    assert _rows(db) == REREAD  # id 5, which the re-read no longer has, is gone
    assert _tables(db) == _KEPT  # no copy left

    # killed after the swap and before the runtime's commit: every batch given again, nothing changes
    _task(db).write(spark, _batch(spark, PART_1, 5, g1))
    _task(db).write(spark, _batch(spark, PART_2, 8, ends))
    assert _rows(db) == REREAD
    assert _tables(db) == _KEPT

    # rows of the topic after the re-read go to the table as ever
    _task(db).write(spark, _batch(spark, [(7, "after")], 10))
    assert _rows(db) == [*REREAD, (7, "after")]

    # the next re-read: its end given alone (its rows were in earlier batches), the copy of a re-read
    # a newer one overtook (killed before its swap) dropped, a user's table named like a copy kept
    users = _replace.side_name(TOPIC, _replace.COPY, TOPIC, 9, 63)
    db.execute(f"CREATE TABLE {users} (id int)")
    _task(db).write(spark, _batch(spark, [(9, "lost")], 11, Resync(2, "replace", begins=True)))
    _task(db).write(spark, _batch(spark, [(2, "g3")], 12, Resync(3, "replace", begins=True)))
    assert _rows(db) == [*REREAD, (7, "after")]
    _task(db).write(spark, _batch(spark, [], 13, Resync(3, "replace", ends=True)))
    assert _rows(db) == [(2, "g3")]
    assert _tables(db) == sorted([*_KEPT, users])


def test_a_reread_of_no_rows_empties_the_table_and_one_into_no_table_makes_it(
    spark: Any,
    sink_target: Database,  # noqa: F811
) -> None:
    db = sink_target
    _task(db).write(spark, _batch(spark, [], 0, Resync(1, "replace", begins=True, ends=True)))
    assert TOPIC not in _tables(db)  # nothing re-read into a table that never was: nothing made

    _task(db).write(spark, _batch(spark, PART_1, 0, Resync(2, "replace", begins=True)))
    assert TOPIC not in _tables(db)  # the copy is made as the target would be, the target not yet
    _task(db).write(spark, _batch(spark, PART_2, 3, Resync(2, "replace", ends=True)))
    assert _rows(db) == REREAD

    _task(db).write(spark, _batch(spark, [], 5, Resync(3, "replace", begins=True, ends=True)))
    assert _rows(db) == []  # the re-read found no rows: the table ends empty, and still there


def test_a_reader_sees_the_old_table_or_the_new_one_never_half(
    spark: Any,
    sink_target: Database,  # noqa: F811
) -> None:
    db = sink_target
    old = [(i, f"old{i}") for i in range(1, 2001)]
    new = [(i, f"new{i}") for i in range(1, 1001)]
    _task(db).write(spark, _batch(spark, old, 0))
    _task(db).write(spark, _batch(spark, new, 2000, Resync(1, "replace", begins=True)))

    seen: list[int] = []
    stop = threading.Event()

    def read() -> None:
        conn = db.connect()
        try:
            with conn.cursor() as cur:
                while not stop.is_set():
                    try:
                        cur.execute(f"SELECT count(*) FROM {TOPIC}")
                        seen.append(int(cur.fetchone()[0]))
                    except Exception:  # a statement between the rename and the drop (MariaDB) may not find it
                        seen.append(-1)
        finally:
            conn.close()

    reader = threading.Thread(target=read)
    reader.start()
    try:
        time.sleep(0.2)
        _task(db).write(spark, _batch(spark, [], 3000, Resync(1, "replace", ends=True)))
        time.sleep(0.2)
    finally:
        stop.set()
        reader.join()
    assert seen[0] == 2000 and seen[-1] == 1000
    assert set(seen) == {2000, 1000}  # never a part of either
    assert _rows(db) == new


def test_views_over_a_postgresql_table_are_refused_before_a_row_is_written(
    spark: Any,
    target: Database,  # noqa: F811
) -> None:
    _task(target).write(spark, _batch(spark, OLD, 0))
    target.execute(f"CREATE VIEW item_names AS SELECT name FROM {TOPIC}")
    with pytest.raises(ConfigError, match="views item_names"):
        _task(target).write(spark, _batch(spark, PART_1, 5, Resync(1, "replace", begins=True)))
    assert _tables(target) == sorted(["connect_sink_offsets", TOPIC])  # nothing made, not even the register
    assert _rows(target) == OLD


def test_the_swap_keeps_grants_serials_and_index_names_of_a_postgresql_table(
    spark: Any,
    target: Database,  # noqa: F811
) -> None:
    target.execute(
        f"CREATE TABLE {TOPIC} (id int PRIMARY KEY, name text, seq serial, CHECK (id > 0))",
        "DO $$ BEGIN CREATE ROLE connect_reader; EXCEPTION WHEN duplicate_object THEN NULL; END $$",
        f"GRANT SELECT ON {TOPIC} TO connect_reader",
        f"COMMENT ON TABLE {TOPIC} IS 'the items'",
    )
    _task(target).write(spark, _batch(spark, OLD, 0))
    _task(target).write(spark, _batch(spark, PART_1, 5, Resync(1, "replace", begins=True, ends=True)))
    assert _rows(target) == PART_1
    assert target.rows(f"SELECT has_table_privilege('connect_reader', '{TOPIC}', 'SELECT')") == [(True,)]
    assert target.rows(f"SELECT obj_description('{TOPIC}'::regclass)") == [
        (f"the items [connect-core re-read of topic {TOPIC}: generation 1]",)
    ]
    assert target.rows(f"SELECT indexrelid::regclass::text FROM pg_index WHERE indrelid = '{TOPIC}'::regclass") == [
        (f"{TOPIC}_pkey",)
    ]
    target.execute(f"INSERT INTO {TOPIC} (id, name) VALUES (99, 'serial')")  # the sequence is the table's still
    _task(target).write(spark, _batch(spark, OLD, 8, Resync(2, "replace", begins=True, ends=True)))
    assert _rows(target) == OLD


def test_side_table_names_fit_the_database_and_marks_keep_a_users_comment() -> None:
    long = "t" * 63
    for limit in (63, 64):
        copy = _replace.side_name(long, _replace.COPY, TOPIC, 1234567890 - 1, limit)
        assert len(copy) <= limit
        two, three = (_replace.side_name(long, _replace.COPY, TOPIC, g, limit) for g in (2, 3))
        assert two.split(_replace.COPY)[0] == three.split(_replace.COPY)[0] and two != three
    # two topics' copies of one table never share a name
    assert _replace.side_name("orders", _replace.COPY, "a", 7, 63) != _replace.side_name(
        "orders", _replace.COPY, "b", 7, 63
    )
    assert _replace.side_name("orders", _replace.COPY, "a", 7, 63).startswith("orders__connect_resync_7_")
    text = _replace.mark("hand-written", "a", 1)
    assert _replace.held(text, "a") == 1 and _replace.held(text, "b") is None
    again = _replace.mark(_replace.mark(text, "b", 4), "a", 2)
    assert (_replace.held(again, "a"), _replace.held(again, "b")) == (2, 4)
    assert again.startswith("hand-written [") and again.count("[") == 2


def test_swapping_a_million_row_postgresql_table(
    spark: Any,
    target: Database,  # noqa: F811
) -> None:
    """The swap's cost does not follow the table's size: a rename in one transaction (measured)."""
    target.execute(
        f"CREATE TABLE {TOPIC} (id int PRIMARY KEY, name text)",
        f"INSERT INTO {TOPIC} SELECT g, 'old' || g FROM generate_series(1, 1000000) g",
    )
    task = _task(target)
    copy = task.target.replica((TOPIC,), TOPIC, 1)
    target.execute(f"INSERT INTO {copy[-1]} SELECT g, 'new' || g FROM generate_series(1, 1000000) g")
    started = time.monotonic()
    assert task.target.swap_in((TOPIC,), TOPIC, 1)
    spent = time.monotonic() - started
    print(f"swap of a 1M-row PostgreSQL table: {spent * 1000:.0f} ms")
    assert target.rows(f"SELECT count(*), min(name) FROM {TOPIC}") == [(1000000, "new1")]
    assert spent < 5
