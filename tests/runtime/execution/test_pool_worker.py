"""A warm pool's worker: `connect run` hands it the runs (no interpreter, imports or Spark start-up
of its own), it answers only its own user and metadata store, survives hostile requests, and stops
pool and itself when idle."""

from __future__ import annotations

import json
import os
import socket
import stat
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from connect_core.runtime.context import Runtime
from connect_core.runtime.execution.processes import pid_alive
from connect_core.runtime.execution.warm_pool import start_worker, stop_worker
from connect_core.runtime.execution.worker_client import (
    MAX_REQUEST_BYTES,
    WorkerGone,
    find_worker,
    fingerprint,
    ping,
    run_on_worker,
    worker_files,
)
from tests.conftest import file_pair
from tests.e2e.test_spark_submit import Cli

pytestmark = pytest.mark.spark_connect


@pytest.fixture
def worker(runtime: Runtime, spark_connect_url: str) -> Iterator[Path]:
    """Pool `warm` (the session's Spark Connect server) holds every task, and its worker runs."""
    runtime.pools.add("warm", spark_connect_url, capacity=2)
    runtime.pools.remove("local")
    start_worker(runtime.settings, "warm", spark_connect_url)
    yield worker_files(runtime.settings.home, "warm")[0]
    stop_worker(runtime.settings, "warm")


@pytest.fixture
def cli(runtime: Runtime, database_url: str, tmp_path: Path) -> Cli:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONNECT_")}
    env.update(
        CONNECT_DATABASE_URL=database_url,
        CONNECT_HOME=str(runtime.settings.home),
        CONNECT_FILE_ALLOWED_PATHS=str(tmp_path),
        SPARK_LOCAL_IP="127.0.0.1",
    )
    return Cli(env, tmp_path)


def _ask(path: Path, raw: bytes) -> dict:  # type: ignore[type-arg]
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(15)
        sock.connect(str(path))
        try:
            sock.sendall(raw)
        except (BrokenPipeError, ConnectionResetError):  # a request too long: answered before it ended
            pass
        line = sock.makefile("rb").readline()
    return json.loads(line)  # type: ignore[no-any-return]


def test_connect_run_hands_a_sync_to_the_warm_pool_worker(
    runtime: Runtime, worker: Path, cli: Cli, tmp_path: Path, spark_connect_url: str
) -> None:
    source, sink = file_pair(runtime, tmp_path)
    source.write_text("one\ntwo\n")

    proc = cli("run", "fileSourceConnector", "fileSinkConnector", "--output", "json")
    runs = json.loads(proc.stdout)
    assert [(r["connector"], r["state"], r["rows"], r["pool"]) for r in runs] == [
        ("fileSourceConnector", "SUCCEEDED", 2, "warm"),
        ("fileSinkConnector", "SUCCEEDED", 2, "warm"),
    ]
    assert sink.read_text() == "one\ntwo\n"
    log = worker_files(runtime.settings.home, "warm")[2].read_text()
    assert "runs 'fileSourceConnector-0', 'fileSinkConnector-0'" in log

    with source.open("a") as f:  # the next sync carries on from the committed position
        f.write("three\n")
    proc = cli("run", "fileSourceConnector", "fileSinkConnector")
    assert "SUCCEEDED" in proc.stdout and sink.read_text() == "one\ntwo\nthree\n"

    # an explicit master is no pool: nothing fences the run, and the token shows nowhere
    proc = cli("run", "fileSourceConnector", "--master", spark_connect_url, "--output", "json")
    (run,) = json.loads(proc.stdout)
    assert run["state"] == "SUCCEEDED" and "token=****" in run["pool"]
    assert spark_connect_url.split("token=")[1] not in proc.stdout + proc.stderr

    missing = cli("run", "noSuchConnector", check=False)  # the worker's answer is the CLI's own error
    assert missing.returncode == 4 and "noSuchConnector" in missing.stderr and "Traceback" not in missing.stderr


