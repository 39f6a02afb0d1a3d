"""The Iceberg sink's table upkeep (`iceberg._upkeep`, the connector's `upkeep` jobs) on real tables of
a SQL catalog on PostgreSQL, through the sink's own confined catalog: compaction, snapshot expiry and
orphan-file removal keep every row (compared by a checksum of all rows) and every connector's
offsets exactly as they read before. No Spark: tables are filled by pyiceberg appends carrying
offsets as the sink's commits do."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from connect_core.connectors.lakehouse.iceberg import (
    IcebergSinkConfig,
    IcebergSinkConnector,
    _catalog,
    _offsets,
    _write,
)
from connect_core.connectors.lakehouse.iceberg import _upkeep as upkeep
from connect_core.runtime.context import Runtime
from tests.connectors.jdbc_helpers import Database, target  # noqa: F401  (fixtures)
from tests.connectors.lakehouse.iceberg_helpers import Lake, sink_config

log = logging.getLogger("test")
DAYS_AGO = time.time() - 4 * 86_400


@pytest.fixture
def lake(target: Database, tmp_path: Path) -> Lake:  # noqa: F811
    return Lake(target, tmp_path / "warehouse")


def _config(lake: Lake, tables: str = "shop.orders", **extra: Any) -> IcebergSinkConfig:
    return IcebergSinkConfig.model_validate(sink_config(lake, "orders", tables, **extra))


def _rows(ids: range, region: str) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(list(ids), pa.int64()),
            "region": pa.array([region] * len(ids), pa.string()),
            "body": pa.array([f"b{i}" * (i % 7 + 1) for i in ids], pa.string()),
        }
    )


def _table(lake: Lake, name: str = "shop.orders", partition_by: str | None = None) -> Any:
    """An empty table made through the sink's catalog (its FileIO confined to the warehouse)."""
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.transforms import IdentityTransform
    from pyiceberg.types import LongType, NestedField, StringType

    catalog = _catalog.load_catalog(_config(lake, name))
    catalog.create_namespace_if_not_exists(name.split(".")[0])
    schema = Schema(
        NestedField(1, "id", LongType()), NestedField(2, "region", StringType()), NestedField(3, "body", StringType())
    )
    spec = PartitionSpec()
    if partition_by:
        spec = PartitionSpec(
            PartitionField(schema.find_field(partition_by).field_id, 1000, IdentityTransform(), partition_by)
        )
    return catalog.create_table(name, schema=schema, partition_spec=spec)


def _commit(table: Any, rows: pa.Table, offsets: dict[str, dict[str, dict[int, int]]]) -> Any:
    """Append `rows` in one snapshot carrying `offsets` (connector → its offsets), as a sink run does."""
    table.append(rows, snapshot_properties={_offsets.key(c): _offsets.encode(o) for c, o in offsets.items()})
    return table.refresh()


def _checksum(table: Any) -> tuple[int, str]:
    """The row count and a digest of every row, in id order (the whole table as read by pyiceberg)."""
    rows = table.refresh().scan().to_arrow().sort_by("id").to_pylist()
    return len(rows), hashlib.sha256(json.dumps(rows, sort_keys=True).encode()).hexdigest()


def _offsets_of(table: Any, *connectors: str) -> dict[str, Any]:
    return {c: _offsets.read(table.refresh(), c) for c in connectors}


def _data_files(table: Any) -> list[str]:
    return sorted(t.file.file_path for t in table.refresh().scan().plan_files())


