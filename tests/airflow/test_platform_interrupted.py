"""`connect airflow up` stopped while it starts (during `airflow db migrate`), by `connect airflow down`
from another shell or by Ctrl-C: it leaves neither its pid file nor the `local` pool's label saying
which directories its (never started) workers allow."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from connect_core.runtime.cluster.pools import WORKER_PATHS_LABEL
from connect_core.runtime.context import Runtime
from tests.conftest import _admin


def _wait(what: str, check: Callable[[], Any], timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def _migrating(session: int) -> bool:
    """Whether `airflow db migrate` runs in `session` (up's, which its migrate shares)."""
    found = subprocess.run(["ps", "-o", "args=", "--sid", str(session)], capture_output=True, text=True).stdout
    return "db migrate" in found


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _label(runtime: Runtime) -> str | None:
    pools = {p.name: p for p in runtime.pools.list(runtime.settings.heartbeat_timeout)}
    return pools["local"].labels.get(WORKER_PATHS_LABEL)


@pytest.mark.parametrize("how", ["down", "ctrl-c"])
def test_up_stopped_during_migrate_leaves_nothing_behind(
    how: str, database_url: str, pg_server: str, runtime: Runtime, tmp_path: Path
) -> None:
    airflow_db = f"airflow_interrupted_{uuid.uuid4().hex[:8]}"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CONNECT_", "AIRFLOW"))}
    env.update(
        CONNECT_DATABASE_URL=database_url,
        CONNECT_HOME=str(tmp_path / "home"),
        CONNECT_WARM_POOL="false",
        CONNECT_FILE_ALLOWED_PATHS=str(tmp_path),
        SPARK_LOCAL_IP="127.0.0.1",
    )
    cli = [sys.executable, "-m", "connect_core.cli", "airflow"]
    with (tmp_path / "up.log").open("w") as log:
        up = subprocess.Popen(
            [*cli, "up", "--port", str(_free_port()), "--airflow-db", airflow_db],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        _wait("`airflow db migrate`", lambda: _migrating(up.pid) or up.poll() is not None, 120)
        assert up.poll() is None, (tmp_path / "up.log").read_text()
        assert _label(runtime) == str(tmp_path.resolve())  # recorded before the migration
        pid_file = tmp_path / "home" / "airflow" / "platform.json"
        assert pid_file.exists()
        if how == "down":
            down = subprocess.run([*cli, "down"], env=env, capture_output=True, text=True, timeout=120)
            assert down.returncode == 0 and down.stdout.rstrip().endswith("stopped"), down
        else:
            os.killpg(up.pid, signal.SIGINT)  # a terminal's Ctrl-C: up and its migrate alike
        up.wait(60)
        assert not pid_file.exists(), (tmp_path / "up.log").read_text()
        assert _label(runtime) is None
        assert not _migrating(up.pid)
        down = subprocess.run([*cli, "down"], env=env, capture_output=True, text=True, timeout=60)
        assert "no platform is running" in down.stdout and "stale" not in down.stdout
    finally:
        if up.poll() is None:
            os.killpg(up.pid, signal.SIGKILL)
            up.wait()
        admin = _admin(pg_server)
        with admin.cursor() as cur:
            cur.execute(f'DROP DATABASE IF EXISTS "{airflow_db}" WITH (FORCE)')
        admin.close()
