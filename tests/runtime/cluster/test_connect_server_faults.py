"""A warm pool's Spark Connect server that dies mid-run, restarts between runs, or is given a wrong
token: a clear error in the run's status within seconds, nothing lost, nothing written twice."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from connect_core.runtime.cluster.liveness import probe
from connect_core.runtime.cluster.pools import PoolInfo
from connect_core.runtime.context import Runtime
from connect_core.runtime.execution.warm_pool import ServerInfo, start_server, stop_server
from connect_core.runtime.settings import Settings
from connect_core.sdk.testing import faults
from tests.conftest import file_pair, make_runner

pytestmark = pytest.mark.spark_connect


@pytest.fixture
def server_home(pg_server: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Settings]:
    settings = Settings(database_url=pg_server, home=tmp_path_factory.mktemp("doomed-pool"))
    yield settings
    stop_server(settings, "doomed")


def _start(settings: Settings) -> ServerInfo:
    return start_server(settings, "doomed", spark_master="local[1]", conf={"spark.log.level": "WARN"})


def _runner(runtime: Runtime, master: str) -> Any:
    from pyspark.sql import SparkSession

    return make_runner(runtime, None, spark_factory=lambda: SparkSession.builder.remote(master).create())


def _alive(master: str) -> bool:
    with httpx.Client(timeout=1.0) as client:
        result = probe(PoolInfo("doomed", master, {}, 1, {}, True, 0.0), client)
    assert result is not None
    return result.ok


def test_a_server_killed_mid_run_fails_the_run_fast_and_a_restart_loses_nothing(
    runtime: Runtime, tmp_path: Path, server_home: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = _start(server_home)
    assert _alive(first.master)
    source, sink = file_pair(runtime, tmp_path)
    source.write_text("one\ntwo\nthree\n")
    assert _runner(runtime, first.master).run("fileSourceConnector", 0).state == "SUCCEEDED"

    def kill_the_server(point: str) -> None:  # the sink has read its batch's plan; Spark has not run it
        if point == "before_stage":
            os.killpg(first.pid, signal.SIGKILL)

    checkpoint = faults.checkpoint
    monkeypatch.setattr(faults, "checkpoint", kill_the_server)
    started = time.monotonic()
    failed = _runner(runtime, first.master).run("fileSinkConnector", 0)
    took = time.monotonic() - started
    monkeypatch.setattr(faults, "checkpoint", checkpoint)
    assert failed.state == "FAILED" and took < 60, (failed.state, took)
    assert (failed.error_kind, failed.message) == (
        "retriable",  # Airflow retries it; the rebalance sensor moves the task off a dead pool
        f"RetriableError: the Spark Connect server at localhost:{first.port} does not answer "
        "(is the pool's server running?)",
    )
    assert first.master.split("token=")[1] not in failed.message
    assert not _alive(first.master)  # the rebalance sensor's probe: a dead pool
    assert not sink.exists() or sink.read_text() == ""

    second = _start(server_home)  # restarted: another port and token
    with source.open("a") as f:
        f.write("four\n")
    runner = _runner(runtime, second.master)
    assert [runner.run(c, 0).state for c in ("fileSourceConnector", "fileSinkConnector")] == ["SUCCEEDED"] * 2
    assert sink.read_text() == "one\ntwo\nthree\nfour\n"


def test_a_wrong_token_is_refused_with_a_clear_error(runtime: Runtime, tmp_path: Path, spark_connect_url: str) -> None:
    wrong = spark_connect_url.split("token=")[0] + "token=not-the-token"
    source, _sink = file_pair(runtime, tmp_path)
    source.write_text("one\n")
    started = time.monotonic()
    failed = _runner(runtime, wrong).run("fileSourceConnector", 0)
    assert failed.state == "FAILED" and time.monotonic() - started < 60
    assert "not-the-token" not in failed.message
    assert runtime.connectors.positions("fileSourceConnector") == {}
