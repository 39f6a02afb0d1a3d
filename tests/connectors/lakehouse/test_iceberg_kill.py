"""kill -9 of the Iceberg sink's real spark-submit at the points where exactly-once is decided,
with bench/kill_matrix.py's machinery: `mid_sink` (data files written, no Iceberg commit) and
`before_commit` (the Iceberg commit made, the runtime's not);
after each kill a rerun, then the table equals the source table exactly. The sink appends without
a key, so only the offsets in the table's snapshots can keep a redelivered batch out."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from connect_core.runtime.context import Runtime
from tests.connectors.jdbc_helpers import Database, postgres, target  # noqa: F401  (fixtures)
from tests.connectors.lakehouse.iceberg_helpers import Lake, sink_config
from tests.connectors.lakehouse.kill_helpers import EventsPipeline, kill_each_side

pytestmark = pytest.mark.spark_submit


class IcebergPipeline(EventsPipeline):
    name = "ice"

    def __init__(self, runtime: Runtime, source: Database, lake: Lake) -> None:
        self._lake = lake
        super().__init__(runtime, source, sink_config(lake, "events", "lake.events"))

    def actual(self) -> list[Any]:
        from pyiceberg.exceptions import NoSuchTableError

        try:
            return self._lake.scan("lake.events", ("id", "kind", "payload"))
        except NoSuchTableError:
            return []


def test_a_kill_at_every_commit_point_loses_and_duplicates_nothing(
    runtime: Runtime,
    postgres: Database,  # noqa: F811
    target: Database,  # noqa: F811
    tmp_path: Path,
    spark: Any,
) -> None:
    assert os.environ["CONNECT_FILE_ALLOWED_PATHS"] == str(tmp_path)  # the spark-submits' setting too
    lake = Lake(target, tmp_path / "warehouse")
    pipe = IcebergPipeline(runtime, postgres, lake)
    results = kill_each_side(pipe, spark)
    assert [(r.point, r.lost, r.duplicated, r.in_order) for r in results] == [
        ("mid_sink", 0, 0, True),
        ("before_commit", 0, 0, True),
    ]
    assert len(pipe.actual()) == 12
    # the killed commits' data files that no snapshot holds are garbage, never rows
    table = lake.catalog().load_table("lake.events")
    assert sum(int(s.summary["added-records"]) for s in table.snapshots()) == 12
    on_disk = {str(p) for p in (lake.warehouse / "lake" / "events" / "data").glob("*.parquet")}
    assert set(lake.data_files("lake.events")) < on_disk  # mid_sink's file was written, never committed
