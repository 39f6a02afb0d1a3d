"""A topic's schema history, made by real JDBC source runs against a real PostgreSQL: a version per
new shape with the run that introduced it, none for a shape seen before, one for a shape two tasks
commit at once, none for a run that never committed."""

from __future__ import annotations

import threading
import time
from typing import Any

import psycopg2
import pytest
from pyspark.sql.types import DataType, IntegerType, StringType, StructField, StructType
from sqlalchemy import text
from sqlalchemy.orm import sessionmaker

from connect_core.runtime.context import Runtime
from connect_core.runtime.execution._gate import shape_of
from connect_core.runtime.execution.runner import TaskRunner
from connect_core.runtime.topics.schema_history import _LOCK_CLASS, SchemaHistory
from connect_core.runtime.topics.schemas import MAX_NESTING, TopicSchema, diff_schemas
from connect_core.sdk.testing import faults
from tests.connectors.jdbc_helpers import Database, postgres, synced  # noqa: F401  (fixtures)


def _source(runtime: Runtime, db: Database, table: str = "items", **extra: Any) -> None:
    runtime.create_connector(
        "src",
        db.source_config(
            **{
                "mode": "incrementing",
                "incrementing.column.name": "id",
                "table.whitelist": table,
                "topic.prefix": "",
                **extra,
            }
        ),
    )


def _columns(runtime: Runtime, topic: str, version: int | None = None) -> list[tuple[str, str, bool]]:
    found = runtime.topics.schemas.version(topic, version)
    assert found is not None
    return [(c["name"], c["type"], c["nullable"]) for c in found.schema.columns]


def test_each_new_shape_of_a_table_is_a_version_with_its_run_and_an_old_shape_is_none(
    runtime: Runtime,
    runner: TaskRunner,
    postgres: Database,  # noqa: F811
) -> None:
    postgres.execute(
        "CREATE TABLE items (id bigint PRIMARY KEY, name text NOT NULL, qty int)",
        "INSERT INTO items VALUES (1, 'a', 1)",
    )
    _source(runtime, postgres)
    history = runtime.topics.schemas

    def step(*sql: str) -> int:
        postgres.execute(*sql)
        run_id = synced(runner, "src")[0].run_id
        assert run_id is not None
        return run_id

    runs = [synced(runner, "src")[0].run_id]
    first = history.version("items")
    assert first is not None and (first.version, first.run_id, first.connector) == (1, runs[0], "src")
    # the JDBC source declares every column nullable (a NOT NULL column may be read through a view, a join)
    assert _columns(runtime, "items") == [("id", "bigint", True), ("name", "string", True), ("qty", "int", True)]
    assert first.schema.key == ["id"]

    runs.append(step("ALTER TABLE items ADD COLUMN note text", "INSERT INTO items VALUES (2, 'b', 2, 'n')"))
    runs.append(step("ALTER TABLE items ALTER COLUMN qty TYPE bigint", "INSERT INTO items VALUES (3, 'c', 3, 'n')"))
    runs.append(step("ALTER TABLE items DROP COLUMN note", "INSERT INTO items VALUES (4, 'd', 4)"))
    assert history.versions("items") == [1, 2, 3, 4]
    assert [history.version("items", v).run_id for v in (1, 2, 3, 4)] == runs  # type: ignore[union-attr]
    docs = [history.version("items", v).schema.document for v in (1, 2, 3, 4)]  # type: ignore[union-attr]
    assert [c["name"] for c in diff_schemas(docs[0], docs[1]).added] == ["note"]
    assert diff_schemas(docs[1], docs[2]).retyped == [{"name": "qty", "from": "int", "to": "bigint"}]
    assert [c["name"] for c in diff_schemas(docs[2], docs[3]).dropped] == ["note"]

    # back to the first shape: version 1 again, no new version (as Schema Registry answers a known schema)
    step("ALTER TABLE items ALTER COLUMN qty TYPE int", "INSERT INTO items VALUES (5, 'e', 5)")
    assert history.versions("items") == [1, 2, 3, 4]
    assert history.version("items").run_id == runs[3]  # type: ignore[union-attr]
    assert runner.run("src", 0).rows == 0  # nothing new: no segment, nothing recorded
    assert history.versions("items") == [1, 2, 3, 4]
    # the history goes with its topic
    runtime.topics.delete_topic("items")
    assert history.versions("items") == [] and history.topics() == []


