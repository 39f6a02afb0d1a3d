"""A `replace` re-read into real Iceberg (SQL catalog) and Delta tables (`SinkBatch.replacing`): the
re-read's rows go into a copy, the table is unchanged until the re-read ends, then holds exactly the
re-read's rows after one commit; every batch given again (a kill -9 before or after the swap) leaves
the same table."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from connect_core.connectors.lakehouse.delta.connector import DeltaSinkTask
from connect_core.connectors.lakehouse.iceberg.connector import IcebergSinkTask
from connect_core.sdk import SinkBatch
from connect_core.sdk.connector import TaskContext
from connect_core.sdk.records import Resync, TopicPartition
from tests.connectors.jdbc_helpers import Database, target  # noqa: F401  (fixtures)
from tests.connectors.lakehouse import delta_helpers
from tests.connectors.lakehouse.iceberg_helpers import Lake, sink_config

TOPIC = "items"
_SCHEMA = "id long, name string, __topic string, __partition int, __offset long"
OLD = [(1, "old1"), (2, "old2"), (3, "old3"), (4, "old4"), (5, "old5")]
PART_1 = [(1, "new1"), (2, "new2"), (3, "new3")]
PART_2 = [(4, "new4"), (6, "new6")]
REREAD = sorted(PART_1 + PART_2)


def _batch(spark: Any, rows: list[tuple[int, str]], first: int, resync: Resync | None = None) -> SinkBatch:
    """Rows of `TOPIC` at offsets `first`, `first` + 1, …, of re-read `resync` (none: the re-read's end alone)."""
    data = spark.createDataFrame([(i, n, TOPIC, 0, first + k) for k, (i, n) in enumerate(rows)], _SCHEMA)
    replacing = {TOPIC: resync} if resync is not None else {}
    if not rows:
        return SinkBatch(data, 0, (), {}, replacing=replacing)
    return SinkBatch(data, len(rows), (TopicPartition(TOPIC, 0),), {TOPIC: data}, replacing=replacing)


class _Iceberg:
    def __init__(self, db: Database, root: Path, upsert: bool) -> None:
        self.lake = Lake(db, root / "warehouse")
        extra = {"iceberg.tables.upsert-mode-enabled": "true", "iceberg.tables.default-id-columns": "id"}
        self.config = sink_config(self.lake, TOPIC, "db.items", **(extra if upsert else {}))

    def write(self, spark: Any, batch: SinkBatch) -> None:
        task = IcebergSinkTask(self.config, TaskContext("sink", 0, 1, logging.getLogger("test.iceberg")))
        task.open({})
        try:
            task.write(spark, batch)
        finally:
            task.close()

    def rows(self) -> list[tuple[Any, ...]] | None:
        from pyiceberg.exceptions import NoSuchTableError

        try:
            return self.lake.scan("db.items", ("id", "name"))
        except NoSuchTableError:
            return None

    def tables(self) -> list[str]:
        catalog = self.lake.catalog()
        return sorted(".".join(t) for ns in catalog.list_namespaces() for t in catalog.list_tables(ns))

    def snapshots(self) -> int:
        return len(self.lake.catalog().load_table("db.items").snapshots())


class _Delta:
    def __init__(self, root: Path, upsert: bool) -> None:
        self.root = root / "lake"
        self.root.mkdir()
        extra = {"delta.tables.upsert-mode-enabled": "true", "delta.tables.id-columns": "id"}
        self.config = delta_helpers.sink_config(TOPIC, path=str(self.root / "${topic}"), **(extra if upsert else {}))

    def write(self, spark: Any, batch: SinkBatch) -> None:
        task = DeltaSinkTask(self.config, TaskContext("sink", 0, 1, logging.getLogger("test.delta")))
        task.open({})
        task.write(spark, batch)
        task.close()

    def rows(self) -> list[tuple[Any, ...]] | None:
        if not (self.root / TOPIC / "_delta_log").exists():
            return None
        return delta_helpers.read(str(self.root / TOPIC), ("id", "name"))

    def tables(self) -> list[str]:
        """The table directories, and the copies under them."""
        return sorted(
            str(p.relative_to(self.root)) for p in [*self.root.iterdir(), *self.root.glob("*/_connect_resync_*")]
        )

    def snapshots(self) -> int:
        return delta_helpers.table(str(self.root / TOPIC)).version() + 1


@pytest.fixture(params=["iceberg", "delta"])
def lake(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    upsert = True
    if request.param == "iceberg":
        return _Iceberg(request.getfixturevalue("target"), tmp_path, upsert)
    return _Delta(tmp_path, upsert)


def test_a_reread_is_swapped_in_by_one_commit_and_every_batch_given_again_changes_nothing(
    spark: Any, lake: Any
) -> None:
    lake.write(spark, _batch(spark, OLD, 0))
    assert lake.rows() == OLD
    [table] = lake.tables()

    g1 = Resync(1, "replace", begins=True)
    lake.write(spark, _batch(spark, PART_1, 5, g1))
    assert lake.rows() == OLD  # the re-read's rows are in the copy
    # killed after the last part's rows landed and before the swap: the rerun swaps them in
    lake.write(spark, _batch(spark, PART_2, 8, Resync(1, "replace")))
    assert lake.rows() == OLD
    commits = lake.snapshots()
    ends = Resync(1, "replace", ends=True)
    lake.write(spark, _batch(spark, PART_2, 8, ends))
    assert lake.rows() == REREAD  # id 5, which the re-read no longer has, is gone
    assert lake.snapshots() == commits + 1  # one commit swapped the rows
    assert lake.tables() == [table]  # no copy left

    # killed after the swap and before the runtime's commit: every batch given again, nothing changes
    lake.write(spark, _batch(spark, PART_1, 5, g1))
    lake.write(spark, _batch(spark, PART_2, 8, ends))
    assert lake.rows() == REREAD
    assert lake.tables() == [table]

    lake.write(spark, _batch(spark, [(7, "after")], 10))  # rows after the re-read: as ever
    assert lake.rows() == [*REREAD, (7, "after")]

    # the next re-read, its end given alone
    lake.write(spark, _batch(spark, [(2, "g2")], 11, Resync(2, "replace", begins=True)))
    lake.write(spark, _batch(spark, [], 12, Resync(2, "replace", ends=True)))
    assert lake.rows() == [(2, "g2")]
    lake.write(spark, _batch(spark, [], 12, Resync(3, "replace", begins=True, ends=True)))
    assert lake.rows() == []  # a re-read of no rows: the table ends empty
    assert lake.tables() == [table]


def test_a_reread_into_no_table_makes_it_at_its_end(spark: Any, lake: Any) -> None:
    lake.write(spark, _batch(spark, [], 0, Resync(1, "replace", begins=True, ends=True)))
    assert lake.rows() is None  # nothing re-read into a table that never was: nothing made
    lake.write(spark, _batch(spark, PART_1, 0, Resync(2, "replace", begins=True)))
    assert lake.rows() is None
    lake.write(spark, _batch(spark, PART_2, 3, Resync(2, "replace", ends=True)))
    assert lake.rows() == REREAD
    lake.write(spark, _batch(spark, PART_2, 3, Resync(2, "replace", ends=True)))  # given again
    assert lake.rows() == REREAD
    assert len(lake.tables()) == 1


def test_an_append_only_table_holds_each_reread_row_once(spark: Any, target: Database, tmp_path: Path) -> None:  # noqa: F811
    """Appends (no upsert): the copy starts empty, so the table ends with the re-read's rows alone."""
    for lake in (_Iceberg(target, tmp_path, upsert=False), _Delta(tmp_path, upsert=False)):
        lake.write(spark, _batch(spark, OLD, 0))
        lake.write(spark, _batch(spark, PART_1, 5, Resync(1, "replace", begins=True)))
        lake.write(spark, _batch(spark, PART_2, 8, Resync(1, "replace", ends=True)))
        lake.write(spark, _batch(spark, PART_2, 8, Resync(1, "replace", ends=True)))
        assert lake.rows() == REREAD


def test_a_replace_of_one_of_the_topics_iceberg_tables_fan_in_is_refused(
    spark: Any,
    target: Database,  # noqa: F811
    tmp_path: Path,
) -> None:
    from connect_core.connectors.lakehouse.iceberg.config import IcebergSinkConfig
    from connect_core.connectors.lakehouse.iceberg.connector import IcebergSinkConnector
    from connect_core.sdk.errors import ConfigError

    iceberg = _Iceberg(target, tmp_path, upsert=False)
    fan_in = {**iceberg.config, "topics": f"{TOPIC},other"}
    problem = IcebergSinkConnector().resync_problem(IcebergSinkConfig.model_validate(fan_in), TOPIC, "replace")
    assert problem is not None and "would drop the other topics' rows" in problem
    assert (
        IcebergSinkConnector().resync_problem(IcebergSinkConfig.model_validate(iceberg.config), TOPIC, "replace")
        is None
    )
    iceberg.config = fan_in
    iceberg.write(spark, _batch(spark, OLD, 0))
    with pytest.raises(ConfigError, match="re-read `items` with `--mode retain`"):
        iceberg.write(spark, _batch(spark, PART_1, 5, Resync(1, "replace", begins=True, ends=True)))
    assert iceberg.rows() == OLD


def test_a_routed_delta_reread_ending_with_no_rows_never_swaps_the_raw_topics_table(
    spark: Any,
    tmp_path: Path,
) -> None:
    root = tmp_path / "lake"
    root.mkdir()
    router = {
        "transforms": "r",
        "transforms.r.type": "RegexRouter",
        "transforms.r.regex": TOPIC,
        "transforms.r.replacement": "items_v2",
    }

    def write(config: dict[str, Any], batch: SinkBatch) -> None:
        task = DeltaSinkTask(config, TaskContext("sink", 0, 1, logging.getLogger("test.delta")))
        task.open({})
        task.write(spark, batch)
        task.close()

    raw = delta_helpers.sink_config(TOPIC, path=str(root / "${topic}"))
    write(raw, _batch(spark, [(7, "precious")], 0))  # another table, at the raw topic's path
    # the end of a re-read, as the runtime gives it with no rows: no routes
    write({**raw, **router}, _batch(spark, [], 1, Resync(1, "replace", begins=True, ends=True)))
    assert delta_helpers.read(str(root / TOPIC), ("id", "name")) == [(7, "precious")]
