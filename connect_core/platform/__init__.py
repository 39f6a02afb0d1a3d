"""`connect airflow up`: a local Airflow (api-server, scheduler, dag-processor, triggerer) for Connect.

It runs on the same Postgres as the Connect metadata (the embedded one by
default, or CONNECT_DATABASE_URL's server), in a database of its own, with
this project's `dags/` and `plugins/`. Airflow settings that must agree
between processes (the JWT secret, the execution API address) are generated
once and kept under `$CONNECT_HOME/airflow`.

Unless `CONNECT_WARM_POOL` is false (`--no-warm-pool`), the platform also runs a warm pool
(`WarmPool`: a Spark Connect server and its worker, as `connect pools start warm`) for the length
of its life, and makes the classic `local` pool its standby: tasks cost a request to a warm
process instead of a spark-submit, and go back to `local` whenever the warm pool is down
(docs/adr/0008-warm-pool-by-default.md).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING

import psycopg2
from pydantic import SecretStr
from sqlalchemy.engine import make_url

from connect_core.platform._files import private_dir, read_private, write_private
from connect_core.platform.process import (
    PlatformLease,
    PlatformRecord,
    RecordedProcess,
    StopReport,
    clear_stale_platform,
    lock_file,
    pid_file,
    running_platform,
    stop_platform,
)
from connect_core.runtime.cluster.pools import WORKER_PATHS_LABEL
from connect_core.runtime.execution.submit import security_env
from connect_core.runtime.settings import Settings

if TYPE_CHECKING:
    from connect_core.runtime.context import Runtime

__all__ = [
    "AIRFLOW_COMPONENTS",
    "DAGS_FOLDER",
    "PLUGINS_FOLDER",
    "STANDBY_POOL",
    "WARM_POOL",
    "Platform",
    "PlatformLease",
    "PlatformRecord",
    "RecordedProcess",
    "StopReport",
    "WarmPool",
    "WorkerPaths",
    "airflow_environment",
    "check_database_name",
    "clear_stale_platform",
    "lock_file",
    "pid_file",
    "platform_url",
    "run_platform",
    "running_platform",
    "stop_platform",
]

log = logging.getLogger(__name__)

# The repository's `dags/` and `plugins/`, shipped inside the package (see pyproject.toml): the
# checkout's folders in an editable install, the installed copies in a wheel's.
DAGS_FOLDER = Path(str(files("connect_core") / "_dags")).resolve()
PLUGINS_FOLDER = Path(str(files("connect_core") / "_plugins")).resolve()
AIRFLOW_COMPONENTS = ("api-server", "scheduler", "dag-processor", "triggerer")
ADMIN_USER = "admin"
#: The platform's warm pool, and the classic pool that stands by for it.
WARM_POOL = "warm"
STANDBY_POOL = "local"


@dataclass(frozen=True)
class Platform:
    url: str
    username: str
    password: str
    env: dict[str, str]


def check_database_name(name: str) -> None:
    """Raise a one-line ConfigError unless `name` (`--airflow-db`) is a plain database name: a letter
    or `_`, then letters, digits, `_` or `-`, at most 63 characters (Postgres' limit)."""
    from connect_core.runtime.security.limits import one_line
    from connect_core.sdk.errors import ConfigError

    plain = name[:1].isascii() and (name[:1].isalpha() or name[:1] == "_")
    if not (plain and len(name) <= 63 and all(c.isascii() and (c.isalnum() or c in "_-") for c in name)):
        raise ConfigError(
            f"--airflow-db `{one_line(name[:80])}` is not a plain database name; use letters, digits, `_` "
            "or `-` (starting with a letter or `_`), at most 63 characters"
        )


def _ensure_database(server_url: str, name: str) -> str:
    """Create database `name` on the server of `server_url` if missing; its SQLAlchemy URL."""
    from psycopg2 import sql

    check_database_name(name)
    url = make_url(server_url)
    admin = psycopg2.connect(url.set(drivername="postgresql").render_as_string(hide_password=False))
    admin.autocommit = True
    with admin.cursor() as cur:
        cur.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,))
        if cur.fetchone() is None:
            cur.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    admin.close()
    return url.set(drivername="postgresql+psycopg2", database=name).render_as_string(hide_password=False)


def _secret(home: Path, name: str) -> str:
    path = home / name
    if not path.exists():
        write_private(path, secrets.token_urlsafe(32), replace=False)
    return read_private(path).strip()


def _explicit(setting: str) -> bool:
    """Whether `setting` was given in this process's environment (not its default)."""
    return f"CONNECT_{setting.upper()}" in os.environ


def local_parallelism() -> int:
    """How many task processes the local platform's LocalExecutor runs: two per core, at least 4."""
    return max(4, 2 * (os.cpu_count() or 1))


