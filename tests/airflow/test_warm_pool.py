"""A real Airflow task (`airflow dags test`) on a warm Spark Connect pool: the runner runs as a plain
Python client of the server (no spark-submit) or, when the pool's worker runs on this machine, by
that worker; either way its output is the task's log, and the pool's token appears in no log."""

from __future__ import annotations

from pathlib import Path

import pytest

from connect_core.runtime.context import Runtime
from connect_core.runtime.execution.warm_pool import start_worker, stop_worker
from tests.airflow.conftest import AirflowCli
from tests.conftest import file_pair

pytestmark = pytest.mark.spark_connect


def test_an_airflow_task_on_a_warm_pool_is_a_spark_connect_client(
    airflow: AirflowCli, runtime: Runtime, spark_connect_url: str, tmp_path: Path
) -> None:
    runtime.pools.add("warm", spark_connect_url, capacity=2)
    runtime.pools.remove("local")
    source, sink = file_pair(runtime, tmp_path)
    runtime.pools.rebalance("sticky", runtime.settings.heartbeat_timeout)
    source.write_text("one\ntwo\n")
    token = spark_connect_url.split("token=")[1]

    done = airflow("dags", "test", "connect__fileSourceConnector")
    output = done.stdout + done.stderr
    assert "Spark-Submit cmd" not in output and "runs on Spark pool `warm`" in output
    assert token not in output
    run = runtime.connectors.last_runs("fileSourceConnector", limit=1)[0]
    assert run["state"] == "SUCCEEDED" and run["stats"]["spark_remote"].startswith("sc://localhost:")
    # with the pool's worker on this machine, the task hands it the run: no Python start-up either
    start_worker(runtime.settings, "warm", spark_connect_url)
    try:
        done = airflow("dags", "test", "connect__fileSinkConnector")
    finally:
        stop_worker(runtime.settings, "warm")
    output = done.stdout + done.stderr
    assert "the run goes to the worker of pool `warm`" in output and "appended 2 line(s)" in output
    assert token not in output
    assert sink.read_text() == "one\ntwo\n"
    logs = Path(airflow.env["AIRFLOW_HOME"]) / "logs"
    for log_file in logs.rglob("*") if logs.exists() else []:
        if log_file.is_file():
            assert token not in log_file.read_text(errors="replace"), log_file
