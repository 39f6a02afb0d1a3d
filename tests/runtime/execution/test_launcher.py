"""The launcher decides where a run goes (a warm worker, a Spark Connect client here, a spark-submit) and
turns every way a run can end into one outcome: from the runner's result, else from the run's record;
a task another run holds is BUSY before anything starts."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from connect_core.runtime.cluster.rebalancer import Placement
from connect_core.runtime.context import Runtime
from connect_core.runtime.execution.launcher import Launcher, Outcome, PlannedRun, State, Where, choose, plan_runs
from connect_core.runtime.execution.submit import SubmitResult
from tests.conftest import file_pair

SC = "sc://localhost:15002/;token=t0ken"


def test_the_decision_keeps_the_order_worker_then_client_then_spark_submit() -> None:
    assert choose(SC, worker=True) is Where.WORKER
    assert choose(SC, worker=False) is Where.CLIENT
    for classic in ("local[*]", "spark://h:7077", "yarn", "k8s://https://h:6443", None):
        assert choose(classic, worker=True) is Where.SPARK_SUBMIT  # a worker never makes a spark-submit


def _planned(pool: str, master: str) -> PlannedRun:
    return PlannedRun("src", 0, pool, Placement(pool, master, {}, 1))


def test_a_spark_connect_task_goes_to_its_pools_worker_else_any_else_this_process(
    runtime: Runtime, tmp_path: Path
) -> None:
    asked: list[str | None] = []
    workers: dict[str | None, Path] = {}

    def find(pool: str | None) -> Path | None:
        asked.append(pool)
        return workers.get(pool)

    launcher = Launcher(runtime, find=find)
    warm = _planned("warm", SC)
    assert launcher.where(warm) == (Where.CLIENT, None)
    workers[None] = tmp_path / "other.sock"  # a worker of another warm pool serving this store
    assert launcher.where(warm) == (Where.WORKER, tmp_path / "other.sock")
    workers["warm"] = tmp_path / "warm.sock"
    assert launcher.where(warm) == (Where.WORKER, tmp_path / "warm.sock")

    asked.clear()
    assert launcher.where(_planned("local", "local[*]")) == (Where.SPARK_SUBMIT, None)
    assert asked == []  # a classic pool asks no worker
    explicit = PlannedRun("src", 0, "sc://localhost:15002/;token=****", None)
    assert launcher.where(explicit, master=SC) == (Where.WORKER, tmp_path / "other.sock")
    # a worker's own launcher runs Spark Connect tasks itself
    assert Launcher(runtime, ask_workers=False, find=find).where(warm) == (Where.CLIENT, None)


class _Submit:
    """A spark-submit that does not start Spark: it answers what the test says the runner did."""

    def __init__(self, answer: Mapping[str, object] | None = None, exit_code: int = 0) -> None:
        self.answer, self.exit_code, self.calls = answer, exit_code, 0

    def __call__(
        self,
        tasks: Sequence[tuple[str, int]],
        *,
        master: str | None,
        placement: Placement | None,
        conf: Mapping[str, str],
    ) -> list[SubmitResult]:
        self.calls += 1
        return [SubmitResult(c, t, self.exit_code, 1.0, dict(self.answer or {}), "boom") for c, t in tasks]


def test_a_task_whose_lease_another_run_holds_is_busy_before_spark_starts(runtime: Runtime, tmp_path: Path) -> None:
    file_pair(runtime, tmp_path)
    held = runtime.runs.acquire("fileSourceConnector", 0, lease_seconds=600)
    submit = _Submit()
    launched = Launcher(runtime, submit=submit).launch(plan_runs(runtime, ["fileSourceConnector", "fileSinkConnector"]))
    busy, sink = launched.outcomes
    assert (busy.state, busy.where, busy.run_id) == (State.BUSY, None, None)
    assert f"already running as run {held.run_id}" in busy.cause and busy.record["state"] == "BUSY"
    assert submit.calls == 1  # the sink alone was submitted
    assert sink.state is State.FAILED and sink.retriable  # our stand-in runner reported nothing


def test_the_runners_own_result_is_the_outcome(runtime: Runtime, tmp_path: Path) -> None:
    file_pair(runtime, tmp_path)
    planned = plan_runs(runtime, ["fileSourceConnector"])
    fenced = {"connector": "fileSourceConnector", "task_id": 0, "state": "FENCED", "message": "moved to `east`"}
    (outcome,) = Launcher(runtime, submit=_Submit(fenced, 3)).launch(planned).outcomes
    assert (outcome.state, outcome.cause, outcome.where) == (State.FENCED, "moved to `east`", Where.SPARK_SUBMIT)
    config = {**fenced, "state": "FAILED", "message": "ConfigError: config `filename`", "error_kind": "config"}
    (outcome,) = Launcher(runtime, submit=_Submit(config, 1)).launch(planned).outcomes
    assert outcome.fatal and not outcome.retriable and outcome.cause == "ConfigError: config `filename`"


def test_a_run_that_died_unreported_is_told_by_its_record(runtime: Runtime, tmp_path: Path) -> None:
    """A driver killed after its run recorded how it ended (or running on the cluster): the record says."""
    file_pair(runtime, tmp_path)
    planned = plan_runs(runtime, ["fileSourceConnector"])

    class Recorded(_Submit):
        def __call__(self, tasks, **kwargs):  # type: ignore[no-untyped-def]
            lease = runtime.runs.acquire("fileSourceConnector", 0, lease_seconds=60)
            trace = "Traceback (most recent call last):\n  File x\nValueError: no int"
            runtime.runs.finish(lease, "FAILED", trace, {"error_kind": "unexpected"})
            return super().__call__(tasks, **kwargs)

    (outcome,) = Launcher(runtime, submit=Recorded(None, 137)).launch(planned).outcomes
    assert (outcome.state, outcome.error_kind, outcome.cause) == (State.FAILED, "unexpected", "ValueError: no int")
    assert outcome.run_id is not None and outcome.retriable
    assert outcome.record["state"] == "KILLED"  # what `connect run` shows is the process's own story

    (outcome,) = Launcher(runtime, submit=_Submit(None, 1)).launch(planned).outcomes  # no newer record
    assert outcome.state is State.FAILED and outcome.run_id is None and "exited with 1" in outcome.cause
    assert "boom" in outcome.cause


@pytest.mark.parametrize("state", ["SUCCEEDED", "SKIPPED"])
def test_a_reported_success_or_skip_has_no_cause(runtime: Runtime, tmp_path: Path, state: str) -> None:
    file_pair(runtime, tmp_path)
    answer = {"connector": "fileSourceConnector", "task_id": 0, "state": state, "run_id": 7, "rows": 2}
    answer["message"] = "connector is PAUSED" if state == "SKIPPED" else ""
    (outcome,) = Launcher(runtime, submit=_Submit(answer)).launch(plan_runs(runtime, ["fileSourceConnector"])).outcomes
    assert outcome.state is State(state) and outcome.rows == 2 and not outcome.retriable
    assert outcome.cause == ("connector is PAUSED" if state == "SKIPPED" else "")


def test_the_breakdown_accounts_for_the_whole_time_of_a_task() -> None:
    """An Airflow task of 23 s whose run says 6 s: the line says where the other 17 s went."""
    timings = {"python_s": 9.0, "run_s": 6.0, "spark_session_s": 4.5, "work_s": 0.6, "commit_s": 0.1}
    outcome = Outcome("c", 0, State.SUCCEEDED, "local", Where.SPARK_SUBMIT, run_id=1, wall_s=20.0, timings=timings)
    line = outcome.breakdown(23.0)
    assert line == (
        "23.0 s in all: before the launch (pre-check, placement) 3.0 s, spark-submit and the JVM 11.0 s, "
        "Python's start (imports, store) 3.0 s, Spark session 4.5 s, work 0.6 s, commit 0.1 s, the rest 0.8 s"
    )
    warm = Outcome("c", 0, State.SUCCEEDED, "warm", Where.WORKER, run_id=2, wall_s=1.2, timings={"work_s": 0.4})
    assert warm.breakdown() == "1.2 s in all: work 0.4 s, the rest 0.8 s"
