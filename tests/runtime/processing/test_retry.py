"""Transient failures are retried inside the run (Kafka's `errors.retry.*`); others fail it at once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from connect_core.runtime.context import Runtime
from connect_core.runtime.plugins import PluginRegistry
from connect_core.runtime.processing.retry import RetryPolicy, is_transient
from connect_core.runtime.store.models import TaskRunRow
from connect_core.sdk import ConnectorConfig, SourceBatch, SourceConnector, SourceTask
from connect_core.sdk.errors import ConfigError, DataError, RetriableError
from tests.conftest import make_runner


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0
        self.waits: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)
        self.now += seconds


def _policy(timeout_ms: int, delay_max_ms: int = 60_000) -> tuple[RetryPolicy, _Clock]:
    clock = _Clock()
    return RetryPolicy(timeout_ms, delay_max_ms, sleep=clock.sleep, clock=lambda: clock.now), clock


def test_backoff_doubles_from_300ms_up_to_the_max_and_stops_at_the_timeout() -> None:
    policy, clock = _policy(timeout_ms=5_000, delay_max_ms=1_000)
    calls = []

    def work(attempt: int) -> None:
        calls.append(attempt)
        raise RetriableError("connection refused")

    with pytest.raises(RetriableError):
        policy.run("x", work)
    assert clock.waits[:3] == [0.3, 0.6, 1.0] and max(clock.waits) == 1.0
    assert sum(clock.waits) == pytest.approx(5.0)
    assert calls == list(range(len(clock.waits) + 1))


def test_no_retries_by_default_and_none_for_what_a_retry_cannot_fix() -> None:
    for policy, error in ((_policy(0)[0], RetriableError("x")), (_policy(-1)[0], DataError("bad row"))):
        calls = []

        def work(attempt: int, error: Exception = error, calls: list[int] = calls) -> None:
            calls.append(attempt)
            raise error

        with pytest.raises(type(error)):
            policy.run("x", work)
        assert calls == [0]


def test_a_success_after_failures_returns_its_value() -> None:
    policy, clock = _policy(timeout_ms=-1)
    assert policy.run("x", lambda n: n if n == 3 else (_ for _ in ()).throw(RetriableError("again"))) == 3
    assert clock.waits == [0.3, 0.6, 1.2]


@pytest.mark.parametrize(
    ("error", "transient"),
    [
        (RetriableError("x"), True),
        (ConfigError("x"), False),
        # as the text of a Spark worker's failure (the class itself stays in the worker)
        (Exception("PythonException: psycopg2.errors.DeadlockDetected: deadlock detected"), True),
        (Exception("PythonException: psycopg2.errors.NotNullViolation: null value"), False),
        (type("OperationalError", (Exception,), {"__module__": "psycopg2"})("server closed the connection"), True),
        (Exception("PythonException: ... pymysql.err.OperationalError: (1213, 'Deadlock found')"), True),
        (Exception("ValueError: invalid literal"), False),
    ],
)
def test_what_counts_as_transient(error: Exception, transient: bool) -> None:
    assert is_transient(error) is transient


class _FlakyTask(SourceTask):
    failures = 0

    def read(self, spark: Any, positions: Any) -> SourceBatch:
        if _FlakyTask.failures:
            _FlakyTask.failures -= 1
            raise RetriableError("the source database restarted")
        return SourceBatch({"flaky": spark.createDataFrame([(1,), (2,)], "id long")})


class FlakySource(SourceConnector[ConnectorConfig]):
    config_model = ConnectorConfig
    task_class = _FlakyTask

    def task_configs(self, config: ConnectorConfig, max_tasks: int) -> list[dict[str, Any]]:
        return [{}]


def test_a_run_retries_a_transient_read_and_counts_it(runtime: Runtime, spark: Any, tmp_path: Path) -> None:
    runtime.registry = PluginRegistry(extra=[FlakySource])
    runner = make_runner(runtime, spark)
    runtime.create_connector(
        "flaky", {"connector.class": "FlakySource", "errors.retry.timeout": 10_000, "errors.retry.delay.max.ms": 10}
    )
    _FlakyTask.failures = 2
    result = runner.run("flaky", 0)
    assert (result.state, result.rows, result.counts) == ("SUCCEEDED", 2, {"retried": 2})
    with runtime.engine.connect() as conn:
        stats = conn.execute(select(TaskRunRow.stats).where(TaskRunRow.id == result.run_id)).scalar_one()
    assert stats["errors"] == {"retried": 2}

    runtime.update_connector("flaky", {"connector.class": "FlakySource"})  # no retries: fails at once
    _FlakyTask.failures = 1
    result = runner.run("flaky", 0)
    assert (result.state, result.error_kind) == ("FAILED", "retriable")