def test_compaction_bin_packs_each_partitions_small_files_in_one_snapshot_keeping_rows_and_offsets(
    lake: Lake,
) -> None:
    table = _table(lake, partition_by="region")
    for run in range(4):  # four runs, each a file in `eu` and in `us`; `ap` gets one file only
        ids = range(run * 100, run * 100 + 100)
        rows = pa.concat_tables([_rows(ids, "eu"), _rows(range(1000 + ids.start, 1000 + ids.stop), "us")])
        table = _commit(table, rows, {"sink": {"orders": {0: 200 * (run + 1)}}})
    table = _commit(table, _rows(range(5000, 5010), "ap"), {"other": {"orders": {0: 10}, "more": {1: 3}}})
    table = _commit(table, _rows(range(6000, 6001), "ap"), {"sink": {"orders": {0: 801}}})
    _offsets.alter(table, "reset", None)  # a third connector's offsets, held by a table property
    before, offsets = _checksum(table), _offsets_of(table, "sink", "other", "reset")
    files = _data_files(table)
    assert len(files) == 10
    snapshots = len(table.refresh().snapshots())

    (compact, *_) = IcebergSinkConnector().upkeep("sink", _config(lake))
    assert compact.name == "compact"
    done = compact.run(log)

    table = table.refresh()
    assert done == {
        "tables": {
            "shop.orders": {
                "files_rewritten": 10,
                "files_written": 3,
                "bytes_rewritten": done["tables"]["shop.orders"]["bytes_rewritten"],
            }
        }
    }
    assert len(_data_files(table)) == 3  # one per partition
    assert _checksum(table) == before
    assert _offsets_of(table, "sink", "other", "reset") == offsets
    assert len(table.snapshots()) == snapshots + 1  # one snapshot
    summary = table.current_snapshot().summary
    assert summary.operation.value == "overwrite"
    assert json.loads(summary["connect.offsets.sink"]) == {"orders": {"0": 801}}  # every connector's, carried
    assert json.loads(summary["connect.offsets.other"]) == {"more": {"1": 3}, "orders": {"0": 10}}

    assert compact.run(log)["tables"]["shop.orders"]["files_rewritten"] == 0  # nothing small left in pairs
    assert len(table.refresh().snapshots()) == snapshots + 1


def test_compaction_leaves_files_at_the_target_and_a_lone_small_file_alone(lake: Lake) -> None:
    table = _table(lake)
    table = _commit(table, _rows(range(0, 20_000), "eu"), {"sink": {"orders": {0: 1}}})
    (big,) = table.scan().plan_files()
    table = _commit(table, _rows(range(20_000, 20_010), "eu"), {"sink": {"orders": {0: 2}}})
    assert upkeep.compact(table, big.file.file_size_in_bytes, log)["files_rewritten"] == 0  # one small file only
    table = _commit(table, _rows(range(20_010, 20_020), "eu"), {"sink": {"orders": {0: 3}}})
    before = _checksum(table)
    done = upkeep.compact(table, big.file.file_size_in_bytes, log)
    assert (done["files_rewritten"], done["files_written"]) == (2, 1)
    assert big.file.file_path in _data_files(table) and len(_data_files(table)) == 2
    assert _checksum(table) == before