def test_the_worker_refuses_hostile_or_foreign_requests_and_keeps_serving(
    runtime: Runtime, worker: Path, tmp_path: Path
) -> None:
    assert stat.S_IMODE(worker.stat().st_mode) == 0o600  # no other user can connect
    mark = fingerprint(runtime.settings)
    hostile = [
        b"x" * (MAX_REQUEST_BYTES + 10) + b"\n",
        b"not json\n",
        b"[1, 2]\n",
        b'{"op": "shell", "cmd": "id"}\n',
        json.dumps({"op": "run", "fingerprint": mark, "names": "fileSourceConnector"}).encode() + b"\n",
        json.dumps({"op": "run", "fingerprint": mark, "names": ["a"] * 1001}).encode() + b"\n",
        json.dumps({"op": "run", "fingerprint": mark, "names": ["a"], "task": "0; drop"}).encode() + b"\n",
        json.dumps({"op": "run", "fingerprint": "another store", "names": ["a"]}).encode() + b"\n",
        json.dumps({"op": "run", "fingerprint": mark, "names": ["a"], "tasks": [["a", 0], ["a", 0]]}).encode() + b"\n",
        b"[" * 200_000 + b"\n",  # nested past the JSON parser's depth
    ]
    for raw in hostile:
        answer = _ask(worker, raw)
        assert answer["code"] == "refused", (raw[:60], answer)
    assert run_on_worker(worker, "another store", ["fileSourceConnector"]) is None  # the caller runs it itself
    file_pair(runtime, tmp_path)  # a run on a classic master is the caller's own spark-submit
    assert run_on_worker(worker, mark, ["fileSourceConnector"], master="local[1]") is None
    assert runtime.connectors.last_runs("fileSourceConnector", limit=1) == []
    assert find_worker(runtime.settings.home, "another store") is None
    assert find_worker(runtime.settings.home, mark) == worker

    # A task that does not exist is not found, and moves nothing (no rebalance over stale heartbeats);
    # a name that is no task is never written to the log as it is (no forged log lines).
    before = runtime.pools.assignment()
    forged = "x\n2026-01-01 00:00:00 ERROR __main__: FORGED"
    request = {"op": "run", "fingerprint": mark, "names": ["fileSourceConnector", forged]}
    answer = _ask(worker, json.dumps({**request, "tasks": [["fileSourceConnector", 7]]}).encode() + b"\n")
    assert answer["code"] == "not_found" and "fileSourceConnector-7" in answer["error"]
    assert runtime.pools.assignment() == before
    assert "FORGED" not in worker_files(runtime.settings.home, "warm")[2].read_text()
    # An explicit master that is no registered pool's: refused, the caller runs it (as its own client).
    assert run_on_worker(worker, mark, ["fileSourceConnector"], master="sc://127.0.0.1:1/;token=t") is None
    assert runtime.connectors.last_runs("fileSourceConnector", limit=1) == []

    # A client trickling its request a byte at a time holds its slot for the read deadline, no longer.
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as slow:
        slow.connect(str(worker))
        started, closed = time.monotonic(), False
        for byte in b'{"op": "ping"' * 4:
            try:
                slow.sendall(bytes([byte]))
            except OSError:
                closed = True
                break
            time.sleep(1.0)
            slow.settimeout(0.01)
            try:
                if slow.recv(4096) == b"":
                    closed = True
                    break
            except TimeoutError:
                pass
            except OSError:
                closed = True
                break
        assert closed and time.monotonic() - started < 20, "a trickling client kept its connection"

    # a client that connects and says nothing holds no thread for long, and blocks nobody meanwhile
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as silent:
        silent.connect(str(worker))
        assert ping(worker) is not None


def test_a_worker_that_dies_mid_request_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "dying.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(1)

    def take_and_die() -> None:
        conn, _ = server.accept()
        conn.makefile("rb").readline()
        conn.sendall(b'{"log": "run 1 started", "level": 20}\n')
        conn.close()

    threading.Thread(target=take_and_die, daemon=True).start()
    lines: list[str] = []
    with pytest.raises(WorkerGone, match="stopped answering mid-request"):
        run_on_worker(path, "mark", ["src"], on_log=lambda level, line: lines.append(line))
    assert lines == ["run 1 started"]
    server.close()


def test_an_idle_worker_stops_its_pool_and_itself(runtime: Runtime, spark_connect_url: str) -> None:
    # Pool `idle` has no server of its own here (the session's server must stay up): the worker
    # stops what `connect pools start idle` would have started, i.e. nothing, and exits.
    pid = start_worker(runtime.settings, "idle", spark_connect_url, idle_timeout=2.0)
    sock, pid_file, _ = worker_files(runtime.settings.home, "idle")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and sock.exists():
        time.sleep(0.5)
    assert not sock.exists(), "the idle worker did not stop"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and pid_alive(pid):
        time.sleep(0.2)
    assert not pid_alive(pid)
    assert stop_worker(runtime.settings, "idle") is False and not pid_file.exists()


def test_a_metadata_store_is_the_same_however_its_url_is_spelled(tmp_path: Path) -> None:
    """Airflow's processes get the URL as SQLAlchemy spells it; the worker, as the user wrote it."""
    from connect_core.runtime.settings import Settings

    def mark(url: str | None) -> str:
        return fingerprint(Settings(database_url=url, home=tmp_path))

    same = mark("postgresql://connect:pw@DB.local:5432/meta")
    assert mark("postgresql+psycopg2://connect:other-pw@db.local/meta") == same
    assert same not in {
        mark("postgresql://connect@db.local:5432/other"),
        mark("postgresql://x@db.local/meta"),
        mark(None),
    }
    assert "pw" not in same


def test_a_warm_pool_never_takes_over_a_classic_pools_name(runtime: Runtime) -> None:
    from connect_core.runtime.execution.warm_pool import start_pool
    from connect_core.sdk.errors import ConfigError

    with pytest.raises(ConfigError, match="`local` is a classic pool"):
        start_pool(runtime, "local")
    assert next(p for p in runtime.pools.list(60.0) if p.name == "local").master.startswith("local")
    assert not (runtime.settings.home / "pools" / "local.json").exists()  # no server was started
