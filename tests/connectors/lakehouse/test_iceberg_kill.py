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

from bench.kill_matrix import Pipeline, run_cell, spark_submitter
from connect_core.runtime.context import Runtime
from tests.conftest import make_runner
from tests.connectors.jdbc_helpers import Database, postgres, target  # noqa: F401  (fixtures)
from tests.connectors.lakehouse.iceberg_helpers import Lake, sink_config

pytestmark = pytest.mark.spark_submit


class IcebergPipeline(Pipeline):
    name = "iceberg"

    def __init__(self, runtime: Runtime, source: Database, lake: Lake) -> None:
        self.runtime, self.source, self.sink = runtime, "ice-source", "ice-sink"
        self._db, self._lake = source, lake
        source.execute("CREATE TABLE events (id bigserial PRIMARY KEY, kind text, payload text)")
        runtime.create_connector(
            self.source,
            source.source_config(
                **{
                    "mode": "incrementing",
                    "incrementing.column.name": "id",
                    "table.whitelist": "events",
                    "topic.prefix": "",
                }
            ),
        )
        runtime.create_connector(self.sink, sink_config(lake, "events", "lake.events"))

    def append(self, rows: int) -> None:
        self._db.execute(
            f"INSERT INTO events (kind, payload) SELECT 'k' || g % 7, repeat('é', g % 13) FROM generate_series(1, {rows}) g"
        )

    def expected(self) -> list[Any]:
        return [tuple(r) for r in self._db.rows("SELECT id, kind, payload FROM events ORDER BY id")]

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
    runner = make_runner(runtime, spark)

    def rerun(connectors: Any) -> None:
        for name in connectors:
            result = runner.run(name, 0)
            assert result.state == "SUCCEEDED", f"rerun of `{name}`: {result.message}"

    submit = spark_submitter(runtime)
    # the two sides of the Iceberg commit (`after_stage` is the same side as `before_commit`, earlier)
    results = [run_cell(pipe, point, submit, rerun, rows=6) for point in ("mid_sink", "before_commit")]
    print(*results, sep="\n")
    assert [(r.point, r.lost, r.duplicated, r.in_order) for r in results] == [
        ("mid_sink", 0, 0, True),
        ("before_commit", 0, 0, True),
    ]
    for r in results:  # each cell killed the sink where it meant to (the runner's points: the source first)
        assert r.killed[-1] == "ice-sink", r
    assert len(pipe.actual()) == 12
    # the killed commits' data files that no snapshot holds are garbage, never rows
    table = lake.catalog().load_table("lake.events")
    assert sum(int(s.summary["added-records"]) for s in table.snapshots()) == 12
    on_disk = {str(p) for p in (lake.warehouse / "lake" / "events" / "data").glob("*.parquet")}
    assert set(lake.data_files("lake.events")) < on_disk  # mid_sink's file was written, never committed