def test_snapshot_expiry_keeps_the_newest_and_whatever_the_offsets_are_read_from(lake: Lake) -> None:
    table = _table(lake)
    table = _commit(table, _rows(range(0, 10), "eu"), {"gone": {"orders": {0: 10}}})  # a connector since deleted
    for run in range(1, 6):
        table = _commit(table, _rows(range(run * 10, run * 10 + 10), "eu"), {"sink": {"orders": {0: run * 10 + 10}}})
    before, offsets = _checksum(table), _offsets_of(table, "sink", "gone")
    later = datetime.now(UTC) + timedelta(hours=1)

    # nothing is old enough at the default max age (5 days)
    (_, expire, _) = IcebergSinkConnector().upkeep("sink", _config(lake))
    assert expire.run(log)["tables"]["shop.orders"]["snapshots_expired"] == 0

    # the connector `gone` is read from the first snapshot: the offsets hold all history back, so
    # they are first carried into a snapshot of no rows; then all but the newest two go
    done = upkeep.expire_snapshots(table, timedelta(0), 2, log, now=later)
    table = table.refresh()
    assert done == {"snapshots_expired": 5, "snapshots_left": 2, "offsets_carried": True}
    assert len(table.snapshots()) == 2
    assert table.current_snapshot().summary.get("added-data-files") is None  # a snapshot of no rows
    assert _checksum(table) == before
    assert _offsets_of(table, "sink", "gone") == offsets

    # the current snapshot carries every connector's offsets now: nothing more is carried
    done = upkeep.expire_snapshots(table, timedelta(0), 1, log, now=later)
    assert done == {"snapshots_expired": 1, "snapshots_left": 1, "offsets_carried": False}
    assert (_checksum(table), _offsets_of(table, "sink", "gone")) == (before, offsets)

    # a reset through Connect (a table property over the history) is kept too
    table = _commit(table, _rows(range(60, 70), "eu"), {"sink": {"orders": {0: 70}}})
    _offsets.alter(table, "sink", None)
    before, offsets = _checksum(table), _offsets_of(table, "sink", "gone")
    assert offsets == {"sink": {}, "gone": {"orders": {0: 10}}}
    done = upkeep.expire_snapshots(table, timedelta(0), 1, log, now=later)
    assert done == {"snapshots_expired": 2, "snapshots_left": 1, "offsets_carried": True}
    assert (_checksum(table), _offsets_of(table, "sink", "gone")) == (before, offsets)


def test_orphan_removal_deletes_only_old_unreferenced_files_under_the_table_and_follows_no_link(
    lake: Lake, tmp_path: Path
) -> None:
    table = _table(lake)
    for run in range(3):
        table = _commit(table, _rows(range(run * 10, run * 10 + 10), "eu"), {"sink": {"orders": {0: run * 10 + 10}}})
    replaced = [p.removeprefix("file://") for p in _data_files(table)]
    upkeep.compact(table, 1 << 20, log)
    upkeep.expire_snapshots(table.refresh(), timedelta(0), 1, log, now=datetime.now(UTC) + timedelta(hours=1))
    table = table.refresh()
    before, offsets = _checksum(table), _offsets_of(table, "sink")
    root = Path(table.location().removeprefix("file://"))
    stray = root / "data" / "00000-killed-run.parquet"  # a data file of a commit that never happened
    stray.write_bytes(b"PAR1")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious.parquet").write_bytes(b"PAR1")
    (root / "data" / "link.parquet").symlink_to(outside / "precious.parquet")
    (root / "data" / "linked-dir").symlink_to(outside, target_is_directory=True)
    for path in root.rglob("*"):  # everything is 4 days old …
        if path.is_file() and not path.is_symlink():
            os.utime(path, (DAYS_AGO, DAYS_AGO))
    young = root / "data" / "00001-in-flight.parquet"  # … but a file a commit in flight just wrote
    young.write_bytes(b"PAR1")
    referenced = {p.removeprefix("file://") for p in upkeep._referenced(table)}
    assert not set(replaced) & {p for p in referenced if p.endswith(".parquet")}  # expired with their snapshots

    (_, _, remove) = IcebergSinkConnector().upkeep("sink", _config(lake))
    done = remove.run(log)["tables"]["shop.orders"]

    assert not stray.exists() and young.exists()
    assert not any(Path(p).exists() for p in replaced)
    assert all(Path(p).exists() for p in referenced)  # every referenced file is kept, however old
    assert (outside / "precious.parquet").exists() and (root / "data" / "link.parquet").is_symlink()
    assert done["files_deleted"] >= len(replaced) + 1 and done["unreferenced_too_young"] == 1
    assert _checksum(table) == before and _offsets_of(table, "sink") == offsets
    assert remove.run(log)["tables"]["shop.orders"]["files_deleted"] == 0

    with pytest.raises(ValueError, match="at least"):
        upkeep.remove_orphans(table, timedelta(minutes=59), log)


