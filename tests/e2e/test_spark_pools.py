"""Two real Spark standalone clusters as two pools: tasks spread, one cluster dies, its tasks move.

Every process (masters, workers, drivers, executors) is bound to 127.0.0.1.
Tasks run through real spark-submit on the master of the pool they are
assigned to; the rebalance is decided by the rebalance sensor's own trigger
(`PoolChangeTrigger.run`, as the Airflow triggerer runs it) probing the
masters' JSON endpoints.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from sqlalchemy import func, select

from connect_core.airflow.rebalance import PoolChangeTrigger
from connect_core.runtime.cluster.rebalancer import place
from connect_core.runtime.context import Runtime
from connect_core.runtime.execution.submit import SubmitResult, submit_task
from connect_core.runtime.plugins import PluginRegistry
from connect_core.runtime.settings import Settings
from connect_core.runtime.store.models import TopicSegmentRow

pytestmark = pytest.mark.spark_submit

PLUGINS = Path(__file__).with_name("plugins")
HEARTBEAT_TIMEOUT = 4.0
STEP = 25


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _spark_class() -> str:
    import pyspark

    return str(Path(pyspark.__file__).parent / "bin" / "spark-class")


class StandaloneCluster:
    """A Spark standalone master and one worker (1 core), started from the PySpark distribution."""

    def __init__(self, name: str, workdir: Path) -> None:
        self.name = name
        self.port, self.ui_port, self.worker_ui_port = _free_port(), _free_port(), _free_port()
        workdir.mkdir(parents=True)
        env = {
            **os.environ,
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false",
            "SPARK_WORKER_DIR": str(workdir / "work"),
        }
        self.procs = [
            self._start(
                env,
                workdir / "master.log",
                "org.apache.spark.deploy.master.Master",
                *("--host", "127.0.0.1", "--port", str(self.port), "--webui-port", str(self.ui_port)),
            ),
            self._start(
                env,
                workdir / "worker.log",
                "org.apache.spark.deploy.worker.Worker",
                self.master,
                *("--host", "127.0.0.1", "--webui-port", str(self.worker_ui_port), "--cores", "1", "--memory", "1g"),
            ),
        ]

    @staticmethod
    def _start(env: dict[str, str], log: Path, *args: str) -> subprocess.Popen[bytes]:
        with log.open("wb") as out:
            return subprocess.Popen(
                [_spark_class(), *args], env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )

    @property
    def master(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    @property
    def probe_url(self) -> str:
        return f"http://127.0.0.1:{self.ui_port}/json"

    def wait_alive(self, timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                status = httpx.get(self.probe_url, timeout=2, follow_redirects=True).json()
                if status["status"] == "ALIVE" and status["aliveworkers"] == 1:
                    return
            except (httpx.HTTPError, ValueError, KeyError):
                pass
            time.sleep(0.5)
        raise AssertionError(f"Spark cluster {self.name} did not come up at {self.probe_url}")

    def kill(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=30)


@pytest.fixture
def clusters(tmp_path: Path) -> Iterator[tuple[StandaloneCluster, StandaloneCluster]]:
    a = StandaloneCluster("a", tmp_path / "spark-a")
    b = StandaloneCluster("b", tmp_path / "spark-b")
    try:
        a.wait_alive()
        b.wait_alive()
        yield a, b
    finally:
        a.kill()
        b.kill()


def _run_all(rt: Runtime, connector: str, tasks: int) -> list[tuple[str, SubmitResult]]:
    """Every task once, where its assignment says, two at a time (one per cluster core)."""

    def one(task_id: int) -> tuple[str, SubmitResult]:
        placement = place(rt.engine, rt.settings, connector, task_id)
        result = submit_task(rt.settings, rt.database_url, connector, task_id, placement=placement, timeout=300)
        return placement.pool, result

    with ThreadPoolExecutor(max_workers=2) as pool:
        return list(pool.map(one, range(tasks)))


def _tasks_by_pool(rt: Runtime, connector: str) -> dict[str, list[int]]:
    by_pool: dict[str, list[int]] = {}
    for work, (pool, _generation) in sorted(rt.pools.assignment().items(), key=lambda kv: str(kv[0])):
        if work.connector == connector and work.task is not None:
            by_pool.setdefault(pool, []).append(work.task)
    return by_pool


def test_tasks_move_off_a_dead_cluster_and_the_sink_holds_every_record_once(
    clusters: tuple[StandaloneCluster, StandaloneCluster],
    database_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    a, b = clusters
    env = {
        "CONNECT_DATABASE_URL": database_url,
        "CONNECT_HOME": str(tmp_path / "home"),
        "CONNECT_PLUGIN_PATH": str(PLUGINS),
        "CONNECT_HEARTBEAT_TIMEOUT": str(HEARTBEAT_TIMEOUT),
        "CONNECT_REBALANCE_MAX_DELAY": "0",
        "CONNECT_LEASE_SECONDS": "30",
        "CONNECT_FILE_ALLOWED_PATHS": str(tmp_path),
    }
    for key, value in env.items():  # the trigger reads its settings from the environment, as in the triggerer
        monkeypatch.setenv(key, value)
    rt = Runtime.open(Settings())
    try:
        rt.registry = PluginRegistry(rt.settings.plugin_dirs())
        rt.pools.add("a", a.master, capacity=2, probe_url=a.probe_url)
        rt.pools.add("b", b.master, capacity=2, probe_url=b.probe_url)
        rt.pools.remove("local")
        rt.create_connector("seq", {"connector.class": "SeqSource", "topic": "numbers", "tasks.max": 4, "step": STEP})
        sink_file = tmp_path / "sink.jsonl"
        rt.create_connector(
            "sink", {"connector.class": "FileSinkConnector", "topics": "numbers", "filename": str(sink_file)}
        )
        spread = _tasks_by_pool(rt, "seq")
        assert set(spread) == {"a", "b"}, f"4 tasks over 2 pools of equal capacity: {spread}"

        # Round 1: every task runs on its own pool's cluster.
        for _pool, result in _run_all(rt, "seq", 4):
            assert result.state == "SUCCEEDED", result.stderr_tail
            assert result.result["rows"] == STEP
        masters = {r["task"]: (r["pool"], r["stats"]["spark_master"]) for r in rt.connectors.last_runs("seq", limit=4)}
        for pool, tasks in spread.items():
            for t in tasks:
                assert masters[t] == (pool, (a if pool == "a" else b).master)
        ((_, sink_result),) = _run_all(rt, "sink", 1)
        assert sink_result.state == "SUCCEEDED", sink_result.stderr_tail

        # Cluster a dies (master and worker, SIGKILL). The sensor's trigger notices and a rebalance follows.
        on_a = [w for w, (p, _) in rt.pools.assignment().items() if p == "a"]
        killed_at = time.monotonic()
        a.kill()
        event = asyncio.run(asyncio.wait_for(_first_event(PoolChangeTrigger(poll_interval=0.5)), timeout=60))
        detected_s = time.monotonic() - killed_at
        assert "pool a lost" in event["reason"]
        result = rt.pools.rebalance("sticky", HEARTBEAT_TIMEOUT, event["reason"])
        moved_s = time.monotonic() - killed_at
        assert result.moved == len(on_a), "exactly the dead pool's connectors and tasks move"
        assert _tasks_by_pool(rt, "seq") == {"b": [0, 1, 2, 3]}
        assert detected_s < HEARTBEAT_TIMEOUT + 10 and moved_s < HEARTBEAT_TIMEOUT + 10
        (a_pool,) = [p for p in rt.pools.list(HEARTBEAT_TIMEOUT) if p.name == "a"]
        assert not a_pool.alive and a_pool.probe["ok"] is False

        # Round 2: syncing continues on the surviving cluster.
        for pool, result in _run_all(rt, "seq", 4):
            assert (pool, result.state) == ("b", "SUCCEEDED"), result.stderr_tail
        assert {r["stats"]["spark_master"] for r in rt.connectors.last_runs("seq", limit=4)} == {b.master}
        ((_, sink_result),) = _run_all(rt, "sink", 1)
        assert sink_result.state == "SUCCEEDED", sink_result.stderr_tail

        rows = [json.loads(line) for line in sink_file.read_text().splitlines()]
        counts = Counter((r["task"], r["n"]) for r in rows)
        assert set(counts.values()) == {1}, "no record twice"
        assert set(counts) == {(t, n) for t in range(4) for n in range(2 * STEP)}, "no record lost"
        with rt.engine.connect() as conn:
            assert conn.execute(select(func.sum(TopicSegmentRow.row_count))).scalar() == 4 * 2 * STEP
    finally:
        rt.close()


async def _first_event(trigger: PoolChangeTrigger) -> dict[str, str]:
    async for event in trigger.run():
        return dict(event.payload)
    raise AssertionError("the trigger ended without an event")
