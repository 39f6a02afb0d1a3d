"""The Delta sink's table upkeep jobs (`DeltaSinkConnector.upkeep`: optimize, then vacuum) on real
delta-rs tables in the test's directory, filled by appends carrying app transactions as the sink's
commits do (no Spark): the rows (by a checksum of all rows) and the offsets stay as they were."""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path

import pyarrow as pa
from deltalake import CommitProperties, DeltaTable, write_deltalake

from connect_core.connectors.lakehouse.delta import DeltaSinkConfig, DeltaSinkConnector
from connect_core.connectors.lakehouse.delta import _offsets as offsets
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
