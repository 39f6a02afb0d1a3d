"""kill -9 of the Delta sink's real spark-submit at the points where exactly-once is decided, with
bench/kill_matrix.py's machinery: `mid_sink` (right before delta-rs writes and commits) and
`before_commit` (the Delta commit made, the runtime's not); after each kill a
rerun, then the table equals the source table exactly. The sink appends without a key, so only
the table's app transactions can keep a redelivered batch out."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from connect_core.runtime.context import Runtime
from tests.connectors.jdbc_helpers import Database, postgres  # noqa: F401  (fixtures)
from tests.connectors.lakehouse.delta_helpers import read, sink_config
from tests.connectors.lakehouse.kill_helpers import EventsPipeline, kill_each_side

pytestmark = pytest.mark.spark_submit


class DeltaPipeline(EventsPipeline):
    name = "delta"

    def __init__(self, runtime: Runtime, source: Database, table: Path) -> None:
        self._table = table
        super().__init__(runtime, source, sink_config("events", path=str(table)))

    def actual(self) -> list[Any]:
        if not (self._table / "_delta_log").is_dir():
            return []
        return read(str(self._table), ("id", "kind", "payload"))


def test_a_kill_at_every_commit_point_loses_and_duplicates_nothing(
    runtime: Runtime,
    postgres: Database,  # noqa: F811
    tmp_path: Path,
    spark: Any,
) -> None:
    assert os.environ["CONNECT_FILE_ALLOWED_PATHS"] == str(tmp_path)  # the spark-submits' setting too
    table = tmp_path / "lake" / "events"
    pipe = DeltaPipeline(runtime, postgres, table)
    results = kill_each_side(pipe, spark)
    assert [(r.point, r.lost, r.duplicated, r.in_order) for r in results] == [
        ("mid_sink", 0, 0, True),
        ("before_commit", 0, 0, True),
    ]
    assert len(pipe.actual()) == 12
    live = pa.table(DeltaTable(str(table)).get_add_actions(flatten=True))
    assert sum(live["num_records"].to_pylist()) == 12  # the table's files: no batch committed twice
