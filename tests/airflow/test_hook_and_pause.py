"""The hook's spark-submit command for every kind of master, the pause middleware on a real store,
and the environment `connect airflow up` gives Airflow's processes."""

from __future__ import annotations

import json
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from sqlalchemy.engine import make_url

from connect_core.airflow.hook import ConnectSubmitHook
from connect_core.airflow.operator import root_cause
from connect_core.airflow.pause_sync import DagPauseMirror
from connect_core.platform import airflow_environment
from connect_core.runtime.context import Runtime
from connect_core.runtime.settings import Settings
from tests.conftest import file_pair

SECRET = "pw-5b0f-never-in-argv"


def _hook(master: str, deploy_mode: str | None = None) -> ConnectSubmitHook:
    return ConnectSubmitHook(
        master=master,
        process_env={"CONNECT_DATABASE_URL": f"postgresql://u:{SECRET}@db/x", "PATH": "/bin"},
        secret_conf={"spark.hadoop.fs.s3a.secret.key": SECRET},
        cluster_env={"CONNECT_DATABASE_URL": f"postgresql://u:{SECRET}@db/x"},
        conf={"spark.ui.enabled": "false"},
        conn_id="connect_spark_missing",
        deploy_mode=deploy_mode,
        name="t",
    )


@pytest.mark.parametrize(
    ("master", "deploy_mode", "yarn", "k8s", "in_file"),
    [
        ("local[*]", None, False, False, []),
        ("spark://h:7077", None, False, False, []),
        ("yarn", "client", True, False, []),
        ("yarn", "cluster", True, False, ["spark.yarn.appMasterEnv.CONNECT_DATABASE_URL"]),
    ],
)
def test_the_command_never_holds_a_secret(
    master: str, deploy_mode: str | None, yarn: bool, k8s: bool, in_file: list[str]
) -> None:
    """No `connect_spark` connection (the provider then assumes YARN): the pool's master decides."""
    hook = _hook(master, deploy_mode)
    assert (hook._is_yarn, hook._is_kubernetes, hook._connection["master"]) == (yarn, k8s, master)
    assert hook._env_vars is None  # the provider's env → argument conversion never sees our env
    from connect_core.runtime.spark.conf import secret_properties

    with secret_properties(hook._secret_conf) as hook._secret_args:
        cmd = " ".join(hook._build_spark_submit_command("app.py"))
        properties = Path(hook._secret_args[1]).read_text()
    assert SECRET not in cmd and "appMasterEnv" not in cmd and "--properties-file" in cmd
    assert "spark.hadoop.fs.s3a.secret.key" in properties
    for key in in_file:
        assert key in properties


def test_root_cause_is_the_outermost_exception_of_the_trace() -> None:
    trace = (
        "Traceback (most recent call last):\n  File \"a.py\", line 1, in f\n    g()\nKeyError: 'x'\n\n"
        "The above exception was the direct cause of the following exception:\n\n"
        'Traceback (most recent call last):\n  File "b.py", line 2, in h\n    raise ConfigError(...)\n'
        "connect_core.sdk.errors.ConfigError: config `file`: no such file\nsecond line\n"
    )
    assert root_cause(trace) == "connect_core.sdk.errors.ConfigError: config `file`: no such file\nsecond line"
    assert root_cause("lease expired without a commit") == "lease expired without a commit"


def _airflow_like(status: int, answer: dict[str, Any]) -> Callable[..., Awaitable[None]]:
    """An ASGI app answering as Airflow's `PATCH /api/v2/dags…` does."""

    async def app(scope: dict[str, Any], receive: Any, send: Callable[[dict[str, Any]], Awaitable[None]]) -> None:
        await send({"type": "http.response.start", "status": status, "headers": []})
        await send({"type": "http.response.body", "body": json.dumps(answer).encode()})

    return app


def _patch(middleware: DagPauseMirror, path: str) -> list[dict[str, Any]]:
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b""}

    anyio.run(middleware, {"type": "http", "method": "PATCH", "path": path}, receive, send)
    return sent


def test_a_dag_paused_in_airflow_pauses_its_connector_and_back(runtime: Runtime, tmp_path: Path) -> None:
    file_pair(runtime, tmp_path)
    runtime.connectors.set_target_state("fileSinkConnector", "STOPPED")

    def mirror(status: int, answer: dict[str, Any], path: str = "/api/v2/dags/connect__fileSourceConnector") -> None:
        sent = _patch(DagPauseMirror(_airflow_like(status, answer), lambda: runtime.connectors), path)
        assert sent[0]["status"] == status and json.loads(sent[1]["body"]) == answer  # Airflow's answer, intact

    def state(name: str = "fileSourceConnector") -> str:
        return runtime.connectors.get(name).target_state

    mirror(404, {"detail": "not found"})
    assert state() == "RUNNING"
    mirror(200, {"dag_id": "connect__fileSourceConnector", "is_paused": True})
    assert state() == "PAUSED"
    mirror(200, {"dag_id": "connect__fileSourceConnector", "is_paused": False})
    assert state() == "RUNNING"
    bulk = {
        "dags": [
            {"dag_id": d, "is_paused": True}
            for d in ("connect__fileSourceConnector", "connect__fileSinkConnector", "other")
        ]
    }
    mirror(200, bulk, "/api/v2/dags")
    assert state() == "PAUSED" and state("fileSinkConnector") == "STOPPED"  # a stopped connector stays stopped


def test_airflow_processes_get_the_resolved_security_settings(
    settings: Settings, airflow_db: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`connect airflow up` started from a directory: its tasks check files against that directory."""
    started_in = tmp_path / "project"
    started_in.mkdir()
    monkeypatch.chdir(started_in)
    monkeypatch.delenv("CONNECT_FILE_ALLOWED_PATHS", raising=False)
    monkeypatch.setenv("CONNECT_CONFIG_PROVIDERS", "env")
    here = Settings(home=tmp_path / "home")
    platform = airflow_environment(here, airflow_db, port=8999, airflow_db=make_url(airflow_db).database or "")
    assert platform.env["CONNECT_FILE_ALLOWED_PATHS"] == str(started_in.resolve())
    assert platform.env["CONNECT_CONFIG_PROVIDERS"] == "env"
    assert platform.env["CONNECT_CONFIG_PROVIDERS_FILE_ALLOWED_PATHS"] == str((tmp_path / "home" / "secrets").resolve())


def test_the_local_platform_is_sized_to_the_machine(
    settings: Settings, airflow_db: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Airflow's default is 32 executor processes, whatever the machine; the user's setting stands."""
    monkeypatch.delenv("AIRFLOW__CORE__PARALLELISM", raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    here, name = Settings(home=tmp_path / "home"), make_url(airflow_db).database or ""
    assert airflow_environment(here, airflow_db, port=8999, airflow_db=name).env["AIRFLOW__CORE__PARALLELISM"] == "4"
    monkeypatch.setenv("AIRFLOW__CORE__PARALLELISM", "12")
    assert "AIRFLOW__CORE__PARALLELISM" not in airflow_environment(here, airflow_db, port=8999, airflow_db=name).env
