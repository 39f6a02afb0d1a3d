"""`connect run`: one run of every task of some connectors, each where its assignment says.

Consecutive tasks placed on the same Spark pool share a Spark application: one spark-submit on a
classic pool, this process as the client of a warm pool's Spark Connect server (a session per run).
The CLI calls this itself, or a warm pool's worker calls it for the CLI (`worker_client`).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from connect_core.runtime.cluster.spark_connect import is_connect_master, public_master
from connect_core.runtime.execution.submit import SubmitResult, merge_spark_conf, run_as_client, submit_tasks

if TYPE_CHECKING:
    from connect_core.runtime.cluster.rebalancer import Placement
    from connect_core.runtime.context import Runtime

__all__ = ["PlannedRun", "plan_runs", "run_planned", "run_record"]


@dataclass(frozen=True)
class PlannedRun:
    connector: str
    task_id: int
    pool: str  # the explicit master (its token masked) when one overrides the assignment
    placement: Placement | None


def plan_runs(
    rt: Runtime, names: Sequence[str], master: str | None = None, task: int | None = None
) -> list[PlannedRun]:
    """The runs, in order: each task of each connector (or only `task`), placed by its assignment
    unless `master` overrides it."""
    from connect_core.runtime.cluster.rebalancer import place

    planned = []
    for name in names:
        info = rt.connectors.get(name)
        for t in [task] if task is not None else list(range(len(info.tasks))):
            placement = None if master else place(rt.engine, rt.settings, name, t)
            shown = placement.pool if placement else public_master(master or "")  # a token never shown
            planned.append(PlannedRun(name, t, shown, placement))
    return planned


def run_planned(
    rt: Runtime, planned: Sequence[PlannedRun], master: str | None = None
) -> tuple[list[tuple[SubmitResult, str]], int]:
    """Each run's result and pool, and how many Spark applications (groups) they took."""

    def target(run: PlannedRun) -> str | None:
        return run.placement.master if run.placement else master

    groups = [list(g) for _, g in itertools.groupby(planned, key=lambda r: (r.pool, target(r)))]
    done: list[tuple[SubmitResult, str]] = []
    for group in groups:
        tasks = [(r.connector, r.task_id) for r in group]
        where = target(group[0])
        if where and is_connect_master(where):  # a warm pool: this process is its client, no spark-submit
            # an explicit master is no pool: the run is not fenced by the task's assignment
            results = run_as_client(rt, tasks, where, group[0].pool if group[0].placement else None)
        else:
            conf = merge_spark_conf(*(rt.spark_conf_for(name) for name in dict.fromkeys(r.connector for r in group)))
            results = submit_tasks(
                rt.settings, rt.database_url, tasks, master=master, placement=group[0].placement, conf=conf
            )
        done += [(result, run.pool) for result, run in zip(results, group, strict=True)]
    return done, len(groups)


def run_record(result: SubmitResult, pool: str) -> dict[str, Any]:
    """A run as `connect run --output json` shows it: the runner's record (empty if the process died
    first), where it ran, its exit code and wall time, and (`tail`) the last output of a spark-submit."""
    return {
        **result.result,
        "connector": result.connector,
        "task_id": result.task_id,
        "state": result.state,
        "pool": pool,
        "exit_code": result.exit_code,
        "wall_s": result.wall_s,
        "tail": result.stderr_tail,
    }
