"""A real Airflow task (`airflow dags test`) shows the launcher's BUSY and FENCED outcomes as such:

* BUSY (another run holds the task's lease): the task is up for reschedule, not failed, and runs
  once the lease is free;
* FENCED (the task got a new generation while its run ran, as a rebalance or a config change does):
  the task is skipped, its run recorded FENCED.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from connect_core.runtime.context import Runtime
from tests.airflow.conftest import AirflowCli
from tests.conftest import file_pair

pytestmark = pytest.mark.spark_submit

DAG = "connect__fileSourceConnector"


class _Dagrun:
    """`airflow dags test` of a DAG, its output read as it comes."""

    def __init__(self, env: dict[str, str], dag: str) -> None:
        self.lines: list[str] = []
        self.proc = subprocess.Popen(
            [str(Path(sys.executable).with_name("airflow")), "dags", "test", dag],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout or []:
            self.lines.append(line)

    @property
    def output(self) -> str:
        return "".join(self.lines)

    def wait_for(self, what: str, timeout: float = 240) -> None:
        deadline = time.monotonic() + timeout
        while what not in self.output:
            assert self.proc.poll() is None or self._reader.is_alive(), f"never saw {what!r}:\n{self.output[-4000:]}"
            assert time.monotonic() < deadline, f"never saw {what!r}:\n{self.output[-4000:]}"
            time.sleep(0.05)

    def finish(self, timeout: float = 300) -> str:
        try:
            self.proc.wait(timeout=timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
        self._reader.join(timeout=10)
        return self.output


def _airflow_task(airflow_db: str) -> tuple[str, int]:
    """The final state of the DAG's newest task instance and how often it was rescheduled, from Airflow's
    database (shared by the session's tests)."""
    engine = create_engine(airflow_db)
    try:
        with engine.connect() as conn:
            ti, state = conn.execute(
                text(
                    "SELECT id, state FROM task_instance WHERE dag_id = :dag ORDER BY start_date DESC NULLS LAST LIMIT 1"
                ),
                {"dag": DAG},
            ).one()
            rescheduled = conn.execute(
                text("SELECT count(*) FROM task_reschedule WHERE ti_id = :ti"), {"ti": ti}
            ).scalar_one()
    finally:
        engine.dispose()
    return str(state), int(rescheduled)


def test_a_busy_task_is_up_for_reschedule_and_runs_once_the_lease_is_free(
    airflow: AirflowCli, airflow_db: str, runtime: Runtime, tmp_path: Path
) -> None:
    source, _ = file_pair(runtime, tmp_path)
    source.write_text("one\ntwo\n")
    held = runtime.runs.acquire("fileSourceConnector", 0, lease_seconds=600)  # as a `connect run` would
    # a lease of 20 s: a BUSY task tries again after a quarter of it, 5 s
    dagrun = _Dagrun({**airflow.env, "CONNECT_LEASE_SECONDS": "20"}, DAG)
    try:
        dagrun.wait_for("is busy, tried again in 5 s")
        assert runtime.connectors.last_runs("fileSourceConnector") == [
            r for r in runtime.connectors.last_runs("fileSourceConnector") if r["run_id"] == held.run_id
        ]  # BUSY started nothing: no run of its own
        runtime.runs.finish(held, "ABANDONED", "released by the test", {})
    finally:
        output = dagrun.finish()
    assert dagrun.proc.returncode == 0, output[-4000:]
    lines = [x for x in output.splitlines() if "is busy, tried again in 5 s" in x]
    assert lines and all(f"`fileSourceConnector-0` is already running as run {held.run_id}" in x for x in lines)
    assert "UP_FOR_RESCHEDULE" in output and "Task failed" not in output
    newest = runtime.connectors.last_runs("fileSourceConnector", limit=1)[0]
    assert (newest["state"], newest["stats"]["rows"]) == ("SUCCEEDED", 2)
    assert _airflow_task(airflow_db) == ("success", 1)


def test_a_fenced_run_skips_the_task(airflow: AirflowCli, airflow_db: str, runtime: Runtime, tmp_path: Path) -> None:
    source, _ = file_pair(runtime, tmp_path)
    source.write_text("one\ntwo\n")
    dagrun = _Dagrun(airflow.env, DAG)
    try:
        deadline = time.monotonic() + 240
        while not [r for r in runtime.connectors.last_runs("fileSourceConnector") if r["state"] == "RUNNING"]:
            assert dagrun.proc.poll() is None and time.monotonic() < deadline, dagrun.output[-4000:]
            time.sleep(0.02)
        with runtime.engine.begin() as conn:  # what a rebalance moving the task does to its generation
            conn.execute(
                text("UPDATE connect.task_configs SET generation = generation + 1 WHERE connector = :name"),
                {"name": "fileSourceConnector"},
            )
    finally:
        output = dagrun.finish()
    assert dagrun.proc.returncode == 0, output[-4000:]
    (run,) = runtime.connectors.last_runs("fileSourceConnector")
    assert run["state"] == "FENCED", output[-4000:]
    lines = [x for x in output.splitlines() if f"run {run['run_id']} was fenced" in x and "WARNING" in x.upper()]
    assert lines and all("superseded" in x for x in lines), output[-4000:]
    assert _airflow_task(airflow_db) == ("skipped", 0)
    assert runtime.topics.run_segments(run["run_id"]) == []  # nothing committed
