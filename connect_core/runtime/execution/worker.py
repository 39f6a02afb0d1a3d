"""A warm pool's worker: a long-running Python process beside the pool's Spark Connect server that
runs tasks for `connect run` and the Airflow operator, as a Kafka Connect worker is a warm process.

With the server warm, a small sync's time is mostly the client's own start: a Python interpreter,
the imports of pyspark's Connect client, pandas, pyarrow, gRPC and SQLAlchemy, and a metadata
connection (measured: 1.5 s of a 3.2 s `connect run src sink` of 10,000 rows). The worker pays
them once. It runs each request through the same launcher as `connect run` (`launcher`), each run in a
Spark Connect session of its own, in a thread per request; what a run logs goes back to the caller.
It runs only tasks placed on Spark Connect pools: a request with a task on a classic pool is refused
before anything runs, and the caller makes its spark-submit itself, in its own environment.

It listens on a Unix socket `CONNECT_HOME/pools/<pool>.sock` (mode 0600, in a 0700 folder) and
answers only processes of its own user (the socket's peer credentials), for the metadata store it
was started on. After `idle_timeout` seconds without a run on its pool, from it or from any other
client of the server, it stops the server and itself (`connect pools start … --idle-timeout`).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import socket
import struct
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from connect_core.runtime.execution import processes
from connect_core.runtime.execution.warm_pool import ALSO_SERVES_ENV
from connect_core.runtime.execution.worker_client import (
    KEEPALIVE_S,
    MAX_REQUEST_BYTES,
    fingerprint,
    worker_files,
)
from connect_core.runtime.security import mask_text
from connect_core.runtime.settings import Settings
from connect_core.sdk.errors import ConfigError, ConnectError, NotFoundError

if TYPE_CHECKING:
    from connect_core.runtime.execution.launcher import Launcher

__all__ = ["MAX_NAMES", "main"]

log = logging.getLogger(__name__)

#: Connectors in one request, at most.
MAX_NAMES = 1000
_MAX_CONNECTIONS = 32
_READ_TIMEOUT_S = 10.0
_SEND_TIMEOUT_S = 30.0


class _Forward(logging.Handler):
    """Sends the log records of a request's thread back to its caller, masked."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        self._senders: dict[int, Any] = {}
        self._lock = threading.Lock()

    def createLock(self) -> None:
        # No handler-wide lock: senders are per thread, and one caller slow to read must not stall
        # every thread's logging (Handler.acquire skips a None lock).
        self.lock = None

    def attach(self, send: Any) -> None:
        with self._lock:
            self._senders[threading.get_ident()] = send

    def detach(self) -> None:
        with self._lock:
            self._senders.pop(threading.get_ident(), None)

    def emit(self, record: logging.LogRecord) -> None:
        send = self._senders.get(threading.get_ident())
        if send is not None:
            send({"log": mask_text(self.format(record)), "level": record.levelno})


