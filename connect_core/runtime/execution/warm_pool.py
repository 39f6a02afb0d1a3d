"""A warm pool on this machine, started and stopped as one (`connect pools start`, the platform's
warm pool): its Spark Connect server and its worker (`worker.py`), in that order, and stopped in the
other (the worker's running requests finish first).

The server is a spark-submit of Spark's `SparkConnectServer` (its jar ships in the pyspark wheel),
bound to 127.0.0.1 unless told otherwise, with a random token clients must present, the JDBC
drivers on its classpath, Python workers of this interpreter, and the runner's Spark settings (UTC,
no UI, the JVM class-data archive). Its process id, port and log live under
`CONNECT_HOME/pools/<name>.*`; the token reaches it by environment, never by argument.

Start-up waits for the server to answer and warms it with the work a first run does (an Arrow
round trip through a Python worker), so the first task does not pay for it. The worker is started
as a process by its module path (`WORKER_MODULE`), never imported here: it imports this module, to
stop its pool's server when the pool has been idle.

This lives beside the worker, not in `cluster/`: starting a pool waits until its worker answers
(`worker_client.ping`), and the worker stops its idle pool (`pool_lock`, `stop_server`), so with
the lifecycle in `cluster/`, `cluster` and `execution` would import each other.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from connect_core.runtime.cluster.pools import check_pool_name
from connect_core.runtime.execution import processes
from connect_core.runtime.execution.submit import security_env
from connect_core.runtime.execution.worker_client import ping, worker_files
from connect_core.runtime.security import mask_text
from connect_core.runtime.settings import Settings
from connect_core.runtime.spark.conf import spark_conf, split_secret_conf
from connect_core.runtime.spark.conf_policy import ENFORCED_CONF, SparkConfPolicy, check_master
from connect_core.runtime.spark.connect import REMOTE_ENV, is_connect_master, public_master, reachable
from connect_core.runtime.spark.install import spark_env, spark_submit_path
from connect_core.sdk.errors import ConfigError, FatalError

if TYPE_CHECKING:
    from connect_core.runtime.context import Runtime

__all__ = [
    "ALSO_SERVES_ENV",
    "ServerInfo",
    "pool_folder",
    "pool_lock",
    "start_pool",
    "start_server",
    "start_worker",
    "stop_pool",
    "stop_server",
    "stop_worker",
]

log = logging.getLogger(__name__)

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
DRIVER_JARS = ("/usr/share/java/postgresql.jar", "/usr/share/java/mariadb-java-client.jar")
START_TIMEOUT_S = 180.0
#: The pool's worker, run as `python -m` (not imported: it imports this module).
WORKER_MODULE = "connect_core.runtime.execution.worker"
#: The longest path a Unix socket can have (sun_path, with its terminating NUL).
_MAX_SOCKET_PATH = 107
_WORKER_START_TIMEOUT_S = 90.0
#: Other fingerprints of the worker's own metadata store (the platform's worker runs on the embedded
#: store's URL; a `connect run` in a shell names that store by its home), comma-separated hashes.
ALSO_SERVES_ENV = "CONNECT_WORKER_ALSO_SERVES"


@dataclass(frozen=True)
class ServerInfo:
    name: str
    pid: int
    port: int
    master: str  # sc://localhost:port/;token=… (holds the token)
    log_path: Path
    started_s: float
    warmed_s: float
    worker_pid: int | None = None  # the pool's worker, when `start_pool` started one


def pool_folder(settings: Settings, name: str) -> Path:
    """The folder of the pool servers' files (`CONNECT_HOME/pools`), `name` checked first: it names
    files there, so it can hold no path."""
    check_pool_name(name)
    folder = Path(settings.home) / "pools"
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    # A folder made before (or by someone else) must be this user's alone: its sockets are trusted.
    found = folder.stat()
    if found.st_uid != os.getuid():
        raise ConfigError(f"`{folder}` belongs to another user: the pools' sockets and files cannot be kept there")
    if found.st_mode & 0o077:
        folder.chmod(0o700)
    return folder


def _free_port(bind: str) -> int:
    with socket.socket() as s:
        s.bind((bind, 0))
        return int(s.getsockname()[1])


def start_server(
    settings: Settings,
    name: str,
    *,
    spark_master: str = "local[*]",
    port: int | None = None,
    bind: str = "127.0.0.1",
    conf: dict[str, str] | None = None,
    env: dict[str, str] | None = None,
) -> ServerInfo:
    """Start the pool's server (an error if one already runs), wait until it answers, warm it;
    `env` adds to its environment (say a PYTHONPATH its Python workers need)."""
    folder = pool_folder(settings, name)
    pid_file = folder / f"{name}.json"
    if processes.running(pid_file) is not None:
        raise ConfigError(f"the Spark Connect server of pool `{name}` is already running (`connect pools stop {name}`)")
    # The operator's conf, checked as a registered pool's is (refused outright: nobody to warn later)
    check_master(spark_master, f"pool `{name}`")
    SparkConfPolicy.from_settings(settings).check(conf or {}, f"pool `{name}`")
    port = port or _free_port(bind)
    token = secrets.token_urlsafe(32)
    jars = [j for j in DRIVER_JARS if Path(j).exists()]
    settings_conf = {
        **spark_conf(conf, settings),
        "spark.connect.grpc.binding.address": bind,
        "spark.connect.grpc.binding.port": str(port),
        "spark.pyspark.python": sys.executable,
        # Python workers fork from a daemon that has imported what they use (`_warm_daemon`)
        "spark.python.daemon.module": "connect_core.runtime.execution._warm_daemon",
        **ENFORCED_CONF,  # the runtime's safety settings, last (the server's sessions start with them)
    }
    public, secret = split_secret_conf(settings_conf)
    if secret:
        raise ConfigError(
            f"secret Spark settings {sorted(secret)} are not passed to a pool's server on its command line"
        )
    cmd = [
        spark_submit_path(settings),
        "--class",
        SERVER_CLASS,
        "--master",
        spark_master,
        "--name",
        f"connect-pool:{name}",
    ]
    for key, value in public.items():
        cmd += ["--conf", f"{key}={value}"]
    if jars:
        cmd += ["--jars", ",".join(jars)]
    cmd.append("spark-internal")
    proc_env = {
        **os.environ,
        **spark_env(settings),
        "SPARK_CONNECT_AUTHENTICATE_TOKEN": token,
        "PYSPARK_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": os.environ.get("SPARK_LOCAL_IP", "127.0.0.1"),
        **(env or {}),
    }
    for client_mark in ("SPARK_CONNECT_MODE", "SPARK_CONNECT_MODE_ENABLED", "SPARK_REMOTE"):
        proc_env.pop(client_mark, None)  # the server itself is a classic Spark application
    log_path = folder / f"{name}.log"
    started = time.monotonic()
    with open(log_path, "ab") as out:
        proc = subprocess.Popen(cmd, env=proc_env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    host = "localhost" if bind in ("127.0.0.1", "localhost") else bind
    master = f"sc://{host}:{port}/;token={token}"
    processes.write_pid_file(pid_file, proc.pid, port=port, bind=bind)
    try:
        _wait(proc, master, log_path)
        started_s = time.monotonic() - started
        _warm(master)
    except BaseException:
        processes.terminate(proc.pid)
        pid_file.unlink(missing_ok=True)
        raise
    info = ServerInfo(name, proc.pid, port, master, log_path, started_s, time.monotonic() - started - started_s)
    log.info(
        "Spark Connect server of pool `%s` on port %d: up in %.1f s, warm in %.1f s",
        name,
        port,
        started_s,
        info.warmed_s,
    )
    return info


def start_pool(
    rt: Runtime,
    name: str,
    *,
    capacity: int = 2,
    idle_timeout: float = 0.0,
    also_serves: Sequence[str] = (),
    **server: Any,
) -> ServerInfo:
    """A warm pool: its server (`start_server(**server)`), registered as pool `name`, and its
    worker (`start_worker`, answering callers of `also_serves` fingerprints too), which stops
    both after `idle_timeout` seconds without a run."""
    existing = next((p for p in rt.pools.list(rt.settings.heartbeat_timeout) if p.name == name), None)
    if existing is not None and not is_connect_master(existing.master):
        raise ConfigError(
            f"pool `{name}` is a classic pool ({public_master(existing.master)}); a warm pool needs a name of its own "
            f"(or `connect pools remove {name}` first)"
        )
    with processes.locked(pool_lock(rt.settings, name)):
        info = start_server(rt.settings, name, **server)
        try:
            rt.pools.add(name, info.master, capacity=capacity)
            worker_pid = start_worker(
                rt.settings,
                name,
                info.master,
                idle_timeout=idle_timeout,
                env=server.get("env"),
                also_serves=also_serves,
            )
        except BaseException:
            _stop_both(rt.settings, name)
            raise
    return replace(info, worker_pid=worker_pid)


def pool_lock(settings: Settings, name: str) -> Path:
    """The file whose lock a pool's start and stop hold (`+` is in no pool name: no clash)."""
    return pool_folder(settings, name) / f"{name}+lock"