@pytest.mark.parametrize(
    ("key", "value", "words"),
    [
        ("iceberg.compaction.target-file-size-bytes", 1000, "greater than or equal to 1048576"),
        # a group of files up to the target is read into the Airflow task's memory (2**40 took a worker down)
        ("iceberg.compaction.target-file-size-bytes", 2**31, "less than or equal to 1073741824"),
        ("upkeep.schedule", "0 0 31 2 *", "never"),  # February 31st: no upkeep task could tell when it is due
        ("iceberg.snapshots.max-age-hours", -1, "greater than or equal to 0"),
        ("iceberg.snapshots.min-keep", 0, "greater than or equal to 1"),
        ("iceberg.orphans.older-than-hours", 0, "greater than or equal to 1"),
        ("upkeep.schedule", "@once", "not `@once`"),
    ],
)
def test_the_upkeep_keys_are_checked_at_create(
    runtime: Runtime, lake: Lake, key: str, value: object, words: str
) -> None:
    from connect_core.sdk.errors import ConfigError

    with pytest.raises(ConfigError) as refused:
        runtime.create_connector("lake", sink_config(lake, "orders", "shop.orders", **{key: value}))
    assert list(refused.value.errors) == [key] and words in refused.value.errors[key][0]


def _aged(root: Path) -> None:
    """Every regular file under `root` made 4 days old: old enough for any orphan threshold here."""
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            os.utime(path, (DAYS_AGO, DAYS_AGO))


def _plain_schema() -> Any:
    from pyiceberg.schema import Schema
    from pyiceberg.types import LongType, NestedField, StringType

    return Schema(
        NestedField(1, "id", LongType()), NestedField(2, "region", StringType()), NestedField(3, "body", StringType())
    )


@pytest.mark.parametrize("where", ["same location", "its location holds the other table"])
def test_orphan_removal_refuses_a_location_whose_files_another_table_shares_and_deletes_nothing(
    lake: Lake, where: str
) -> None:
    """Another table's files under this table's `data/` or `metadata/` are unreferenced by this one's
    metadata: deleting them destroyed the other table (its metadata went, it could not be loaded)."""
    from connect_core.sdk.errors import ConfigError

    catalog = _catalog.load_catalog(_config(lake))
    other = _commit(_table(lake, "shop.data"), _rows(range(0, 10), "eu"), {"x": {"t": {0: 10}}})
    shared = other.location() if where == "same location" else os.path.dirname(other.location())
    table = catalog.create_table("shop.orders", schema=_plain_schema(), location=shared)
    table = _commit(table, _rows(range(10, 20), "eu"), {"sink": {"orders": {0: 10}}})
    stray = Path(shared.removeprefix("file://"), "data", "00000-killed-run.parquet")
    stray.write_bytes(b"PAR1")
    _aged(Path(shared.removeprefix("file://")))
    files = sorted(Path(shared.removeprefix("file://")).rglob("*"))
    others = _checksum(other)

    (_, _, remove) = IcebergSinkConnector().upkeep("sink", _config(lake))
    with pytest.raises(ConfigError, match="belongs to another table"):
        remove.run(log)

    assert sorted(Path(shared.removeprefix("file://")).rglob("*")) == files  # not one file deleted, the stray neither
    assert _checksum(catalog.load_table("shop.data")) == others


def test_orphan_removal_refuses_the_warehouse_itself_as_a_location(lake: Lake) -> None:
    from connect_core.sdk.errors import ConfigError

    catalog = _catalog.load_catalog(_config(lake))
    catalog.create_namespace_if_not_exists("shop")
    table = catalog.create_table("shop.orders", schema=_plain_schema(), location=str(lake.warehouse.resolve()))
    _commit(table, _rows(range(0, 10), "eu"), {"sink": {"orders": {0: 10}}})
    (_, _, remove) = IcebergSinkConnector().upkeep("sink", _config(lake))
    with pytest.raises(ConfigError, match="not a directory inside the warehouse"):
        remove.run(log)


