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

from connect_core.connectors.lakehouse.iceberg import IcebergSinkConfig, IcebergSinkConnector, _catalog, _offsets
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
