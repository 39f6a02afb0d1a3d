"""kill -9 of the Delta sink's real spark-submit at the points where exactly-once is decided, with
bench/kill_matrix.py's machinery: `mid_sink` (right before delta-rs writes and commits) and
`before_commit` (the Delta commit made, the runtime's not); after each kill a
rerun, then the table equals the source table exactly. The sink appends without a key, so only
the table's app transactions can keep a redelivered batch out."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from bench.kill_matrix import Pipeline, run_cell, spark_submitter
from connect_core.runtime.context import Runtime
from tests.conftest import make_runner
from tests.connectors.jdbc_helpers import Database, postgres  # noqa: F401  (fixtures)
from tests.connectors.lakehouse.delta_helpers import read, sink_config

pytestmark = pytest.mark.spark_submit


class DeltaPipeline(Pipeline):
    name = "delta"

    def __init__(self, runtime: Runtime, source: Database, table: Path) -> None:
        self.runtime, self.source, self.sink = runtime, "delta-source", "delta-sink"
        self._db, self._table = source, table
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
        runtime.create_connector(self.sink, sink_config("events", path=str(table)))

    def append(self, rows: int) -> None:
        self._db.execute(
            f"INSERT INTO events (kind, payload) SELECT 'k' || g % 7, repeat('é', g % 13) FROM generate_series(1, {rows}) g"
        )

    def expected(self) -> list[Any]:
        return [tuple(r) for r in self._db.rows("SELECT id, kind, payload FROM events ORDER BY id")]

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
    runner = make_runner(runtime, spark)

    def rerun(connectors: Any) -> None:
        for name in connectors:
            result = runner.run(name, 0)
            assert result.state == "SUCCEEDED", f"rerun of `{name}`: {result.message}"

    submit = spark_submitter(runtime)
    results = [run_cell(pipe, point, submit, rerun, rows=6) for point in ("mid_sink", "before_commit")]
    print(*results, sep="\n")
    assert [(r.point, r.lost, r.duplicated, r.in_order) for r in results] == [
        ("mid_sink", 0, 0, True),
        ("before_commit", 0, 0, True),
    ]
    for r in results:  # each cell killed the sink where it meant to (the runner's points: the source first)
        assert r.killed[-1] == "delta-sink", r
    assert len(pipe.actual()) == 12
    history = DeltaTable(str(table)).history()
    assert sum(int(h["operationMetrics"].get("num_added_rows", 0)) for h in history) == 12  # no commit twice
