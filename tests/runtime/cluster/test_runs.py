"""Leases, generations and fenced commits of task runs."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import select, text

from connect_core.runtime.cluster.runs import CommitRequest, TaskBusyError
from connect_core.runtime.context import Runtime
from connect_core.runtime.store.models import SourcePositionRow, TaskRunRow
from connect_core.sdk import FencedError, SourcePosition
from tests.conftest import file_pair


def _expire_leases(runtime: Runtime) -> None:
    with runtime.engine.begin() as conn:
        conn.execute(text("UPDATE connect.task_runs SET lease_expires_at = now() - interval '1 second'"))


def _position(n: int) -> SourcePosition:
    return SourcePosition({"filename": "/in.txt"}, {"position": n})


def test_a_live_lease_keeps_a_second_run_out(runtime: Runtime, tmp_path: Path) -> None:
    file_pair(runtime, tmp_path)
    runtime.runs.acquire("fileSourceConnector", 0, lease_seconds=60)
    with pytest.raises(TaskBusyError, match="already running"):
        runtime.runs.acquire("fileSourceConnector", 0, lease_seconds=60)


def test_stale_generation_cannot_commit(runtime: Runtime, tmp_path: Path) -> None:
    file_pair(runtime, tmp_path)
    stale = runtime.runs.acquire("fileSourceConnector", 0, lease_seconds=60)
    _expire_leases(runtime)  # the first run hangs past its lease...
    fresh = runtime.runs.acquire("fileSourceConnector", 0, lease_seconds=60)  # ...and is taken over
    assert fresh.generation == stale.generation + 1

    runtime.runs.commit(fresh, CommitRequest(positions=[_position(10)]))
    with pytest.raises(FencedError, match="fenced"):
        runtime.runs.commit(stale, CommitRequest(positions=[_position(99)]))

    assert runtime.connectors.positions("fileSourceConnector").offset({"filename": "/in.txt"}) == {"position": 10}
    with runtime.engine.connect() as conn:
        states = dict(conn.execute(select(TaskRunRow.id, TaskRunRow.state)).all())
    assert states == {stale.run_id: "ABANDONED", fresh.run_id: "SUCCEEDED"}


def test_heartbeat_reports_fencing(runtime: Runtime, tmp_path: Path) -> None:
    file_pair(runtime, tmp_path)
    lease = runtime.runs.acquire("fileSourceConnector", 0, lease_seconds=60)
    assert runtime.runs.heartbeat(lease, 60)
    _expire_leases(runtime)
    runtime.runs.acquire("fileSourceConnector", 0, lease_seconds=60)
    assert not runtime.runs.heartbeat(lease, 60)


def test_config_update_fences_running_tasks(runtime: Runtime, tmp_path: Path) -> None:
    file_pair(runtime, tmp_path)
    lease = runtime.runs.acquire("fileSourceConnector", 0, lease_seconds=60)
    config = runtime.connectors.get("fileSourceConnector").config
    runtime.update_connector("fileSourceConnector", {**config, "batch.max.bytes": 1024})
    with pytest.raises(FencedError):
        runtime.runs.commit(lease, CommitRequest(positions=[_position(5)]))
    with runtime.engine.connect() as conn:
        assert conn.execute(select(SourcePositionRow)).first() is None


def test_failed_run_marks_task_failed_with_trace(runtime: Runtime, tmp_path: Path) -> None:
    file_pair(runtime, tmp_path)
    lease = runtime.runs.acquire("fileSourceConnector", 0, lease_seconds=60)
    runtime.runs.finish(lease, "FAILED", "Traceback: boom", {})
    status = runtime.connectors.status("fileSourceConnector")
    assert status.tasks[0].state == "FAILED"
    assert status.tasks[0].trace == "Traceback: boom"
