"""The local platform is the fast one by default (ADR 0008): `connect airflow up` starts a warm pool,
its tasks and `connect run` run there; with its server killed (-9) the work falls back to the
`local` standby and completes, nothing lost or written twice; the platform's stop stops the pool;
`--no-warm-pool` (CONNECT_WARM_POOL=false) starts none."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from connect_core.runtime.context import Runtime
from connect_core.runtime.execution.processes import pid_alive
from tests.airflow.test_platform import Api, _cli, _free_port, _log_server_ports, _wait
from tests.conftest import _admin, file_pair

pytestmark = pytest.mark.spark_connect

SOURCE, SINK = "connect__fileSourceConnector", "connect__fileSinkConnector"


@contextlib.contextmanager
def _platform(env: dict[str, str], cwd: Path, airflow_db: str, *args: str) -> Iterator[tuple[Api, Path]]:
    """`connect airflow up` as a user runs it; the API client and its log; SIGTERM at the end."""
    port, log_path = _free_port(), cwd / f"platform-{uuid.uuid4().hex[:6]}.log"
    command = ["airflow", "up", "--port", str(port), "--airflow-db", airflow_db, *args]
    with log_path.open("w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "connect_core.cli", *command],
            cwd=cwd,
            env={**env, **_log_server_ports()},
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        _wait("the platform's address", lambda: "Airflow UI" in log_path.read_text() or proc.poll() is not None, 300)
        assert proc.poll() is None, log_path.read_text()
        password = (Path(env["CONNECT_HOME"]) / "airflow" / "admin-password").read_text().strip()
        yield _wait("a token from Airflow's API", lambda: _api(f"http://127.0.0.1:{port}", password), 120), log_path
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=90)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)


def _api(base: str, password: str) -> Api | None:
    try:
        return Api(base, password)
    except httpx.TimeoutException:  # a loaded machine: the API answers later
        return None


def _runs(api: Api, dag: str) -> list[dict[str, Any]] | None:
    """The DAG's runs; None while the API is too busy to answer (2 cores, a spark-submit running)."""
    try:
        return api.runs(dag)
    except httpx.TimeoutException:
        return None


def _sync(api: Api) -> None:
    """Trigger the source DAG; wait for it and for the sink run its Asset event starts."""
    _wait("the DAGs", lambda: {SOURCE, SINK} <= api.dag_ids() and not api.get(f"/dags/{SOURCE}")["is_paused"], 120)
    before = _wait("the sink's runs", lambda: [runs] if (runs := _runs(api, SINK)) is not None else None, 60)
    sinks_before = {r["dag_run_id"] for r in before[0]}
    run = api.post(f"/dags/{SOURCE}/dagRuns", {"logical_date": None})
    done = ("success", "failed")
    source = _wait(
        "the source run",
        lambda: next(
            (r for r in _runs(api, SOURCE) or () if r["dag_run_id"] == run["dag_run_id"] and r["state"] in done), 0
        ),
        240,
    )
    assert source["state"] == "success", source
    sink = _wait(
        "the Asset-triggered sink run",
        lambda: next(
            (r for r in _runs(api, SINK) or () if r["dag_run_id"] not in sinks_before and r["state"] in done), 0
        ),
        240,
    )
    assert sink["state"] == "success", sink


def _last_pools(runtime: Runtime) -> list[str]:
    return [
        runtime.connectors.last_runs(name, limit=1)[0]["pool"] for name in ("fileSourceConnector", "fileSinkConnector")
    ]


def _pools(env: dict[str, str]) -> dict[str, dict[str, Any]]:
    return {p["name"]: p for p in json.loads(_cli(env, "pools", "list", "--output", "json"))}