class Worker:
    def __init__(self, settings: Settings, pool: str, idle_timeout: float, also_serves: Sequence[str] = ()) -> None:
        from connect_core.runtime.context import Runtime

        self.settings, self.pool, self.idle_timeout = settings, pool, idle_timeout
        self.runtime = Runtime.open(settings, upgrade=False)
        self.fingerprint = fingerprint(settings)
        self.also_serves = sorted(set(also_serves) - {self.fingerprint})
        self.forward = _Forward()
        logging.getLogger().addHandler(self.forward)
        self.busy = threading.BoundedSemaphore(_MAX_CONNECTIONS)
        self.in_flight = 0
        self.last_activity = time.monotonic()
        self.last_run_id = self._newest_run_id()
        self._lock = threading.Lock()
        self.stopping = threading.Event()

    # -- serving --------------------------------------------------------------------------------

    def serve(self, path: Path) -> None:
        path.unlink(missing_ok=True)
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old_umask = os.umask(0o177)  # the socket is created 0600: no other user may connect
        try:
            server.bind(str(path))
        finally:
            os.umask(old_umask)
        server.listen(_MAX_CONNECTIONS)
        server.settimeout(min(30.0, max(1.0, self.idle_timeout / 4)) if self.idle_timeout else 30.0)
        log.info("worker of pool `%s` listening on %s (pid %d)", self.pool, path, os.getpid())
        every = float(server.gettimeout() or 30.0)
        next_check = time.monotonic() + every
        try:
            while not self.stopping.is_set():
                if time.monotonic() >= next_check:  # on a clock, however often callers ping
                    next_check = time.monotonic() + every
                    if self._idle() and self._stop_idle_pool():
                        return
                try:
                    conn, _ = server.accept()
                except TimeoutError:
                    continue
                except OSError as exc:
                    if self.stopping.is_set():
                        return
                    log.warning("accept failed (%s); retrying", exc)  # out of file descriptors, say
                    time.sleep(1.0)
                    continue
                if not self.busy.acquire(blocking=False):
                    _answer(conn, {"error": "the pool worker is at its connection limit", "code": "refused"})
                    conn.close()
                    continue
                try:
                    threading.Thread(target=self._handle, args=(conn,), daemon=True).start()
                except RuntimeError:  # no thread to be had
                    self.busy.release()
                    _answer(conn, {"error": "the pool worker cannot take more requests now", "code": "refused"})
                    conn.close()
        finally:
            server.close()
            path.unlink(missing_ok=True)
            self._drain()
            self.runtime.close()

    def _handle(self, conn: socket.socket) -> None:
        try:
            with conn:
                try:
                    self._serve_one(conn)
                except _BadRequest as exc:
                    _answer(conn, {"error": str(exc), "code": "refused"})
        except (TimeoutError, ConnectionError):  # a caller that said nothing, or left
            pass
        except Exception:  # one request's failure never stops the worker
            log.exception("pool worker request failed")
        finally:
            self.busy.release()

    def _serve_one(self, conn: socket.socket) -> None:
        if not _same_user(conn):
            _answer(conn, {"error": "only the worker's own user may use it", "code": "refused"})
            return
        request = _read_request(conn, time.monotonic() + _READ_TIMEOUT_S)
        conn.settimeout(None)
        if request.get("op") == "ping":
            _answer(
                conn,
                {
                    "ok": True,
                    "pool": self.pool,
                    "fingerprint": self.fingerprint,
                    "also_serves": self.also_serves,
                    "pid": os.getpid(),
                },
            )
        elif request.get("op") == "run":
            self._run(conn, request)
        else:
            _answer(conn, {"error": "unknown op", "code": "refused"})

    def _run(self, conn: socket.socket, request: dict[str, Any]) -> None:
        names, task, tasks, master = _run_arguments(request)
        if request.get("fingerprint") not in (self.fingerprint, *self.also_serves):
            _answer(conn, {"error": "the worker serves another metadata store", "code": "refused"})
            return
        with self._lock:  # the idle stop sets `stopping` and reads `in_flight` under the same lock
            if self.stopping.is_set():
                _answer(conn, {"error": "the worker is stopping", "code": "refused"})
                return
            self.in_flight += 1
        from connect_core.runtime.execution.launcher import Where, plan_runs, plan_tasks

        gone, done_event = threading.Event(), threading.Event()
        sending = threading.Lock()
        conn.settimeout(_SEND_TIMEOUT_S)  # a caller that stops reading never blocks the worker for long

        def send(message: dict[str, Any]) -> None:
            if not gone.is_set():
                try:
                    with sending:
                        conn.sendall(json.dumps(message, default=str).encode() + b"\n")
                except OSError:  # the caller left (say Ctrl-C) or stopped reading: the runs go on and commit
                    gone.set()

        def keep_alive() -> None:
            while not done_event.wait(KEEPALIVE_S):
                send({"alive": True})

        try:
            if master is not None:
                self._check_master(master)
            planned = plan_tasks(self.runtime, tasks, master) if tasks else plan_runs(self.runtime, names, master, task)
            launcher = self._launcher()
            classic = [
                f"{r.connector}-{r.task_id}" for r in planned if launcher.where(r, master)[0] is not Where.CLIENT
            ]
            if classic:  # a spark-submit is the caller's own to make, with its own environment
                send({"error": f"tasks on classic pools: {', '.join(classic)}", "code": "refused"})
                return
            send({"accepted": True})
            self.forward.attach(send)
            threading.Thread(target=keep_alive, daemon=True).start()
            log.info(
                "worker %d of pool `%s` runs %s",
                os.getpid(),
                self.pool,
                ", ".join(repr(f"{r.connector}-{r.task_id}") for r in planned),
            )
            launched = launcher.launch(planned, master)
            send({"results": [dict(o.record) for o in launched.outcomes], "groups": launched.groups})
        except _Refused as exc:
            send({"error": str(exc), "code": "refused"})
        except ConnectError as exc:
            code = "config" if isinstance(exc, ConfigError) else "not_found" if isinstance(exc, NotFoundError) else ""
            send({"error": mask_text(str(exc)), "code": code or "error"})
        except Exception as exc:
            log.exception("run request failed")
            send({"error": mask_text(f"{type(exc).__name__}: {exc}"), "code": "error"})
        finally:
            done_event.set()
            self.forward.detach()
            with self._lock:
                self.in_flight -= 1
                self.last_activity = time.monotonic()

    def _check_master(self, master: str) -> None:
        """An explicit master must be a registered Spark Connect pool's (then the runs are fenced by
        that pool's assignments like any other), never an arbitrary server the caller names."""
        from connect_core.runtime.spark.connect import is_connect_master

        pools = self.runtime.pools.list(self.settings.heartbeat_timeout)
        if not is_connect_master(master) or master not in {p.master for p in pools}:
            raise _Refused("`master` must be the Spark Connect master of a registered pool")

    def _launcher(self) -> Launcher:
        """This worker's launcher: it runs what it takes in its own process, asking no worker (it is one)."""
        from connect_core.runtime.execution.launcher import Launcher

        return Launcher(self.runtime, ask_workers=False)

    # -- idleness -------------------------------------------------------------------------------

    def _newest_run_id(self) -> int:
        from sqlalchemy import func, select

        from connect_core.runtime.store.models import TaskRunRow

        with self.runtime.engine.connect() as conn:
            return int(conn.execute(select(func.coalesce(func.max(TaskRunRow.id), 0))).scalar_one())

    def _ran_elsewhere(self) -> bool:
        """Whether a run on this pool started since the last look, from any client (an Airflow
        worker on another machine reaches the server directly). Reads only the runs since then."""
        from sqlalchemy import func, select

        from connect_core.runtime.store.models import TaskRunRow

        with self.runtime.engine.connect() as conn:
            newest, here = conn.execute(
                select(func.max(TaskRunRow.id), func.bool_or(TaskRunRow.pool == self.pool)).where(
                    TaskRunRow.id > self.last_run_id
                )
            ).one()
        if newest is not None:
            self.last_run_id = int(newest)
        return bool(here)

    def _idle(self) -> bool:
        if not self.idle_timeout:
            return False
        try:
            if self._ran_elsewhere():
                self.last_activity = time.monotonic()
        except Exception:  # the metadata store is away: not a reason to stop a pool
            log.warning("could not read the pool's recent runs", exc_info=True)
            self.last_activity = time.monotonic()
        with self._lock:
            return self.in_flight == 0 and time.monotonic() - self.last_activity >= self.idle_timeout

    def _stop_idle_pool(self) -> bool:
        """Stop the idle pool's server, unless a `connect pools start` or `stop` of it runs now;
        whether it stopped (then this worker ends too)."""
        from connect_core.runtime.execution.warm_pool import pool_lock, stop_server

        with processes.locked(pool_lock(self.settings, self.pool), wait=False) as mine:
            if not mine:
                return False
            with self._lock:
                self.stopping.set()  # no request starts on a server being stopped
                if self.in_flight:
                    self.stopping.clear()
                    return False
            log.info("pool `%s` idle for %.0f s: stopping its server", self.pool, self.idle_timeout)
            stop_server(self.settings, self.pool)
        return True

    def _drain(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while self.in_flight and time.monotonic() < deadline:
            time.sleep(0.2)


class _BadRequest(Exception):
    pass


class _Refused(Exception):
    """A well-formed request this worker will not run."""


class _Stop(BaseException):
    """SIGTERM, raised in the main thread."""


def _read_request(conn: socket.socket, deadline: float) -> dict[str, Any]:
    """One JSON line, whole by `deadline` (a caller trickling a byte at a time holds a connection
    slot for at most that long, however slowly it sends)."""
    line = bytearray()
    while not line.endswith(b"\n"):
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the request did not arrive in time")
        conn.settimeout(left)
        chunk = conn.recv(min(65536, MAX_REQUEST_BYTES + 1 - len(line)))
        if not chunk:
            break
        line += chunk
        if len(line) > MAX_REQUEST_BYTES:
            break
    if len(line) > MAX_REQUEST_BYTES or not line.endswith(b"\n") or line.count(b"\n") > 1:
        raise _BadRequest(f"a request is one JSON line of at most {MAX_REQUEST_BYTES} bytes")
    try:
        request = json.loads(line)
    except (ValueError, RecursionError) as exc:  # RecursionError: `[[[[…` nested past the parser's depth
        raise _BadRequest("a request is a JSON object") from exc
    if not isinstance(request, dict):
        raise _BadRequest("a request is a JSON object")
    return request


def _run_arguments(
    request: dict[str, Any],
) -> tuple[list[str], int | None, list[tuple[str, int]] | None, str | None]:
    names, task, master = request.get("names"), request.get("task"), request.get("master")
    if not isinstance(names, list) or not 0 < len(names) <= MAX_NAMES or not all(isinstance(n, str) for n in names):
        raise _BadRequest(f"`names` is a list of 1 to {MAX_NAMES} connector names")
    if task is not None and (not isinstance(task, int) or isinstance(task, bool) or task < 0):
        raise _BadRequest("`task` is a task number or null")
    if master is not None and not isinstance(master, str):
        raise _BadRequest("`master` is a Spark master or null")
    return names, task, _tasks_argument(request.get("tasks"), names), master


def _tasks_argument(tasks: Any, names: list[str]) -> list[tuple[str, int]] | None:
    """`tasks`, when given: 1 to MAX_NAMES pairs [connector of `names`, task number], run in that order."""
    if tasks is None:
        return None
    if not isinstance(tasks, list) or not 0 < len(tasks) <= MAX_NAMES:
        raise _BadRequest(f"`tasks` is a list of 1 to {MAX_NAMES} [connector, task] pairs")
    pairs = []
    for pair in tasks:
        if (
            not isinstance(pair, list)
            or len(pair) != 2
            or pair[0] not in names
            or not isinstance(pair[1], int)
            or isinstance(pair[1], bool)
            or pair[1] < 0
        ):
            raise _BadRequest("`tasks` holds [connector, task] pairs of the connectors in `names`")
        pairs.append((str(pair[0]), int(pair[1])))
    if len(set(pairs)) != len(pairs):
        raise _BadRequest("`tasks` names each [connector, task] pair once")
    return pairs


def _answer(conn: socket.socket, message: dict[str, Any]) -> None:
    try:
        conn.sendall(json.dumps(message).encode() + b"\n")
    except OSError:
        pass


def _same_user(conn: socket.socket) -> bool:
    """Whether the peer runs as this process's user (SO_PEERCRED: pid, uid, gid)."""
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _, uid, _ = struct.unpack("3i", creds)
    return uid == os.getuid()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="connect-pool-worker")
    parser.add_argument("--pool", required=True)
    parser.add_argument("--idle-timeout", type=float, default=0.0, help="seconds; 0 = never")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from connect_core.runtime.security import install_log_masking, masker
    from connect_core.runtime.spark.connect import REMOTE_ENV

    install_log_masking()
    for noisy in ("py4j", "alembic"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    master = os.environ.pop(REMOTE_ENV, "")
    if not master:
        parser.error(f"{REMOTE_ENV} names the pool's Spark Connect server")
    from connect_core.runtime.spark.connect import token_of

    if token := token_of(master):
        masker.add(token)
    settings = Settings()
    if settings.database_url is not None:
        masker.add_config({"database_url": settings.database_url.get_secret_value()})
    also_serves = [f for f in os.environ.pop(ALSO_SERVES_ENV, "").split(",") if f]
    worker = Worker(settings, args.pool, args.idle_timeout, also_serves)
    _warm_client(master)

    def stop(*_: object) -> None:
        worker.stopping.set()
        raise _Stop  # out of accept(): `serve` lets running requests finish, then ends

    signal.signal(signal.SIGTERM, stop)
    sock, pid_file, _ = worker_files(settings.home, args.pool)
    try:
        worker.serve(sock)
    except _Stop:
        log.info("worker of pool `%s` stopped", args.pool)
    finally:
        if processes.running(pid_file) == os.getpid():  # gone by itself (idle): no stale file left
            pid_file.unlink(missing_ok=True)
    return 0


def _warm_client(master: str) -> None:
    """Import the Connect client and open (and close) a session now, not in the first run."""
    from pyspark.sql import SparkSession

    SparkSession.builder.remote(master).create().stop()


if __name__ == "__main__":
    sys.exit(main())