@pytest.mark.parametrize("where", ["before_commit", "inside_commit"])
def test_a_run_that_never_committed_leaves_no_version(
    runtime: Runtime,
    runner: TaskRunner,
    postgres: Database,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
    where: str,
) -> None:
    """`before_commit`: the fault point a kill -9 tests (staged, nothing committed); `inside_commit`:
    the commit fails after it recorded the version (writing the positions), and rolls it back."""
    postgres.execute("CREATE TABLE items (id bigint PRIMARY KEY, name text)", "INSERT INTO items VALUES (1, 'a')")
    _source(runtime, postgres)
    if where == "before_commit":

        def crash(at: str) -> None:
            if at == where:
                raise RuntimeError(f"killed at {at}")

        monkeypatch.setattr(faults, "checkpoint", crash)
    else:

        def boom(*args: Any, **kwargs: Any) -> None:
            raise RuntimeError("the commit died after the schema was recorded")

        monkeypatch.setattr(runtime.connectors, "upsert_positions", boom)
    failed = runner.run("src", 0)
    assert failed.state == "FAILED"
    assert runtime.topics.schemas.versions("items") == [] and runtime.topics.run_segments(failed.run_id or 0) == []
    monkeypatch.undo()

    again = synced(runner, "src")[0]
    found = runtime.topics.schemas.version("items")
    assert found is not None and (found.version, found.run_id) == (1, again.run_id)


def test_two_tasks_committing_one_new_shape_at_once_make_one_version(
    runtime: Runtime,
    runner: TaskRunner,
    postgres: Database,  # noqa: F811
    database_url: str,
) -> None:
    """Two tasks of one source, reading tables of one name in two schemas into one topic (two
    partitions, so no partition lock orders their commits): both commits are held at the topic's
    lock until both wait there, then both commit, and the topic has one version of the shape."""
    postgres.execute(
        "CREATE SCHEMA east",
        "CREATE SCHEMA west",
        "CREATE TABLE east.items (id bigint PRIMARY KEY, name text)",
        "CREATE TABLE west.items (id bigint PRIMARY KEY, name text)",
        "INSERT INTO east.items VALUES (1, 'a')",
        "INSERT INTO west.items VALUES (2, 'b')",
    )
    _source(runtime, postgres, table="east.items,west.items", **{"tasks.max": 2, "topic.partitions": 2})
    holder = psycopg2.connect(database_url.replace("postgresql+psycopg2://", "postgresql://"))
    holder.autocommit = True
    with holder.cursor() as cur:
        cur.execute("SELECT pg_advisory_lock(%s, hashtext('items'))", (_LOCK_CLASS,))
    results: dict[int, Any] = {}
    threads = [threading.Thread(target=lambda t=t: results.__setitem__(t, runner.run("src", t))) for t in (0, 1)]
    try:
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + 120
        while _lock_waiters(holder) < 2:
            assert time.monotonic() < deadline, "the two commits did not both reach the topic's lock"
            assert all(thread.is_alive() for thread in threads), results
            time.sleep(0.05)
    finally:
        with holder.cursor() as cur:
            cur.execute("SELECT pg_advisory_unlock(%s, hashtext('items'))", (_LOCK_CLASS,))
        for thread in threads:
            thread.join(timeout=120)
        holder.close()
    assert [results[t].state for t in (0, 1)] == ["SUCCEEDED", "SUCCEEDED"], [results[t].message for t in (0, 1)]
    assert sorted(seg.partition for seg in runtime.topics.all_segments(["items"])) == [0, 1]  # one per task
    assert runtime.topics.schemas.versions("items") == [1]
    assert runtime.topics.schemas.version("items").run_id in {results[0].run_id, results[1].run_id}  # type: ignore[union-attr]


def _lock_waiters(conn: Any) -> int:
    # pg_locks is the whole server's: only this test's database counts (another test's, say on
    # another pytest-xdist worker, may wait at a topic lock of its own at the same time).
    with conn.cursor() as cur:
        cur.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND classid = %s::oid"
            " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
            (_LOCK_CLASS,),
        )
        return int(cur.fetchone()[0])


def _shape(*columns: str) -> TopicSchema:
    return TopicSchema.of(StructType([StructField(c, StringType()) for c in columns]))


def _record(runtime: Runtime, shapes: list[tuple[str, TopicSchema]], run_id: int = 1) -> list[tuple[str, int]]:
    """What a commit does with its segments' shapes, in a transaction of its own."""
    for topic, _ in shapes:
        runtime.topics.ensure_topic(topic)
    with sessionmaker(runtime.engine).begin() as s:
        return SchemaHistory.record(s, shapes, run_id, "src")