def test_orphan_removal_keeps_a_live_file_its_metadata_names_through_a_link_or_percent_encoded(lake: Lake) -> None:
    """A table whose `write.data.path` leads through a link inside the warehouse: its live files are
    listed under their real path, which no reference spelled: they were deleted, the table broken."""
    table = _table(lake)
    root = Path(table.location().removeprefix("file://"))
    alias = lake.warehouse / "alias"
    alias.symlink_to(root, target_is_directory=True)
    with table.transaction() as tx:
        tx.set_properties({"write.data.path": str(alias / "data")})
    table = _commit(table.refresh(), _rows(range(0, 10), "eu"), {"sink": {"orders": {0: 10}}})
    assert all("/alias/" in p for p in _data_files(table))
    stray = root / "data" / "00000-killed-run.parquet"
    stray.write_bytes(b"PAR1")
    (root / "metadata" / "version-hint.text").write_text("1")  # a Hadoop catalog's pointer: never an orphan
    _aged(root)
    before = _checksum(table)

    done = upkeep.remove_orphans(table, timedelta(hours=1), log)

    assert all(Path(p).exists() for p in _data_files(table)) and _checksum(table) == before
    assert not stray.exists() and done["files_deleted"] == 1
    assert (root / "metadata" / "version-hint.text").exists()
    # a file named percent-encoded, as another engine may write it, is kept under either spelling
    spelled = upkeep._comparable(table, [f"file://{root}/data/region=a%2Fb/x%20y.parquet"])
    assert {f"{root}/data/region=a%2Fb/x%20y.parquet", f"{root}/data/region=a/b/x y.parquet"} <= spelled


def test_orphan_removal_deletes_nothing_when_a_manifest_cannot_be_read(lake: Lake) -> None:
    from connect_core.sdk.errors import DataError

    table = _table(lake)
    for run in range(2):
        table = _commit(table, _rows(range(run * 10, run * 10 + 10), "eu"), {"sink": {"orders": {0: run * 10 + 10}}})
    root = Path(table.location().removeprefix("file://"))
    Path(table.snapshots()[0].manifest_list.removeprefix("file://")).unlink()  # a metadata log naming a lost file
    _aged(root)
    files = sorted(root.rglob("*"))
    with pytest.raises(DataError, match="no file is removed"):
        upkeep.remove_orphans(table, timedelta(hours=1), log)
    assert sorted(root.rglob("*")) == files


def _racing(lake: Lake, monkeypatch: pytest.MonkeyPatch, where: str, offset: int) -> None:
    """Make `_upkeep.<where>` commit, once, a sink run of no rows (its offsets only: every record of
    its batch went to the dead letters) to the table before it goes on, through another catalog."""
    real = getattr(upkeep, where)

    def racing(*args: Any) -> Any:
        monkeypatch.setattr(upkeep, where, real)
        found = real(*args)
        other = _catalog.load_catalog(_config(lake)).load_table("shop.orders")
        _write.commit_files(other, [], {_offsets.key("sink"): _offsets.encode({"orders": {0: offset}})})
        return found

    monkeypatch.setattr(upkeep, where, racing)


@pytest.mark.parametrize("job", ["compact", "expire_snapshots"])
def test_an_upkeep_commit_that_a_sink_commit_overtakes_fails_and_the_sinks_offsets_stand(
    lake: Lake, monkeypatch: pytest.MonkeyPatch, job: str
) -> None:
    """pyiceberg 0.12 retries a commit that lost its race on the new head with the summary it was
    given: the upkeep's snapshot, carrying the offsets read before the sink's commit, landed on top
    of it and took the sink's offsets back (999 → 30): its next run wrote those records again."""
    from connect_core.sdk.errors import RetriableError

    table = _table(lake)
    table = _commit(table, _rows(range(0, 10), "eu"), {"gone": {"orders": {0: 10}}})
    for run in range(1, 3):
        table = _commit(table, _rows(range(run * 10, run * 10 + 10), "eu"), {"sink": {"orders": {0: run * 10 + 10}}})
    before = _checksum(table)
    _racing(lake, monkeypatch, "carried_offsets", 999)  # what compaction and expiry's carry commit

    def run() -> Any:
        if job == "compact":
            return upkeep.compact(table, 1 << 20, log)
        return upkeep.expire_snapshots(table, timedelta(0), 1, log, now=datetime.now(UTC) + timedelta(hours=1))

    with pytest.raises(RetriableError, match="changed under the upkeep's commit"):
        run()

    assert _offsets_of(table, "sink", "gone") == {"sink": {"orders": {0: 999}}, "gone": {"orders": {0: 10}}}
    assert _checksum(table) == before


