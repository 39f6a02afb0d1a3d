"""History retention: old finished runs and rebalance log rows go; what a task or a rerun needs stays."""

from __future__ import annotations

from sqlalchemy import select, text

from connect_core.runtime.context import Runtime
from connect_core.runtime.store.models import RebalanceLogRow, TaskRunRow
from connect_core.runtime.store.retention import prune


def _run(runtime: Runtime, task: int, days_ago: float | None, state: str = "SUCCEEDED", staged: str = "[]") -> int:
    with runtime.engine.begin() as conn:
        return int(
            conn.execute(
                text(
                    "INSERT INTO connect.task_runs (connector, task_id, generation, state, lease_expires_at, "
                    "finished_at, staged_paths) VALUES ('c', :t, 1, :s, now(), "
                    "now() - CAST(:d AS interval), CAST(:p AS jsonb)) RETURNING id"
                ),
                {"t": task, "s": state, "d": f"{days_ago or 0} days", "p": staged},
            ).scalar()
        )


def test_prune_keeps_what_a_task_or_a_rerun_needs(runtime: Runtime) -> None:
    old = [_run(runtime, 0, 30) for _ in range(3)]
    running = _run(runtime, 0, 30, state="RUNNING")
    staged = _run(runtime, 0, 30, state="FAILED", staged='["file:///t/run=9"]')
    recent = _run(runtime, 0, 1)
    latest_of_1 = _run(runtime, 1, 30)  # task 1's only run: old, but its latest
    with runtime.engine.begin() as conn:
        for days in (30, 20, 10):
            conn.execute(
                text(
                    "INSERT INTO connect.rebalance_log (generation, strategy, reason, moved, created_at) "
                    "VALUES (:g, 'sticky', 'x', 0, now() - CAST(:d AS interval))"
                ),
                {"g": days, "d": f"{days} days"},
            )

    assert prune(runtime.engine, 0) == {"task_runs": 0, "rebalance_log": 0}  # 0: keep everything
    assert prune(runtime.engine, 7, batch=2) == {"task_runs": 3, "rebalance_log": 2}

    with runtime.engine.connect() as conn:
        left = set(conn.scalars(select(TaskRunRow.id)))
        log = list(conn.scalars(select(RebalanceLogRow.generation)))
    assert left == {running, staged, recent, latest_of_1} and not set(old) & left
    assert log == [10]  # the latest rebalance stays, however old
    assert prune(runtime.engine, 7) == {"task_runs": 0, "rebalance_log": 0}
