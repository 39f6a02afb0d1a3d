"""The `connect` CLI with --url drives a running REST API (as rocketmq-connect-cli does)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from connect_core.runtime.context import Runtime
from connect_core.runtime.execution.runner import TaskRunner
from tests.rest.conftest import Served


def _cli(api: Served, *args: str, check: bool = True, token: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONNECT_")}
    env["CONNECT_REST_URL"] = api.url
    if token:
        env["CONNECT_REST_TOKEN"] = token
    proc = subprocess.run(
        [sys.executable, "-m", "connect_core.cli", *args], env=env, capture_output=True, text=True, timeout=120
    )
    if check:
        assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def test_cli_over_http(api: Served, runtime: Runtime, runner: TaskRunner, tmp_path: Path) -> None:
    (tmp_path / "in.txt").write_text("a\n")
    (tmp_path / "src.json").write_text(
        json.dumps(
            {
                "connector.class": "FileSourceConnector",
                "file": str(tmp_path / "in.txt"),
                "topic": "t",
                "db.password": "hunter2",
            }
        )
    )
    assert "created source connector" in _cli(api, "create", "src", "--config", str(tmp_path / "src.json")).stdout
    assert json.loads(_cli(api, "list", "-o", "json").stdout) == ["src"]
    runner.run("src", 0)

    status = json.loads(_cli(api, "status", "src", "-o", "json").stdout)
    assert status["connector"]["state"] == "RUNNING" and status["runs"][0]["stats"]["rows"] == 1
    assert "hunter2" not in _cli(api, "config", "src").stdout
    assert "hunter2" not in _cli(api, "allocated", "connectors").stdout
    assert json.loads(_cli(api, "cluster-info", "-o", "json").stdout)[0]["alive"] is True
    assert "FileSinkConnector" in _cli(api, "plugins", "--reload").stdout

    _cli(api, "pause", "src")
    assert json.loads(_cli(api, "status", "src", "-o", "json").stdout)["connector"]["state"] == "PAUSED"
    refused = _cli(api, "offsets", "reset", "src", check=False)
    assert refused.returncode == 2 and "STOPPED" in refused.stderr
    _cli(api, "stop-all")
    assert "reset successfully" in _cli(api, "offsets", "reset", "src").stdout
    assert json.loads(_cli(api, "offsets", "get", "src", "-o", "json").stdout) == {"offsets": []}
    _cli(api, "resume", "src")
    _cli(api, "restart", "src", "--include-tasks")
    _cli(api, "delete", "src")
    missing = _cli(api, "status", "src", check=False)
    assert missing.returncode == 4 and "not found" in missing.stderr
