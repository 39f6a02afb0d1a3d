"""The lakehouse sinks' kill -9 cells, with bench/kill_matrix.py's machinery: a PostgreSQL table
`events` read by a JDBC source into a topic, and a sink (the subclass's) writing it to a table; the
sink's real spark-submit is killed on each side of the table's commit, then everything is rerun."""

from __future__ import annotations

from typing import Any

from bench.kill_matrix import CellResult, Pipeline, run_cell, spark_submitter
from connect_core.runtime.context import Runtime
from connect_core.testing.databases import Database
from tests.conftest import make_runner

__all__ = ["COMMIT_SIDES", "EventsPipeline", "kill_each_side"]

#: The two sides of a table's commit (`after_stage` is the same side as `before_commit`, earlier).
COMMIT_SIDES = ("mid_sink", "before_commit")


class EventsPipeline(Pipeline):
    """`events` → topic `events` → the sink `sink_config` makes; `actual` reads the table back."""

    def __init__(self, runtime: Runtime, source: Database, sink_config: dict[str, Any]) -> None:
        self.runtime, self.source, self.sink = runtime, f"{self.name}-source", f"{self.name}-sink"
        self._db = source
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
        runtime.create_connector(self.sink, sink_config)

    def append(self, rows: int) -> None:
        self._db.execute(
            f"INSERT INTO events (kind, payload) SELECT 'k' || g % 7, repeat('é', g % 13) FROM generate_series(1, {rows}) g"
        )

    def expected(self) -> list[Any]:
        return [tuple(r) for r in self._db.rows("SELECT id, kind, payload FROM events ORDER BY id")]


def kill_each_side(pipe: EventsPipeline, spark: Any, rows: int = 6) -> list[CellResult]:
    """One cell per side of the commit (reruns in this process); each killed the sink there."""
    runner = make_runner(pipe.runtime, spark)

    def rerun(connectors: Any) -> None:
        for name in connectors:
            result = runner.run(name, 0)
            assert result.state == "SUCCEEDED", f"rerun of `{name}`: {result.message}"

    submit = spark_submitter(pipe.runtime)
    results = [run_cell(pipe, point, submit, rerun, rows=rows) for point in COMMIT_SIDES]
    print(*results, sep="\n")
    for r in results:  # the runner's points kill the source first: the sink must be the last killed
        assert r.killed[-1] == pipe.sink, r
    return results
