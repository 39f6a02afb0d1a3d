"""Runs made by this process, with no pool worker asked: `launcher.Launcher` with `ask_workers=False`.

What `connect run` and the Airflow operator call is the launcher (`launcher.launch_names`,
`Launcher.launch`); this module keeps the names earlier callers used.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from connect_core.runtime.execution.launcher import Launch, Launcher, PlannedRun, plan_runs, run_record
from connect_core.runtime.execution.submit import SubmitResult, submit_tasks

if TYPE_CHECKING:
    from connect_core.runtime.cluster.rebalancer import Placement
    from connect_core.runtime.context import Runtime

__all__ = ["PlannedRun", "plan_runs", "run_planned", "run_record", "submit_tasks"]


def run_planned(rt: Runtime, planned: Sequence[PlannedRun], master: str | None = None) -> Launch:
    """Each planned run, made by this process: a client of a Spark Connect server, else a spark-submit
    (`submit_tasks`, looked up when called)."""

    def submit(
        tasks: Sequence[tuple[str, int]], *, master: str | None, placement: Placement | None, conf: Mapping[str, str]
    ) -> list[SubmitResult]:
        return submit_tasks(rt.settings, rt.database_url, tasks, master=master, placement=placement, conf=conf)

    return Launcher(rt, submit=submit, ask_workers=False).launch(planned, master)
