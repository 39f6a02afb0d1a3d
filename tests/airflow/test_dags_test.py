"""Real Airflow: `airflow dags test` of the file pair moves data through spark-submit tasks."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text

from connect_core.runtime.context import Runtime
from tests.airflow.conftest import AirflowCli
from tests.conftest import file_pair

pytestmark = pytest.mark.spark_submit


def _asset_extras(airflow_db: str) -> list[dict[str, Any]]:
    """The extras of the topic Asset events in Airflow's database, oldest first."""
    engine = create_engine(airflow_db)
    try:
        with engine.connect() as conn:
            query = (
                "SELECT e.extra FROM asset_event e JOIN asset a ON a.id = e.asset_id "
                "WHERE a.name = 'connect.topic.fileTopic' ORDER BY e.id"
            )
            return [json.loads(x) if isinstance(x, str) else x for (x,) in conn.execute(text(query))]
    finally:
        engine.dispose()


def test_file_pair_through_airflow_dags_test(
    airflow: AirflowCli, airflow_db: str, runtime: Runtime, tmp_path: Path
) -> None:
    source, sink = file_pair(runtime, tmp_path)
    source.write_text("one\ntwo\n")
    before = len(_asset_extras(airflow_db))

    airflow("dags", "test", "connect__fileSourceConnector")
    airflow("dags", "test", "connect__fileSinkConnector")
    assert sink.read_text() == "one\ntwo\n"
    # the topic's Asset event says what landed, for a downstream DAG to read
    run_id = runtime.connectors.last_runs("fileSourceConnector", 1)[0]["run_id"]
    assert _asset_extras(airflow_db)[before:] == [
        {"connector": "fileSourceConnector", "task": 0, "run_id": run_id, "rows": 2, "offsets": {"0": [0, 2]}}
    ]

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
    probes pool `y`; once the sensor waits, y's endpoint goes away, and the rebalance task moves y's work."""
    endpoint = ThreadingHTTPServer(("127.0.0.1", 0), _Ready)
    threading.Thread(target=endpoint.serve_forever, daemon=True).start()
    probe = f"http://127.0.0.1:{endpoint.server_address[1]}/readyz"
    runtime.pools.add("y", "k8s://https://127.0.0.1:6443", capacity=2, probe_url=probe)
    file_pair(runtime, tmp_path)
    assert {p for p, _ in runtime.pools.assignment().values()} == {"local", "y"}
    env = {**airflow.env, "CONNECT_HEARTBEAT_TIMEOUT": "3", "CONNECT_REBALANCE_MAX_DELAY": "0"}
    env["CONNECT_PROBE_INTERVAL"] = "0.5"
    proc = subprocess.Popen(
        [str(Path(sys.executable).with_name("airflow")), "dags", "test", "connect_rebalance"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: list[str] = []
    deferred = threading.Event()

    def read() -> None:
        for line in proc.stdout or []:
            lines.append(line)
            if "running trigger in line" in line:
                deferred.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        # y answers until the sensor waits in its trigger; then it goes away.
        assert deferred.wait(timeout=180), "the sensor never deferred:\n" + "".join(lines)[-4000:]
        endpoint.shutdown()
        endpoint.server_close()
        proc.wait(timeout=120)
        reader.join(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
    logs = "".join(lines)
    assert proc.returncode == 0, logs[-4000:]
    assert "running trigger in line" in logs and "pool y lost" in logs
    assert {p for p, _ in runtime.pools.assignment().values()} == {"local"}
    (latest, *_) = runtime.pools.history(1)
    assert latest["reason"] == "pool y lost" and latest["moved"] >= 1
    assert {m["from"] for m in latest["moves"]} == {"y"} and {m["to"] for m in latest["moves"]} == {"local"}


class _Ready(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass
