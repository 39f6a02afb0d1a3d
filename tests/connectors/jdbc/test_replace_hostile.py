"""A `replace` re-read against hostile surroundings (issue 35): a router and a re-read that ends with
no rows, topics merged into one table, a user's table named like a copy, PostgreSQL targets a swap
cannot carry, and `retain` into `insert.mode=insert`. Each is refused with a clear error before a
row is written, or leaves every table but the re-read's target as it was."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from connect_core.connectors.jdbc.config import JdbcSinkConfig
from connect_core.connectors.jdbc.sink import JdbcSinkConnector, JdbcSinkTask
from connect_core.connectors.jdbc.targets import _replace
from connect_core.sdk import SinkBatch
from connect_core.sdk.connector import TaskContext
from connect_core.sdk.errors import ConfigError
from connect_core.sdk.records import Resync, TopicPartition
from tests.connectors.jdbc_helpers import Database, mariadb_target, sink_target, target  # noqa: F401  (fixtures)

_SCHEMA = "id int, name string, __topic string, __partition int, __offset long"
_ROUTER = {
    "transforms": "r",
    "transforms.r.type": "RegexRouter",
    "transforms.r.regex": "items",
    "transforms.r.replacement": "items_v2",
}


def _config(db: Database, topics: str = "items", **extra: Any) -> dict[str, Any]:
    return {
        "connector.class": "JdbcSinkConnector",
        "connection.url": db.jdbc_url,
        "topics": topics,
        "insert.mode": "upsert",
        "pk.mode": "record_value",
        "pk.fields": "id",
        "auto.create": True,
        **extra,
    }


def _task(config: dict[str, Any]) -> JdbcSinkTask:
    task = JdbcSinkTask(config, TaskContext("sink", 0, 1, logging.getLogger("test.replace.hostile")))
    task.open({})
    return task


def _batch(
    spark: Any,
    parts: dict[str, tuple[list[tuple[int, str]], int]],
    replacing: dict[str, Resync] | None = None,
    routes: dict[str, tuple[str, ...]] | None = None,
) -> SinkBatch:
    """Rows of each topic from offset `first` on; no parts: a re-read's end with no rows (as the
    runtime gives it: no partitions, no routes)."""
    frames = {
        t: spark.createDataFrame([(i, n, t, 0, first + k) for k, (i, n) in enumerate(rows)], _SCHEMA)
        for t, (rows, first) in parts.items()
    }
    if not frames:
        return SinkBatch(spark.createDataFrame([], _SCHEMA), 0, (), {}, replacing=replacing or {})
    data = list(frames.values())
    union = data[0]
    for frame in data[1:]:
        union = union.unionByName(frame)
    partitions = tuple(TopicPartition(t, 0) for t in frames)
    count = sum(len(rows) for rows, _ in parts.values())
    return SinkBatch(union, count, partitions, frames, replacing=replacing or {}, routes=routes or {})


def _ids(db: Database, table: str) -> list[int]:
    return sorted(r[0] for r in db.rows(f"SELECT id FROM {table}"))


def test_a_routed_reread_ending_with_no_rows_swaps_its_own_table_never_the_raw_topics(
    spark: Any,
    sink_target: Database,  # noqa: F811
) -> None:
    db = sink_target
    db.execute("CREATE TABLE items (id int PRIMARY KEY, name varchar(20))", "INSERT INTO items VALUES (7, 'precious')")
    config = _config(db, **_ROUTER)
    routes = {"items": ("items_v2",)}
    _task(config).write(spark, _batch(spark, {"items": ([(1, "a"), (2, "b"), (3, "c")], 0)}, routes=routes))
    g1 = {"items": Resync(1, "replace", begins=True)}
    _task(config).write(spark, _batch(spark, {"items": ([(1, "a")], 3)}, g1, routes))
    _task(config).write(spark, _batch(spark, {}, {"items": Resync(1, "replace", ends=True)}))
    assert db.rows("SELECT id, name FROM items") == [(7, "precious")]  # the bystander is untouched
    assert _ids(db, "items_v2") == [1]  # the copy found by its entry, swapped in for the routed table

    # a re-read with no rows at all, whose table is not known: nothing is swapped (never the raw topic's)
    _task(config).write(spark, _batch(spark, {}, {"items": Resync(2, "replace", begins=True, ends=True)}))
    assert db.rows("SELECT id, name FROM items") == [(7, "precious")]
    assert _ids(db, "items_v2") == [1]


def test_a_users_table_named_like_a_side_table_is_never_dropped_nor_written(
    spark: Any,
    sink_target: Database,  # noqa: F811
) -> None:
    db = sink_target
    config = _config(db)
    _task(config).write(spark, _batch(spark, {"items": ([(1, "a"), (2, "b")], 0)}))
    db.execute(
        "CREATE TABLE items__connect_old_2024 (id int PRIMARY KEY)",
        "CREATE TABLE items__connect_resync_7 (id int PRIMARY KEY)",
    )
    _task(config).write(spark, _batch(spark, {"items": ([(1, "a")], 2)}, {"items": Resync(1, "replace", ends=True)}))
    assert _ids(db, "items") == [1]
    assert _ids(db, "items__connect_old_2024") == [] and _ids(db, "items__connect_resync_7") == []

    # a table in the way of the copy's name: refused, named, left alone
    copy = _replace.side_name("items", _replace.COPY, "items", 2, 63)
    db.execute(f"CREATE TABLE {copy} (id int PRIMARY KEY)", f"INSERT INTO {copy} VALUES (42)")
    with pytest.raises(ConfigError, match=f"{copy} is in the way"):
        _task(config).write(spark, _batch(spark, {"items": ([(2, "b")], 3)}, {"items": Resync(2, "replace")}))
    assert _ids(db, copy) == [42] and _ids(db, "items") == [1]


def test_topics_merged_into_one_table_are_refused_a_replace(
    spark: Any,
    target: Database,  # noqa: F811
) -> None:
    router = {"transforms": "r", "transforms.r.type": "RegexRouter", "transforms.r.regex": "p_.*"}
    merged = _config(target, "p_a,p_b", **router, **{"transforms.r.replacement": "merged"})
    fixed = _config(target, "p_a,p_b", **{"table.name.format": "merged"})
    connector = JdbcSinkConnector()
    for config in (merged, fixed):
        problem = connector.resync_problem(JdbcSinkConfig.model_validate(config), "p_a", "replace")
        assert problem is not None and "would drop the other topics' rows" in problem
        assert connector.resync_problem(JdbcSinkConfig.model_validate(config), "p_a", "retain") is None
    # the plain cases: one topic (routed or not), or `${topic}` tables without a router
    for plain in (_config(target, "p_a", **_ROUTER), _config(target, "p_a,p_b")):
        assert connector.resync_problem(JdbcSinkConfig.model_validate(plain), "p_a", "replace") is None

    routes = {"p_a": ("merged",), "p_b": ("merged",)}
    _task(merged).write(spark, _batch(spark, {"p_a": ([(1, "a")], 0), "p_b": ([(101, "b")], 0)}, routes=routes))
    replace = {"p_a": Resync(1, "replace", begins=True, ends=True)}
    with pytest.raises(ConfigError, match="re-read `p_a` with `--mode retain`"):
        _task(merged).write(spark, _batch(spark, {"p_a": ([(2, "a")], 1)}, replace))
    # defence in depth: the batch itself shows another topic's rows going to the re-read's table
    other = _config(target, "p_a,p_b")  # the config alone allows it
    with pytest.raises(ConfigError, match="the rows of topics p_b go to table merged too"):
        _task(other).write(spark, _batch(spark, {"p_a": ([(2, "a")], 1), "p_b": ([(102, "b")], 1)}, replace, routes))
    assert _ids(target, "merged") == [1, 101]


@pytest.mark.parametrize(
    ("setup", "found"),
    [
        (["ALTER TABLE items ENABLE ROW LEVEL SECURITY", "CREATE POLICY only_one ON items USING (id = 1)"], "only_one"),
        (["CREATE PUBLICATION hostile_pub FOR TABLE items"], "publications hostile_pub"),
        (
            [
                "CREATE FUNCTION hostile_noop() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$",
                "CREATE TRIGGER hostile_trg BEFORE INSERT ON items FOR EACH ROW EXECUTE FUNCTION hostile_noop()",
            ],
            "triggers hostile_trg",
        ),
    ],
)
def test_a_postgresql_target_a_swap_would_strip_is_refused(
    spark: Any,
    target: Database,  # noqa: F811
    setup: list[str],
    found: str,
) -> None:
    config = _config(target)
    _task(config).write(spark, _batch(spark, {"items": ([(1, "a"), (2, "b")], 0)}))
    target.execute(*setup)
    try:
        with pytest.raises(ConfigError, match=found):
            _task(config).write(spark, _batch(spark, {"items": ([(1, "a")], 2)}, {"items": Resync(1, "replace")}))
        assert _ids(target, "items") == [1, 2]
    finally:
        target.execute("DROP PUBLICATION IF EXISTS hostile_pub")


def test_a_partitioned_postgresql_target_is_refused(
    spark: Any,
    target: Database,  # noqa: F811
) -> None:
    target.execute(
        "CREATE TABLE items (id int PRIMARY KEY, name text) PARTITION BY RANGE (id)",
        "CREATE TABLE items_lo PARTITION OF items FOR VALUES FROM (0) TO (100)",
    )
    config = _config(target)
    with pytest.raises(ConfigError, match="partitions items_lo"):
        _task(config).write(spark, _batch(spark, {"items": ([(1, "a")], 0)}, {"items": Resync(1, "replace")}))
    assert target.rows("SELECT relkind FROM pg_class WHERE relname = 'items'") == [("p",)]


def test_retain_into_insert_mode_is_refused_where_the_table_has_a_key(
    target: Database,  # noqa: F811
) -> None:
    connector = JdbcSinkConnector()
    insert = JdbcSinkConfig.model_validate({**_config(target), "insert.mode": "insert", "pk.mode": "none"})
    assert connector.resync_problem(insert, "items", "retain") is None  # no table yet, no key
    target.execute("CREATE TABLE items (id int PRIMARY KEY, name text)")
    problem = connector.resync_problem(insert, "items", "retain")
    assert problem is not None and "has a key" in problem and "upsert" in problem
    assert connector.resync_problem(insert, "items", "replace") is None
    keyed = JdbcSinkConfig.model_validate({**_config(target), "insert.mode": "insert"})
    assert "duplicate key" in (connector.resync_problem(keyed, "items", "retain") or "")
    assert connector.resync_problem(JdbcSinkConfig.model_validate(_config(target)), "items", "retain") is None
