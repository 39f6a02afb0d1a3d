"""The local platform for real: api-server, scheduler, dag-processor and triggerer started by the test.

A connector registered in Connect appears as a DAG; a run triggered over Airflow's
REST API v2 copies data, and its Asset event starts the sink DAG by itself; the
Airflow UI (headless Chromium) shows the DAGs and the Connect view; pause,
resume and delete reach the DAGs.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from connect_core.runtime.context import Runtime
from tests.conftest import _admin, file_pair

pytestmark = pytest.mark.spark_submit

ARTIFACTS = Path(__file__).resolve().parents[1] / "_artifacts"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _log_server_ports() -> dict[str, str]:
    """Free ports for the log servers of Airflow's scheduler and triggerer (8793 and 8794 by
    default), so that two platforms of the suite's (pytest-xdist's workers) can run at once."""
    return {
        "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(_free_port()),
        "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(_free_port()),
    }


def _wait(what: str, check: Callable[[], Any], timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(1)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


class Api:
    def __init__(self, base: str, password: str) -> None:
        token = httpx.post(f"{base}/auth/token", json={"username": "admin", "password": password}).json()
        self.base, self.headers = base, {"Authorization": f"Bearer {token['access_token']}"}

    def get(self, path: str) -> Any:
        return httpx.get(f"{self.base}/api/v2{path}", headers=self.headers, timeout=10).json()

    def post(self, path: str, body: dict[str, Any]) -> Any:
        resp = httpx.post(f"{self.base}/api/v2{path}", headers=self.headers, json=body, timeout=10)
        assert resp.status_code == 200, resp.text
        return resp.json()

    def patch(self, path: str, body: dict[str, Any]) -> Any:
        resp = httpx.patch(f"{self.base}/api/v2{path}", headers=self.headers, json=body, timeout=30)
        assert resp.status_code == 200, resp.text
        return resp.json()

    def dag_ids(self) -> set[str]:
        return {d["dag_id"] for d in self.get("/dags?limit=100")["dags"]}

    def runs(self, dag_id: str) -> list[dict[str, Any]]:
        return list(self.get(f"/dags/{dag_id}/dagRuns")["dag_runs"])


@pytest.fixture
def platform(database_url: str, pg_server: str, tmp_path: Path) -> Iterator[tuple[str, dict[str, str]]]:
    port, airflow_db = _free_port(), f"airflow_platform_{uuid.uuid4().hex[:8]}"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CONNECT_", "AIRFLOW"))}
    env.update(CONNECT_DATABASE_URL=database_url, CONNECT_HOME=str(tmp_path / "home"), SPARK_LOCAL_IP="127.0.0.1")
    env["CONNECT_WARM_POOL"] = "false"  # the classic path; tests/airflow/test_platform_warm_pool.py has the default
    env.update(_log_server_ports())
    log = (tmp_path / "platform.log").open("w")
    # Started from tmp_path with no CONNECT_FILE_ALLOWED_PATHS: Airflow's processes must get that directory.
    proc = subprocess.Popen(
        [sys.executable, "-m", "connect_core.cli", "airflow", "up", "--port", str(port), "--airflow-db", airflow_db],
        cwd=tmp_path,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        _wait(
            "the platform to print its address",
            lambda: "Airflow UI" in (tmp_path / "platform.log").read_text() or proc.poll() is not None,
            240,
        )
        assert proc.poll() is None, (tmp_path / "platform.log").read_text()
        yield f"http://127.0.0.1:{port}", env
    finally:
        if proc.poll() is None:  # the test did not get to `connect airflow down`
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        admin = _admin(pg_server)
        with admin.cursor() as cur:
            cur.execute(f'DROP DATABASE IF EXISTS "{airflow_db}" WITH (FORCE)')
        admin.close()


def _check_pools(api: Api, env: dict[str, str]) -> None:
    """Each Spark pool has an Airflow pool with its capacity as slots; tasks take a slot of theirs."""
    slots = {p["name"]: p["slots"] for p in api.get("/pools")["pools"]}
    assert slots["connect_local"] == 2
    # The DAG takes its pool from the assignments as of its last parse: a parse that fell between
    # the create's commit and its placement's has none; the next parse has it.
    dag = "/dags/connect__fileSourceConnector"
    _wait("the source task's Airflow pool", lambda: api.get(f"{dag}/tasks/task_0").get("pool") == "connect_local", 120)
    run = f"{dag}/dagRuns/" + quote(api.post(f"{dag}/dagRuns", {"logical_date": None})["dag_run_id"], safe="")
    _wait("a source run on its pool", lambda: api.get(run)["state"] == "success", 180)
    (ti,) = api.get(f"{run}/taskInstances")["task_instances"]
    assert ti["pool"] == "connect_local"
    assert "connect_rebalance" in api.dag_ids()
    assert api.runs("connect_rebalance"), "the rebalance sensor DAG runs on its own (continuous)"
    _cli(env, "pools", "add", "cluster2", "--master", "yarn", "--capacity", "3")
    assert {p["name"]: p["slots"] for p in api.get("/pools")["pools"]}["connect_cluster2"] == 3
    _cli(env, "pools", "remove", "cluster2")
    assert "connect_cluster2" not in {p["name"] for p in api.get("/pools")["pools"]}


def _cli(env: dict[str, str], *args: str) -> str:
    return subprocess.run(
        [sys.executable, "-m", "connect_core.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout


def test_platform_end_to_end(platform: tuple[str, dict[str, str]], runtime: Runtime, tmp_path: Path) -> None:
    base, env = platform
    password = (Path(env["CONNECT_HOME"]) / "airflow" / "admin-password").read_text().strip()
    api = Api(base, password)

    registered = time.monotonic()
    source, sink = file_pair(runtime, tmp_path)
    _wait(
        "both connector DAGs",
        lambda: {"connect__fileSourceConnector", "connect__fileSinkConnector"} <= api.dag_ids(),
        90,
    )
    print(f"DAGs appeared {time.monotonic() - registered:.1f} s after registering the connectors")
    # What the platform's task processes allow, for a create from another directory to check against.
    assert runtime.pools.worker_paths(runtime.settings.heartbeat_timeout)["local"] == [str(tmp_path.resolve())]

    source.write_text("over rest 1\nover rest 2\n")
    run = api.post("/dags/connect__fileSourceConnector/dagRuns", {"logical_date": None})
    assert run["state"] == "queued"
    _wait(
        "the triggered source run",
        lambda: any(
            r["dag_run_id"] == run["dag_run_id"] and r["state"] == "success"
            for r in api.runs("connect__fileSourceConnector")
        ),
        180,
    )
    sink_runs = _wait(
        "an Asset-triggered sink run",
        lambda: [
            r
            for r in api.runs("connect__fileSinkConnector")
            if r["run_type"] == "asset_triggered" and r["state"] == "success"
        ],
        180,
    )
    assert sink_runs
    assert sink.read_text() == "over rest 1\nover rest 2\n"

    _check_ui(base, password)
    _check_rest_mount(api)
    # The CLI through the REST API inside Airflow, with Airflow's auth (the platform's credentials).
    assert "fileSourceConnector" in _cli(env, "--url", f"{base}/connect", "list", "--output", "json")
    _check_pools(api, env)

    _cli(env, "pause", "fileSourceConnector")
    assert api.get("/dags/connect__fileSourceConnector")["is_paused"] is True
    _cli(env, "resume", "fileSourceConnector")
    assert api.get("/dags/connect__fileSourceConnector")["is_paused"] is False
    _check_pause_in_airflow_reaches_the_connector(api, runtime)
    _cli(env, "delete", "fileSinkConnector")
    _wait("the deleted connector's DAG to go", lambda: "connect__fileSinkConnector" not in api.dag_ids(), 180)

    # A run of a connector created a moment ago: the trigger waits for its DAG (bounded), not a 404.
    (tmp_path / "late.txt").write_text("late\n")
    late = {"connector.class": "FileSourceConnector", "file": str(tmp_path / "late.txt"), "topic": "late"}
    runtime.create_connector("lateSource", {**late, "schedule": "none"})
    assert "triggered DAG run" in _cli(env, "trigger", "lateSource")

    # `connect airflow down` from another shell stops it all, and what its workers allowed is forgotten.
    down = _cli(env, "airflow", "down")
    assert "stopping the platform at http://127.0.0.1:" in down and down.rstrip().endswith("stopped")
    assert not (Path(env["CONNECT_HOME"]) / "airflow" / "platform.json").exists()
    assert runtime.pools.worker_paths(runtime.settings.heartbeat_timeout) == {}
    with pytest.raises(httpx.TransportError):
        httpx.get(f"{base}/api/v2/version", timeout=5)
    assert "no platform is running" in _cli(env, "airflow", "down")


def _check_pause_in_airflow_reaches_the_connector(api: Api, runtime: Runtime) -> None:
    """Pausing the DAG through Airflow's API (what the UI's toggle calls) pauses the connector, and back."""
    name, dag = "fileSourceConnector", "/dags/connect__fileSourceConnector"
    api.patch(dag, {"is_paused": True})
    assert runtime.connectors.get(name).target_state == "PAUSED"  # by the time Airflow answered
    api.patch(dag, {"is_paused": False})
    assert runtime.connectors.get(name).target_state == "RUNNING"
    # The bulk form (the UI's "pause all" of a search) too.
    api.patch("/dags?dag_id_pattern=connect__fileSource%25", {"is_paused": True})
    assert runtime.connectors.get(name).target_state == "PAUSED"
    api.patch("/dags?dag_id_pattern=connect__fileSource%25", {"is_paused": False})
    assert runtime.connectors.get(name).target_state == "RUNNING"


def _check_ui(base: str, password: str) -> None:
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path="/usr/bin/chromium",
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
            ],
        )
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.goto(f"{base}/")
        page.fill("input[name='username']", "admin")
        page.fill("input[name='password']", password)
        page.keyboard.press("Enter")
        page.wait_for_url(lambda url: "login" not in url, timeout=30_000)
        page.goto(f"{base}/dags")
        page.get_by_text("connect__fileSourceConnector").first.wait_for(timeout=30_000)
        assert "connect__fileSinkConnector" in page.content()
        page.screenshot(path=str(ARTIFACTS / "airflow-dags.png"), full_page=True)

        page.goto(f"{base}/plugin/connect")
        frame = page.frame_locator("iframe").first
        frame.get_by_text("Connect: 2 connector(s)").wait_for(timeout=30_000)
        page.screenshot(path=str(ARTIFACTS / "airflow-connect-view.png"), full_page=True)
        assert httpx.get(f"{base}/connect-ui/").status_code == 401  # not without Airflow's auth
        browser.close()


def _check_rest_mount(api: Api) -> None:
    """The REST app inside Airflow, behind Airflow's token."""
    assert httpx.get(f"{api.base}/connect/connectors").status_code == 401
    listed = httpx.get(f"{api.base}/connect/connectors", headers=api.headers)
    assert listed.status_code == 200 and "fileSourceConnector" in listed.json()
    rocketmq = httpx.get(f"{api.base}/connect/connectors/list", headers=api.headers).json()
    assert rocketmq["status"] == 200
    view = httpx.get(f"{api.base}/connect-ui/", headers=api.headers).text
    assert "fileSourceConnector" in view and "SUCCEEDED" in view and "records" in view
    triggered = httpx.post(f"{api.base}/connect/connectors/fileSinkConnector/trigger", headers=api.headers)
    assert triggered.status_code == 200, triggered.text
    assert triggered.json()["dag_run_id"] in {r["dag_run_id"] for r in api.runs("connect__fileSinkConnector")}
