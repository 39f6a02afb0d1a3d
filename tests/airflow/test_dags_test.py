"""Real Airflow: `airflow dags test` of the file pair moves data through spark-submit tasks."""

from __future__ import annotations

from pathlib import Path

import pytest

from connect_core.runtime.context import Runtime
from tests.airflow.conftest import AirflowCli
from tests.conftest import file_pair

pytestmark = pytest.mark.spark_submit


def test_file_pair_through_airflow_dags_test(airflow: AirflowCli, runtime: Runtime, tmp_path: Path) -> None:
    source, sink = file_pair(runtime, tmp_path)
    source.write_text("one\ntwo\n")

    airflow("dags", "test", "connect__fileSourceConnector")
    airflow("dags", "test", "connect__fileSinkConnector")
    assert sink.read_text() == "one\ntwo\n"

    with source.open("a") as f:
        f.write("three\n")
    airflow("dags", "test", "connect__fileSourceConnector")
    airflow("dags", "test", "connect__fileSinkConnector")
    assert sink.read_text() == "one\ntwo\nthree\n"

    runs_before = runtime.connectors.last_runs("fileSourceConnector", limit=100)
    idle = airflow("dags", "test", "connect__fileSourceConnector")
    assert "nothing new since the last commit: Spark not started" in idle.stdout + idle.stderr
    assert runtime.connectors.last_runs("fileSourceConnector", limit=100) == runs_before  # no run, no Spark


def test_stopped_connector_runs_nothing(airflow: AirflowCli, runtime: Runtime, tmp_path: Path) -> None:
    source, _ = file_pair(runtime, tmp_path)
    source.write_text("x\n")
    runtime.connectors.set_target_state("fileSourceConnector", "STOPPED")
    out = airflow("dags", "test", "connect__fileSourceConnector")
    assert "connector `fileSourceConnector` is STOPPED" in out.stdout + out.stderr
    assert runtime.connectors.last_runs("fileSourceConnector") == []


def test_the_rebalance_sensor_defers_until_a_pool_dies_then_moves_its_work(
    airflow: AirflowCli, runtime: Runtime, tmp_path: Path
) -> None:
    """`connect_rebalance` in real Airflow: the sensor defers, its trigger (run in line by `dags test`)
    fires when pool `y` stops heartbeating, and the rebalance task moves y's work to `local`."""
    runtime.pools.add("y", "yarn", capacity=2)  # not probeable: alive only while it heartbeats
    file_pair(runtime, tmp_path)
    assert {p for p, _ in runtime.pools.assignment().values()} == {"local", "y"}
    airflow.env.update(
        CONNECT_HEARTBEAT_TIMEOUT="4", CONNECT_REBALANCE_MAX_DELAY="0", CONNECT_PROBE_INTERVAL="0.5"
    )
    runtime.pools.heartbeat("y")  # alive when the sensor first looks: it has to wait in the trigger
    out = airflow("dags", "test", "connect_rebalance")
    logs = out.stdout + out.stderr
    assert "running trigger in line" in logs  # it deferred
    assert "pool y lost" in logs
    assert {p for p, _ in runtime.pools.assignment().values()} == {"local"}
    (latest, *_) = runtime.pools.history(1)
    assert latest["reason"] == "pool y lost" and latest["moved"] >= 1
    assert set(latest["old"].values()) == {"local", "y"} and set(latest["new"].values()) == {"local"}