def stop_pool(settings: Settings, name: str) -> bool:
    """Stop the pool's worker (its running requests finish first), then its server; whether the
    server was running."""
    with processes.locked(pool_lock(settings, name)):
        return _stop_both(settings, name)


def _stop_both(settings: Settings, name: str) -> bool:
    stop_worker(settings, name)
    return stop_server(settings, name)


def _wait(proc: subprocess.Popen[bytes], master: str, log_path: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = log_path.read_text(errors="replace").splitlines()[-15:]
            raise FatalError(f"the Spark Connect server exited with {proc.returncode} at start-up:\n" + "\n".join(tail))
        if reachable(master, timeout=1.0) is None:
            return
        time.sleep(0.5)
    raise FatalError(f"the Spark Connect server did not answer within {START_TIMEOUT_S:.0f} s (log: {log_path})")


def _warm(master: str) -> None:
    """What a first run does, once: a session, and an Arrow job over every core, which starts the
    Python daemon (it imports what a run's workers use, `_warm_daemon`) and a worker per core."""
    from pyspark.sql import SparkSession

    from connect_core.runtime.spark.session import default_parallelism

    spark = SparkSession.builder.remote(master).create()
    try:
        cores = default_parallelism(spark)

        def same(batches: Any) -> Any:
            yield from batches

        spark.range(0, cores, 1, cores).mapInArrow(same, "id long").agg({"id": "sum"}).collect()
    finally:
        spark.stop()


def stop_server(settings: Settings, name: str, timeout: float = 30.0) -> bool:
    """Stop the pool's server if this machine runs it; whether one was running."""
    return processes.stop(pool_folder(settings, name) / f"{name}.json", timeout)


def start_worker(
    settings: Settings,
    pool: str,
    master: str,
    *,
    idle_timeout: float = 0.0,
    env: dict[str, str] | None = None,
    also_serves: Sequence[str] = (),
) -> int:
    """Start the pool's worker (detached, its output in `pools/<pool>.worker.log`) and wait until it
    answers; its pid. The server's URL, which holds its token, goes by environment. `also_serves`:
    other fingerprints of the same metadata store (`worker_client.fingerprint`), whose callers it
    answers too."""
    pool_folder(settings, pool)  # the name checked (it names files), the folder made
    sock, pid_file, log_path = worker_files(settings.home, pool)
    if len(str(sock)) > _MAX_SOCKET_PATH:
        raise ConfigError(
            f"the worker's socket path {sock} is longer than a Unix socket's {_MAX_SOCKET_PATH} bytes: "
            "use a shorter CONNECT_HOME or pool name"
        )
    stop_worker(settings, pool)
    proc_env = {
        **os.environ,
        **security_env(settings),
        "CONNECT_HOME": str(settings.home),
        REMOTE_ENV: master,
        **(env or {}),
        ALSO_SERVES_ENV: ",".join(also_serves),
    }
    if settings.database_url is not None:
        proc_env["CONNECT_DATABASE_URL"] = settings.database_url.get_secret_value()
    cmd = [sys.executable, "-m", WORKER_MODULE, "--pool", pool]
    cmd += ["--idle-timeout", str(idle_timeout)]
    with open(log_path, "ab") as out:
        proc = subprocess.Popen(cmd, env=proc_env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    processes.write_pid_file(pid_file, proc.pid)
    deadline = time.monotonic() + _WORKER_START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = mask_text("\n".join(log_path.read_text(errors="replace").splitlines()[-15:]))
            raise ConfigError(f"the worker of pool `{pool}` exited with {proc.returncode} at start-up:\n{tail}")
        if sock.is_socket() and ping(sock) is not None:
            return proc.pid
        time.sleep(0.2)
    stop_worker(settings, pool)
    raise ConfigError(
        f"the worker of pool `{pool}` did not answer within {_WORKER_START_TIMEOUT_S:.0f} s (log: {log_path})"
    )


def stop_worker(settings: Settings, pool: str, timeout: float = 35.0) -> bool:
    """Stop the pool's worker if one runs (it lets running requests finish first); whether one did."""
    pool_folder(settings, pool)
    sock, pid_file, _ = worker_files(settings.home, pool)
    stopped = processes.stop(pid_file, timeout)
    sock.unlink(missing_ok=True)
    return stopped