def test_a_name_postgres_cannot_hold_is_recorded(runtime: Runtime) -> None:
    """A NUL in a column's name made the commit fail (`unsupported Unicode escape sequence`), on
    every retry: the connector was stuck on data Spark had written."""
    assert _record(runtime, [("t", _shape("a\x00b", "c\ud800"))]) == [("t", 1)]
    found = runtime.topics.schemas.version("t")
    assert found is not None and [c["name"] for c in found.schema.columns] == ["a\ufffdb", "c\ufffd"]
    assert _record(runtime, [("t", _shape("a\x00b", "c\ud800"))]) == []  # the same shape: no new version


def test_a_shape_nested_too_deeply_is_not_recorded_and_the_run_goes_on(caplog: pytest.LogCaptureFixture) -> None:
    kind: DataType = IntegerType()
    for _ in range(MAX_NESTING + 1):
        kind = StructType([StructField("f", kind)])
    assert shape_of("deep", StructType([StructField("c", kind)])) is None
    assert "topic `deep`: column `c` nests" in caplog.text and "not recorded" in caplog.text
    assert shape_of("flat", StructType([StructField("c", IntegerType())])) is not None


def test_two_new_shapes_committed_at_once_are_versions_1_and_2(runtime: Runtime) -> None:
    runtime.topics.ensure_topic("t")
    sessions = sessionmaker(runtime.engine)
    first = sessions()
    first.begin()
    assert SchemaHistory.record(first, [("t", _shape("a"))], 1, "src") == [("t", 1)]
    made: list[Any] = []
    other = threading.Thread(target=lambda: made.append(_record(runtime, [("t", _shape("b"))], 2)))
    other.start()
    time.sleep(0.5)
    assert made == []  # waits for the first commit's lock
    first.commit()
    first.close()
    other.join(timeout=30)
    assert made == [[("t", 2)]] and runtime.topics.schemas.versions("t") == [1, 2]


def test_new_shapes_in_topics_whose_names_hash_alike_never_deadlock(runtime: Runtime, database_url: str) -> None:
    """The lock of a topic's new versions is keyed by its name's hash. Commits took them by topic
    name: with p < r < q and hash(p) = hash(q), one commit (p, r) held p's key and waited for r's,
    the other (r, q) held r's and waited for q's, which is p's: Postgres killed one (deadlock)."""
    with runtime.engine.connect() as conn:
        p, q = conn.execute(
            text(
                "SELECT min(n), max(n) FROM (SELECT 't' || g AS n FROM generate_series(1, 200000) AS g) AS x "
                "GROUP BY hashtext(n) HAVING count(*) > 1 ORDER BY 1 LIMIT 1"
            )
        ).one()
    r = p + "-"  # p < r < q
    for topic in (p, q, r):
        runtime.topics.ensure_topic(topic)
    holder = psycopg2.connect(database_url.replace("postgresql+psycopg2://", "postgresql://"))
    holder.autocommit = True
    results: dict[str, Any] = {}

    def commit(name: str, shapes: list[tuple[str, TopicSchema]]) -> None:
        try:
            results[name] = _record(runtime, shapes)
        except Exception as exc:  # the deadlock's loser
            results[name] = exc

    # r's key held, so that the second commit queues behind the first for it, as a busy cluster would
    with holder.cursor() as cur:
        cur.execute("SELECT pg_advisory_lock(%s, hashtext(%s))", (_LOCK_CLASS, r))
    threads = [
        threading.Thread(target=commit, args=("rq", [(r, _shape("b")), (q, _shape("b"))])),
        threading.Thread(target=commit, args=("pr", [(p, _shape("a")), (r, _shape("a"))])),
    ]
    try:
        for waiting, thread in enumerate(threads, start=1):
            thread.start()
            deadline = time.monotonic() + 30
            while _lock_waiters(holder) < waiting:
                assert time.monotonic() < deadline, results
                time.sleep(0.05)
    finally:
        with holder.cursor() as cur:
            cur.execute("SELECT pg_advisory_unlock(%s, hashtext(%s))", (_LOCK_CLASS, r))
        for thread in threads:
            thread.join(timeout=30)
        holder.close()
    assert sorted(results["rq"]) == sorted([(r, 1), (q, 1)]), results
    assert sorted(results["pr"]) == sorted([(p, 1), (r, 2)]), results