def test_a_table_the_upkeep_refuses_leaves_the_connectors_other_tables_their_upkeep(lake: Lake) -> None:
    """The first table that failed stopped the job: every table after it went without upkeep for
    as long as that one stayed as it was."""
    from connect_core.sdk.errors import ConfigError

    catalog = _catalog.load_catalog(_config(lake, "shop.bad,shop.orders"))
    catalog.create_namespace_if_not_exists("shop")
    bad = catalog.create_table("shop.bad", schema=_plain_schema(), location=str(lake.warehouse.resolve()))
    _commit(bad, _rows(range(0, 10), "eu"), {"sink": {"orders": {0: 10}}})
    table = _commit(_table(lake), _rows(range(0, 10), "eu"), {"sink": {"orders": {0: 10}}})
    stray = Path(table.location().removeprefix("file://"), "data", "00000-killed-run.parquet")
    stray.write_bytes(b"PAR1")
    _aged(Path(table.location().removeprefix("file://")))

    (_, _, remove) = IcebergSinkConnector().upkeep("sink", _config(lake, "shop.bad,shop.orders"))
    with pytest.raises(ConfigError, match=r"shop\.bad"):
        remove.run(log)
    assert not stray.exists()  # shop.orders, after shop.bad, still had its orphans removed


def test_orphan_removal_reads_ages_by_the_file_systems_clock_when_this_hosts_runs_ahead(lake: Lake) -> None:
    """The upkeep's host 3 hours ahead of the hosts writing the table: a file a commit in flight
    wrote a moment ago looked 3 hours old, older than the threshold, and was deleted."""
    table = _commit(_table(lake), _rows(range(0, 10), "eu"), {"sink": {"orders": {0: 10}}})
    in_flight = Path(table.location().removeprefix("file://"), "data", "00001-in-flight.parquet")
    in_flight.write_bytes(b"PAR1")
    ahead = datetime.now(UTC) + timedelta(hours=3)

    done = upkeep.remove_orphans(table, timedelta(hours=1), log, now=ahead)

    assert in_flight.exists() and done["unreferenced_too_young"] == 1
    assert not list(Path(table.location().removeprefix("file://")).glob(".connect-clock-*"))  # its probe gone


def test_orphan_removal_racing_another_one_is_no_failure(lake: Lake, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two connectors writing one table upkeep it at the same time: a file the other removal deleted
    between this one's listing and its deletion failed the job."""
    table = _commit(_table(lake), _rows(range(0, 10), "eu"), {"sink": {"orders": {0: 10}}})
    root = Path(table.location().removeprefix("file://"))
    strays = [root / "data" / f"0000{i}-killed-run.parquet" for i in range(2)]
    for stray in strays:
        stray.write_bytes(b"PAR1")
    _aged(root)
    real = type(table.io).delete

    def raced(io: Any, location: str) -> None:
        os.unlink(location)  # the other removal got there first
        monkeypatch.setattr(type(table.io), "delete", real)
        real(io, location)

    monkeypatch.setattr(type(table.io), "delete", raced)
    done = upkeep.remove_orphans(table, timedelta(hours=1), log)
    assert done["files_deleted"] == 1 and not any(s.exists() for s in strays)