def test_the_platform_runs_its_tasks_on_a_warm_pool_and_falls_back_to_local(
    database_url: str, pg_server: str, runtime: Runtime, tmp_path: Path
) -> None:
    airflow_db = f"airflow_warm_{uuid.uuid4().hex[:8]}"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CONNECT_", "AIRFLOW"))}
    env.update(CONNECT_DATABASE_URL=database_url, CONNECT_HOME=str(tmp_path / "home"), SPARK_LOCAL_IP="127.0.0.1")
    files = tmp_path / "home" / "pools"
    try:
        with _platform(env, tmp_path, airflow_db) as (api, log):
            assert "warm pool `warm`: up in" in log.read_text()
            pools = _pools(env)
            assert (pools["warm"]["kind"], pools["warm"]["alive"], pools["warm"]["standby"]) == (
                "spark-connect",
                True,
                False,
            )
            assert pools["local"]["standby"] is True
            assert {p["name"]: p["slots"] for p in api.get("/pools")["pools"]}["connect_warm"] == os.cpu_count()
            server_pid = json.loads((files / "warm.json").read_text())["pid"]
            worker_pid = json.loads((files / "warm+worker.json").read_text())["pid"]

            # The platform's tasks run on the warm pool, handed to its worker.
            source, sink = file_pair(runtime, tmp_path)
            source.write_text("one\ntwo\n")
            _sync(api)
            assert sink.read_text() == "one\ntwo\n"
            assert _last_pools(runtime) == ["warm", "warm"]
            worker_log = (files / "warm+worker.log").read_text()
            assert "runs 'fileSourceConnector-0'" in worker_log and "runs 'fileSinkConnector-0'" in worker_log

            # `connect run` in another shell uses the same worker.
            source.write_text("one\ntwo\nthree\n")
            # (with the platform's file directories: a worker runs only callers judged by its own rules)
            shell = {**env, "CONNECT_FILE_ALLOWED_PATHS": str(tmp_path)}
            runs = json.loads(_cli(shell, "run", "fileSourceConnector", "fileSinkConnector", "--output", "json"))
            assert [(r["state"], r["pool"]) for r in runs] == [("SUCCEEDED", "warm")] * 2
            assert sink.read_text() == "one\ntwo\nthree\n"
            assert (files / "warm+worker.log").read_text().count(
                "runs 'fileSourceConnector-0', 'fileSinkConnector-0'"
            ) == 1

            # Its server killed: the sensor's probe fails, the work moves to `local` (no grace to wait).
            killed = time.monotonic()
            os.kill(server_pid, signal.SIGKILL)
            _wait(
                "the work to move to local",
                lambda: {p for p, _g in runtime.pools.assignment().values()} == {"local"},
                60,
            )
            print(f"work on local {time.monotonic() - killed:.1f} s after the server's kill -9")
            source.write_text("one\ntwo\nthree\nfour\n")
            _sync(api)
            assert sink.read_text() == "one\ntwo\nthree\nfour\n"  # nothing lost, nothing twice
            assert _last_pools(runtime) == ["local", "local"]
        # The platform's stop stops what is left of its warm pool.
        _wait("the warm pool's worker to stop", lambda: not pid_alive(worker_pid), 60)
        assert not (files / "warm+worker.json").exists() and not (files / "warm.sock").exists()

        # The switch: no warm pool at all; the tasks are spark-submits on `local`.
        with _platform({**env, "CONNECT_WARM_POOL": "false"}, tmp_path, airflow_db) as (api, log):
            assert "warm pool" not in log.read_text()
            assert not (files / "warm.json").exists() and not (files / "warm+worker.json").exists()
            assert _pools(env)["warm"]["alive"] is False or _pools(env)["warm"]["probe"].get("ok") is False
            source.write_text("one\ntwo\nthree\nfour\nfive\n")
            _sync(api)
            assert sink.read_text() == "one\ntwo\nthree\nfour\nfive\n"
            assert _last_pools(runtime) == ["local", "local"]
    finally:
        admin = _admin(pg_server)
        with admin.cursor() as cur:
            cur.execute(f'DROP DATABASE IF EXISTS "{airflow_db}" WITH (FORCE)')
        admin.close()