def _unless_set(name: str, value: str) -> dict[str, str]:
    """`{name: value}`, unless this process's environment sets `name` (the user's choice stands)."""
    return {} if name in os.environ else {name: value}


def airflow_environment(settings: Settings, connect_url: str, *, port: int, airflow_db: str) -> Platform:
    """The environment every Airflow process of the platform runs with."""
    home = private_dir(settings.home / "airflow")
    password = _secret(home, "admin-password")
    passwords_file = home / "simple_auth_manager_passwords.json"
    write_private(passwords_file, json.dumps({ADMIN_USER: password}))
    base = platform_url(port)
    # Lets `connect pause/resume/trigger` in another shell find this Airflow.
    write_private(home / "api.json", json.dumps({"url": base, "username": ADMIN_USER, "password": password}))
    env = {
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": _ensure_database(connect_url, airflow_db),
        "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS_FOLDER),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(PLUGINS_FOLDER),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{base}/execution/",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{ADMIN_USER}:admin",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(passwords_file),
        "AIRFLOW__API__HOST": "127.0.0.1",
        "AIRFLOW__API__PORT": str(port),
        "AIRFLOW__API__BASE_URL": base,
        "AIRFLOW__API_AUTH__JWT_SECRET": _secret(home, "jwt-secret"),
        "AIRFLOW__API__SECRET_KEY": _secret(home, "api-secret-key"),
        # New connectors should show up within seconds; parsing our DAG file is one query.
        "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
        "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "5",
        "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "2",
        # Sized to the machine (Airflow's default is 32 LocalExecutor processes, idle or not): a task
        # mostly waits on its spark-submit or its warm pool, and each spark-submit is a JVM.
        **_unless_set("AIRFLOW__CORE__PARALLELISM", str(local_parallelism())),
        # The dag-processor imports the DAG factory once; every file's parse inherits it.
        "AIRFLOW__CORE__MIGHT_CONTAIN_DAG_CALLABLE": "connect_core.airflow.dag_factory.might_contain_dag",
        # One DAG file on this machine's platform unless asked otherwise: at a 5 s parse interval the
        # 16 files of a platform team's cluster cost a core here (measured: 1.2 vs 0.45 cores).
        "CONNECT_AIRFLOW_DAG_SHARDS": str(settings.airflow_dag_shards if _explicit("airflow_dag_shards") else 1),
        "CONNECT_DATABASE_URL": connect_url,
        "CONNECT_HOME": str(settings.home),
        # Resolved here, so every Airflow process checks against what this one was started with.
        **security_env(settings),
        "SPARK_LOCAL_IP": os.environ.get("SPARK_LOCAL_IP", "127.0.0.1"),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    return Platform(url=base, username=ADMIN_USER, password=password, env=env)


def platform_url(port: int) -> str:
    """The address of the platform's Airflow API and UI on `port`."""
    return f"http://127.0.0.1:{port}"


def run_platform(
    platform: Platform,
    lease: PlatformLease,
    *,
    on_ready: Callable[[Platform], None],
    timeout: float = 180.0,
    airflow: str | None = None,
) -> int:
    """Migrate Airflow's database, start its four components (each recorded in `lease`'s pid file),
    wait until the API answers, then block; the components are stopped however it ends (a signal:
    `lease` made it a KeyboardInterrupt). `airflow`: the executable (this environment's)."""
    env = {**os.environ, **platform.env}
    airflow = airflow or str(Path(sys.executable).with_name("airflow"))
    logs = Path(platform.env["AIRFLOW_HOME"]) / "logs"
    procs: list[subprocess.Popen[bytes]] = []
    try:
        logs.mkdir(parents=True, exist_ok=True)
        subprocess.run([airflow, "db", "migrate"], env=env, check=True, stdout=subprocess.DEVNULL)
        for component in AIRFLOW_COMPONENTS:
            with (logs / f"{component}.log").open("ab") as log_file:
                proc = subprocess.Popen(
                    [airflow, component], env=env, stdout=log_file, stderr=subprocess.STDOUT, start_new_session=True
                )
            procs.append(proc)
            lease.record(component, proc.pid, group=True)
        _wait_healthy(platform.url, procs, timeout)
        on_ready(platform)
        while all(p.poll() is None for p in procs):
            time.sleep(1)
        failed = [c for c, p in zip(AIRFLOW_COMPONENTS, procs, strict=False) if p.poll() is not None]
        print(f"airflow {', '.join(failed)} exited; see {logs}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0
    finally:
        _stop_components(procs)


def _stop_components(procs: list[subprocess.Popen[bytes]]) -> None:
    """SIGTERM to each component's group (each is a session of its own), SIGKILL past 20 s."""
    for proc in procs:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
    for proc in procs:
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=10)


def _wait_healthy(base: str, procs: list[subprocess.Popen[bytes]], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(p.poll() is not None for p in procs):
            raise RuntimeError("an Airflow component exited during start-up; see $CONNECT_HOME/airflow/logs")
        try:
            with urllib.request.urlopen(f"{base}/api/v2/monitor/health", timeout=2) as resp:
                if resp.status == 200:
                    return
        except OSError:
            pass
        time.sleep(1)
    raise TimeoutError(f"Airflow's API did not answer at {base} within {timeout:.0f} s")


class WorkerPaths:
    """While the platform runs, its pools say which directories their workers let file connectors use
    (a label, `WORKER_PATHS_LABEL`): a create from another shell, in another directory, then checks
    paths against where the tasks will run instead of accepting what every run would refuse."""

    def __init__(self, rt: Runtime, platform: Platform) -> None:
        self._rt, self._value = rt, platform.env["CONNECT_FILE_ALLOWED_PATHS"]
        self._pools: list[str] = []

    def record(self, pool: str) -> None:
        self._pools.append(pool)  # first: however the next line ends, `forget` covers it
        self._rt.pools.set_label(pool, WORKER_PATHS_LABEL, self._value)

    def forget(self) -> None:
        """At stop: the pools' workers are gone, and with them what they allowed (best effort)."""
        for pool in self._pools:
            try:
                self._rt.pools.set_label(pool, WORKER_PATHS_LABEL, None)
            except Exception as exc:  # the store went first: the next platform start records anew
                log.warning("pool `%s`: its workers' directories not forgotten: %s", pool, exc)
        self._pools.clear()


class WarmPool:
    """The platform's warm pool: started beside Airflow (a thread: both take seconds), its idle
    timeout off, `local` made its standby; stopped with the platform if the platform started it
    (a warm pool of the same name already serving this store is used as it is, and left running)."""

    def __init__(
        self,
        rt: Runtime,
        connect_url: str,
        *,
        capacity: int | None = None,
        memory: str | None = None,
        lease: PlatformLease | None = None,
    ) -> None:
        from connect_core.runtime.spark.connect import DEFAULT_SERVER_MEMORY

        self._rt, self._connect_url, self._lease = rt, connect_url, lease
        # Every core of this machine: a task is mostly waiting on its databases, the server runs `local[*]`.
        self.capacity = capacity or max(1, os.cpu_count() or 1)
        self.memory = memory or DEFAULT_SERVER_MEMORY
        self.started = False  # by this platform: it stops it
        self.note = ""  # what happened, for the user
        self._thread = threading.Thread(target=self._start, name="warm-pool", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def wait(self) -> bool:
        """Wait for the start; whether the warm pool serves the platform (else `note` says why)."""
        self._thread.join()
        return self.started or self.note.startswith("using")

    def _start(self) -> None:
        from connect_core.runtime.execution.warm_pool import start_pool
        from connect_core.runtime.execution.worker_client import find_worker, fingerprint

        rt = self._rt
        # The platform's processes name the store by its URL; a shell's `connect run` may name the
        # embedded one by its home: the worker answers both.
        airflow_settings = rt.settings.model_copy(update={"database_url": SecretStr(self._connect_url)})
        marks = [fingerprint(rt.settings), fingerprint(airflow_settings)]
        try:
            if find_worker(rt.settings.home, marks[1], pool=WARM_POOL) is not None:
                self.note = f"using the running warm pool `{WARM_POOL}`"
            else:
                info = start_pool(
                    rt,
                    WARM_POOL,
                    capacity=self.capacity,
                    idle_timeout=0.0,  # the platform stops it
                    conf={"spark.driver.memory": self.memory},
                    also_serves=marks,
                )
                self.started = True
                if self._lease is not None:  # a `down` that has to kill the platform kills them too
                    self._lease.record("warm pool server", info.pid, group=True)
                    if info.worker_pid is not None:
                        self._lease.record("warm pool worker", info.worker_pid, group=True)
                self.note = (
                    f"warm pool `{WARM_POOL}`: up in {info.started_s + info.warmed_s:.0f} s, capacity "
                    f"{self.capacity}, heap {self.memory}"
                )
            if any(p.name == STANDBY_POOL for p in rt.pools.list(rt.settings.heartbeat_timeout)):
                rt.pools.set_standby(STANDBY_POOL, True)
        except Exception as exc:  # the platform runs all the same, on the classic pool
            self.note = f"no warm pool ({type(exc).__name__}: {exc}); tasks run on `{STANDBY_POOL}`"

    def stop(self) -> None:
        """Stop the pool if this platform started it (its worker lets running requests finish)."""
        from connect_core.runtime.execution.warm_pool import stop_pool

        if self._thread.ident is not None:  # started
            self._thread.join()
        if self.started:
            stop_pool(self._rt.settings, WARM_POOL)
            self.started = False
