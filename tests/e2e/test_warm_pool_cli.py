"""`connect pools start`: a warm pool from the command line, its memory bounded, its syncs run by its
worker, and server and worker gone by themselves once idle."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from connect_core.runtime.execution.processes import pid_alive
from tests.e2e.test_spark_submit import Cli, _register, cli  # noqa: F401  (fixture)

pytestmark = pytest.mark.spark_connect


def test_a_warm_pool_started_from_the_cli_syncs_and_stops_when_idle(cli: Cli, tmp_path: Path) -> None:  # noqa: F811
    source, sink = _register(cli, tmp_path)
    pools = Path(cli.env["CONNECT_HOME"]) / "pools"
    started = cli("pools", "start", "warm", "--memory", "700m", "--idle-timeout", "0.15", "--capacity", "2")
    assert "stops after 0.15 min idle" in started.stdout
    server_pid = json.loads((pools / "warm.json").read_text())["pid"]
    worker_pid = json.loads((pools / "warm+worker.json").read_text())["pid"]
    try:
        assert "-Xmx700m" in Path(f"/proc/{server_pid}/cmdline").read_text().split("\0")  # its heap is bounded
        cli("pools", "remove", "local")
        cli("rebalance")
        listed = {p["name"]: p for p in json.loads(cli("pools", "list", "--output", "json").stdout)}
        assert (listed["warm"]["kind"], listed["warm"]["alive"]) == ("spark-connect", True)
        assert "token=****" in listed["warm"]["master"]

        source.write_text("one\ntwo\n")
        runs = json.loads(cli("run", "fileSourceConnector", "fileSinkConnector", "--output", "json").stdout)
        assert [(r["state"], r["pool"]) for r in runs] == [("SUCCEEDED", "warm")] * 2
        assert sink.read_text() == "one\ntwo\n"
        assert "runs 'fileSourceConnector-0', 'fileSinkConnector-0'" in (pools / "warm+worker.log").read_text()

        deadline = time.monotonic() + 90  # 9 s idle, then the worker stops the server and itself
        while time.monotonic() < deadline and (pid_alive(server_pid) or pid_alive(worker_pid)):
            time.sleep(1)
        assert not pid_alive(server_pid) and not pid_alive(worker_pid), "the idle pool did not stop"
        assert not any(pools.glob("warm.sock")) and not any(pools.glob("warm*.json"))  # no stale files
        assert "idle for 9 s: stopping its server" in (pools / "warm+worker.log").read_text()
    finally:
        stopped = cli("pools", "stop", "warm")
    assert "was not running" in stopped.stdout
