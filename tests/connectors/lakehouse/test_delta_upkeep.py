"""The Delta sink's table upkeep jobs (`DeltaSinkConnector.upkeep`: optimize, then vacuum) on real
delta-rs tables in the test's directory, filled by appends carrying app transactions as the sink's
commits do (no Spark): the rows (by a checksum of all rows) and the offsets stay as they were."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import CommitProperties, DeltaTable, write_deltalake

from connect_core.connectors.lakehouse.delta import DeltaSinkConfig, DeltaSinkConnector, _write
from connect_core.connectors.lakehouse.delta import _offsets as offsets
from connect_core.connectors.lakehouse.delta._tables import locate
from tests.connectors.lakehouse.delta_helpers import sink_config, version_of

log = logging.getLogger("test")


def _append(path: Path, ids: range, topic: str) -> None:
    rows = pa.table({"id": pa.array(list(ids), pa.int64()), "body": [f"b{i}" for i in ids]})
    txns = offsets.transactions("sink", topic, {0: ids.stop})
    write_deltalake(str(path), rows, mode="append", commit_properties=CommitProperties(app_transactions=txns))


def _checksum(path: Path) -> tuple[int, str]:
    rows = DeltaTable(str(path)).to_pyarrow_table().sort_by("id").to_pylist()
    return len(rows), hashlib.sha256(json.dumps(rows, sort_keys=True).encode()).hexdigest()


def test_optimize_then_vacuum_as_upkeep_jobs_keep_each_tables_rows_and_offsets(tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    for topic in ("orders", "items"):  # one table per topic
        for run in range(4):
            _append(lake / topic, range(run * 10, run * 10 + 10), topic)
    cfg = DeltaSinkConfig.model_validate(sink_config("orders,items,absent", path=f"{lake}/${{topic}}"))
    before = {t: (_checksum(lake / t), version_of(str(lake / t), "sink", t)) for t in ("orders", "items")}
    files = {t: set(DeltaTable(str(lake / t)).file_uris()) for t in ("orders", "items")}
    assert {t: len(f) for t, f in files.items()} == {"orders": 4, "items": 4}

    optimize, vacuum = DeltaSinkConnector().upkeep("sink", cfg)
    assert (optimize.name, vacuum.name) == ("optimize", "vacuum")
    done = optimize.run(log)["tables"]
    assert set(done) == {str(lake / "orders"), str(lake / "items")}  # a table not made yet is left out
    assert (done[str(lake / "orders")]["numFilesRemoved"], done[str(lake / "orders")]["numFilesAdded"]) == (4, 1)
    json.dumps(done)  # JSON, for the upkeep record
    for topic in ("orders", "items"):
        assert len(DeltaTable(str(lake / topic)).file_uris()) == 1
        assert (_checksum(lake / topic), version_of(str(lake / topic), "sink", topic)) == before[topic]

    # vacuum keeps what the retention (a week by default) covers: the files optimize just replaced
    assert vacuum.run(log)["tables"][str(lake / "orders")] == {"files_deleted": 0}
    assert all(Path(u.removeprefix("file://")).exists() for u in files["orders"])
    # at a retention of none they go (the key takes at least an hour: a copy stands for the time passing)
    (_, vacuum_now) = DeltaSinkConnector().upkeep("sink", cfg.model_copy(update={"vacuum_retention_hours": 0}))
    assert vacuum_now.run(log)["tables"][str(lake / "orders")] == {"files_deleted": 4}
    assert not any(Path(u.removeprefix("file://")).exists() for u in files["orders"])
    for topic in ("orders", "items"):
        assert (_checksum(lake / topic), version_of(str(lake / topic), "sink", topic)) == before[topic]


def test_upkeep_schedule_is_refused_where_the_tables_cannot_be_found_from_the_config(tmp_path: Path) -> None:
    routed = sink_config(
        "orders",
        path=f"{tmp_path}/${{topic}}",
        **{
            "upkeep.schedule": "@daily",
            "transforms": "r",
            "transforms.r.type": "org.apache.kafka.connect.transforms.RegexRouter",
            "transforms.r.regex": "(.*)",
            "transforms.r.replacement": "$1",
        },
    )
    problems = DeltaSinkConnector().validate(DeltaSinkConfig.model_validate(routed))
    assert "cannot be found from the config" in " ".join(problems["upkeep.schedule"])


def _aged(root: Path) -> None:
    old = time.time() - 4 * 86_400
    for path in root.rglob("*"):
        if path.is_file():
            os.utime(path, (old, old))


def test_vacuum_removes_the_data_files_of_a_killed_run_and_nothing_that_is_not_its_own(tmp_path: Path) -> None:
    """delta-rs's default vacuum removes only replaced files: the files a worker wrote for a commit
    that a kill stopped (`connect-<uuid>/`, its log too when the kill came before it was deleted)
    stayed for ever. They go now; a file that is no data file of this table stays."""
    table = tmp_path / "lake" / "orders"
    _append(table, range(0, 10), "orders")
    where = locate(DeltaSinkConfig.model_validate(sink_config("orders", path=str(table))), "orders")
    rows = pa.table({"id": pa.array([10, 11], pa.int64()), "body": ["x", "y"]})
    adds = _write.FileWriter(where, [])(pa.RecordBatchReader.from_batches(rows.schema, rows.to_batches()))
    killed = table / adds[0]["path"].split("/")[0]  # the worker wrote, the driver never committed
    assert killed.name.startswith("connect-") and list(killed.glob("*.parquet"))
    torn = table / f"connect-{'0' * 32}"  # a worker killed before it deleted its table's log
    write_deltalake(str(torn), rows)
    notes = table / "notes.txt"  # not a data file: whatever it is, it is not vacuum's
    notes.write_text("mine")
    _aged(table)
    young = table / f"connect-{'1' * 32}" / "part-00000-in-flight.parquet"  # a worker writing right now
    young.parent.mkdir()
    young.write_bytes(b"PAR1")
    before = (_checksum(table), version_of(str(table), "sink", "orders"))

    (_, vacuum) = DeltaSinkConnector().upkeep(
        "sink",
        DeltaSinkConfig.model_validate(sink_config("orders", path=str(table), **{"delta.vacuum.retention-hours": 1})),
    )
    done = vacuum.run(log)["tables"][str(table)]

    assert not killed.exists() and not torn.exists()
    assert notes.exists() and young.exists()
    assert done == {"files_deleted": 3}  # the killed run's file, the torn staging table's file and log
    assert (_checksum(table), version_of(str(table), "sink", "orders")) == before


def test_vacuum_refuses_a_table_holding_another_delta_table_and_deletes_nothing(tmp_path: Path) -> None:
    from connect_core.sdk.errors import ConfigError

    table = tmp_path / "lake" / "orders"
    _append(table, range(0, 10), "orders")
    inner = table / "region=eu"  # named like a partition: its data files look like this table's
    write_deltalake(str(inner), pa.table({"id": pa.array([1], pa.int64())}))
    _aged(table)
    files = sorted(table.rglob("*"))
    (_, vacuum) = DeltaSinkConnector().upkeep(
        "sink", DeltaSinkConfig.model_validate(sink_config("orders", path=str(table)))
    )
    with pytest.raises(ConfigError, match="another Delta table"):
        vacuum.run(log)
    assert sorted(table.rglob("*")) == files
