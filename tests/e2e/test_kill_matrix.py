"""The kill -9 matrix, each cell once (three fault points per pipeline, `CI_POINTS`): the runner's spark-submit SIGKILLed at every fault point (source
side, then sink side; `mid_sink` half-way through the sink's write), for the file pair, for JDBC
(MariaDB → topic → PostgreSQL) and for change data capture (PostgreSQL's log → unwrap → JDBC upserts
and deletes); after each kill a rerun, then the whole target equals the whole source.

The machinery is bench/kill_matrix.py's (which runs every cell 5 times, reruns by spark-submit too);
here the reruns run in this process on the session's SparkSession, which costs no Spark start-up,
and the two pipelines run side by side, so the spark-submits are only the kills.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from bench.kill_matrix import (
    POINTS,
    CdcPipeline,
    CellResult,
    FilePipeline,
    JdbcPipeline,
    Pipeline,
    run_cell,
    spark_submitter,
)
from connect_core.runtime.context import Runtime
from connect_core.runtime.settings import Settings
from connect_core.testing.servers import PgServer
from tests.conftest import make_runner
from tests.connectors.jdbc_helpers import Database, mariadb, target  # noqa: F401  (fixtures)

pytestmark = pytest.mark.spark_submit

#: Each pipeline's fault points in CI: three of the five each, every point at least once and the commit
#: points (where exactly-once is decided) twice or more; bench/kill_matrix.py runs all of them, 5 times.
CI_POINTS = {
    "file": ("before_stage", "after_commit", "mid_sink"),
    "jdbc": ("after_stage", "before_commit", "mid_sink"),
    "cdc": ("after_stage", "before_commit", "after_commit"),
}


@pytest.fixture
def matrix_runtime(database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Runtime]:
    monkeypatch.setenv("CONNECT_FILE_ALLOWED_PATHS", str(tmp_path))  # this process's runs (the reruns)
    runtime = Runtime.open(
        Settings(database_url=database_url, home=tmp_path / "home", lease_seconds=30, file_allowed_paths=str(tmp_path))
    )
    yield runtime
    runtime.close()


def test_every_fault_point_loses_and_duplicates_nothing(
    matrix_runtime: Runtime,
    mariadb: Database,  # noqa: F811
    target: Database,  # noqa: F811
    pg_db: PgServer,
    tmp_path: Path,
    spark: Any,
) -> None:
    assert {point for points in CI_POINTS.values() for point in points} == set(POINTS)  # each point in CI
    runner = make_runner(matrix_runtime, spark)
    in_process = threading.Lock()  # one shared SparkSession: reruns take turns

    def rerun(connectors: Sequence[str]) -> None:
        with in_process:
            for name in connectors:
                result = runner.run(name, 0)
                assert result.state == "SUCCEEDED", f"rerun of `{name}`: {result.message}"

    submit = spark_submitter(matrix_runtime)
    cdc = CdcPipeline(matrix_runtime, pg_db, target)
    pipes: list[Pipeline] = [
        FilePipeline(matrix_runtime, tmp_path),
        JdbcPipeline(matrix_runtime, mariadb, target),
        cdc,
    ]

    def cells(pipe: Pipeline) -> list[CellResult]:
        return [run_cell(pipe, point, submit, rerun, rows=6) for point in CI_POINTS[pipe.name]]

    with ThreadPoolExecutor(len(pipes)) as pool:
        results = [cell for found in pool.map(cells, pipes) for cell in found]
    print(*results, sep="\n")  # the matrix, for the log (pytest -s)

    table = {(r.pipeline, r.point): (r.lost, r.duplicated, r.in_order) for r in results}
    assert table == {(p.name, point): (0, 0, True) for p in pipes for point in CI_POINTS[p.name]}
    for r in results:  # every cell killed what it meant to: the source, then the sink; mid_sink the sink
        sides = ["sink" if name.endswith("sink") else "source" for name in r.killed]
        assert sides == (["sink"] if r.point == "mid_sink" else ["source", "sink"]), r
    # every row came through: 3 cells x 6 rows (the CDC table also lost some to its deletes)
    assert [len(p.actual()) for p in pipes] == [18, 18, len(cdc.expected())]
    assert len(cdc.expected()) >= 12
    assert not cdc.confirmed_past_committed()  # the slot was never told more than the metadata holds
