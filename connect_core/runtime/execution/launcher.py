"""The one launcher: where each task's run goes, and one `Outcome` per task of what came of it.

`connect run`, the Airflow operator and a warm pool's worker hand their runs here; none of them decides
again. For each task, placed where its assignment says (`rebalancer.place`) or on an explicit master:

1. on a Spark Connect master, with a warm worker on this machine serving this metadata store (the
   pool's own, else any): the worker runs it, with no interpreter, imports or session to pay (ADR 0005);
2. on a Spark Connect master otherwise: this process runs it as the server's client, a session per run;
3. on any other master: a spark-submit of the runner (`submit`), consecutive tasks on one pool in one.

Before any of that costs a start-up, a task whose lease another run holds is BUSY (`RunStore.holder`;
the runner's `acquire` stays the judge). Whichever way a run went, its outcome is the runner's own result
(`RunResult`: returned in this process, sent over the worker's socket, or the runner's `CONNECT_RESULT`
line); where that was lost (a driver killed, or running in cluster deploy mode), the run's record in
`task_runs` says what happened. A refused start (BUSY, FENCED by the assignment, SKIPPED) writes no record,
so the records alone cannot be the channel.

Imports only the standard library at first: `connect run` asks a worker before loading anything heavy.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from connect_core.runtime.execution.worker_client import find_worker, fingerprint, run_on_worker
from connect_core.runtime.store.states import RunState

if TYPE_CHECKING:
    from connect_core.runtime.cluster.rebalancer import Placement
    from connect_core.runtime.context import Runtime
    from connect_core.runtime.execution.submit import SubmitResult
    from connect_core.runtime.settings import Settings

__all__ = [
    "FATAL_KINDS",
    "Launch",
    "Launcher",
    "Outcome",
    "PlannedRun",
    "State",
    "Submit",
    "Where",
    "choose",
    "launch_names",
    "plan_runs",
    "plan_tasks",
    "root_cause",
    "run_record",
]

log = logging.getLogger(__name__)

#: Error kinds (the runner's `error_kind`) that a retry of the same run cannot fix.
FATAL_KINDS = frozenset({"config", "data", "fatal"})


class Where(StrEnum):
    """Where a run goes."""

    WORKER = "worker"  # a warm pool's worker on this machine
    CLIENT = "client"  # this process, a client of a Spark Connect server
    SPARK_SUBMIT = "spark-submit"  # a spark-submit of the runner


class State(StrEnum):
    """How a task's run ended, for whoever decides what follows (a retry, a skip, a wait)."""

    # A run that started ends as its record in `task_runs` says (`RunState`), by the same values.
    SUCCEEDED = RunState.SUCCEEDED  # committed (perhaps nothing: an empty micro-batch)
    FAILED = RunState.FAILED  # nothing committed; `Outcome.retriable` says whether a retry may help
    BUSY = "BUSY"  # another run holds the task's lease; this one did not start
    FENCED = RunState.FENCED  # the task moved (a rebalance, a config change): a newer generation owns it
    SKIPPED = "SKIPPED"  # the connector is not RUNNING: nothing to do


@dataclass(frozen=True)
class Outcome:
    connector: str
    task_id: int
    state: State
    pool: str  # the pool it was placed on (an explicit master, its token masked)
    where: Where | None  # None: decided before any launch (BUSY)
    run_id: int | None = None
    rows: int = 0
    #: Why it did not succeed, in a line or two (`Class: message`, masked); empty when it did.
    cause: str = ""
    error_kind: str | None = None  # FAILED: `config`, `data`, `fatal`, `retriable`, `unexpected`
    wall_s: float = 0.0
    timings: Mapping[str, float] = field(default_factory=dict)
    #: The run as `connect run --output json` shows it (the runner's result, pool, exit code, wall time).
    record: Mapping[str, Any] = field(default_factory=dict)

    @property
    def retriable(self) -> bool:
        """A FAILED run whose retry may succeed (`retriable` or `unexpected`; a run that died unreported)."""
        return self.state is State.FAILED and (self.error_kind or "unexpected") not in FATAL_KINDS

    @property
    def fatal(self) -> bool:
        """A FAILED run a retry would fail the same way (its config or data must change first)."""
        return self.state is State.FAILED and not self.retriable

    def breakdown(self, total_s: float | None = None) -> str:
        """Where the time went, in a line: `total_s` (the caller's whole time: an Airflow task's)
        split into before the launch, the start-up (spark-submit and the JVM, then Python's imports
        and the store), the Spark session, the work, the commit, and the rest."""
        t = self.timings
        parts: list[tuple[str, float]] = []
        if total_s is not None and self.wall_s:
            parts.append(("before the launch (pre-check, placement)", total_s - self.wall_s))
        if self.wall_s and t.get("python_s"):
            parts.append(("spark-submit and the JVM", self.wall_s - t["python_s"]))
            if t.get("run_s") is not None:
                parts.append(("Python's start (imports, store)", t["python_s"] - t["run_s"]))
        for key, label in (("spark_session_s", "Spark session"), ("work_s", "work"), ("commit_s", "commit")):
            if t.get(key) is not None:
                parts.append((label, t[key]))
        whole = total_s if total_s is not None else (self.wall_s or t.get("run_s") or 0.0)
        rest = whole - sum(seconds for _, seconds in parts)
        if rest >= 0.05:
            parts.append(("the rest", rest))
        shown = ", ".join(f"{label} {max(seconds, 0.0):.1f} s" for label, seconds in parts)
        return f"{whole:.1f} s in all" + (f": {shown}" if shown else "")


@dataclass(frozen=True)
class Launch:
    outcomes: list[Outcome]
    groups: int  # how many launches (spark-submits, client sessions in a row, worker requests) it took


@dataclass(frozen=True)
class PlannedRun:
    connector: str
    task_id: int
    pool: str  # the explicit master (its token masked) when one overrides the assignment
    placement: Placement | None


class _Log(Protocol):
    def info(self, msg: str, /, *args: Any) -> Any: ...


class Submit(Protocol):
    """A spark-submit of the runner for `tasks`, one after another in one Spark application: what
    `submit.submit_tasks` does, or the Airflow operator through the Spark provider's hook."""

    def __call__(
        self,
        tasks: Sequence[tuple[str, int]],
        *,
        master: str | None,
        placement: Placement | None,
        conf: Mapping[str, str],
    ) -> list[SubmitResult]: ...


def choose(master: str | None, worker: bool) -> Where:
    """The decision: where a run on `master` goes, `worker` saying whether a warm worker on this machine
    serves this metadata store."""
    from connect_core.runtime.spark.connect import is_connect_master

    if master and is_connect_master(master):
        return Where.WORKER if worker else Where.CLIENT
    return Where.SPARK_SUBMIT


def plan_runs(
    rt: Runtime, names: Sequence[str], master: str | None = None, task: int | None = None
) -> list[PlannedRun]:
    """The runs, in order: each task of each connector (or only `task`), placed by its assignment
    unless `master` overrides it."""
    tasks = []
    for name in names:
        info = rt.connectors.get(name)
        tasks += [(name, t) for t in ([task] if task is not None else range(len(info.tasks)))]
    return plan_tasks(rt, tasks, master)


def plan_tasks(rt: Runtime, tasks: Sequence[tuple[str, int]], master: str | None = None) -> list[PlannedRun]:
    """The runs of `tasks`, in order, each placed by its assignment unless `master` overrides it."""
    from connect_core.runtime.cluster.rebalancer import place
    from connect_core.runtime.spark.connect import public_master

    planned = []
    for name, t in tasks:
        placement = None if master else place(rt.engine, rt.settings, name, t)
        shown = placement.pool if placement else public_master(master or "")  # a token never shown
        planned.append(PlannedRun(name, t, shown, placement))
    return planned


class Launcher:
    """Launches planned runs where they belong (see the module); one per caller and runtime.

    `submit` makes the spark-submits (default: `submit.submit_tasks`); `ask_workers=False` is a worker's
    own launcher (it is the warm process; it runs Spark Connect tasks itself); `on_log` receives what a
    worker's runs log; `logger` is where the launcher says where runs go."""

    def __init__(
        self,
        runtime: Runtime,
        *,
        submit: Submit | None = None,
        ask_workers: bool = True,
        on_log: Callable[[int, str], None] | None = None,
        logger: _Log | None = None,
        find: Callable[[str | None], Path | None] | None = None,
    ) -> None:
        self.runtime = runtime
        self._submit = submit or self._submit_tasks
        self._ask_workers = ask_workers
        self._on_log = on_log
        self._log = logger or log
        self._mark = fingerprint(runtime.settings)
        self._find = find or (lambda pool: find_worker(runtime.settings.home, self._mark, pool=pool))

    # -- the decision -----------------------------------------------------------------------------

    def where(self, run: PlannedRun, master: str | None = None) -> tuple[Where, Path | None]:
        """Where `run` goes, and the worker's socket when it goes to a worker: the pool's own worker,
        else any warm worker here serving this store (an explicit master names no pool)."""
        target = _target(run, master)
        if choose(target, worker=False) is Where.SPARK_SUBMIT or not self._ask_workers:
            return choose(target, worker=False), None
        pool = run.placement.pool if run.placement else None
        path = (self._find(pool) if pool else None) or self._find(None)
        return choose(target, worker=path is not None), path

    # -- launching --------------------------------------------------------------------------------

    def launch(self, planned: Sequence[PlannedRun], master: str | None = None) -> Launch:
        """Run each planned task once; an outcome per task, in `planned`'s order."""
        since = self.runtime.runs.newest_run_id()
        outcomes: dict[int, Outcome] = {}
        ready: list[tuple[int, PlannedRun]] = []
        for i, run in enumerate(planned):
            holder = self.runtime.runs.holder(run.connector, run.task_id)
            if holder is None:
                ready.append((i, run))
            else:
                outcomes[i] = _busy(run, holder)
        groups = 0
        for _, grouped in itertools.groupby(ready, key=lambda item: (item[1].pool, _target(item[1], master))):
            group = list(grouped)
            groups += 1
            for (i, _), outcome in zip(group, self._launch_group([r for _, r in group], master, since), strict=True):
                outcomes[i] = outcome
        return Launch([outcomes[i] for i in range(len(planned))], groups)

    def _launch_group(self, group: list[PlannedRun], master: str | None, since: int) -> list[Outcome]:
        where, path = self.where(group[0], master)
        if where is Where.WORKER and path is not None:
            self._log.info("the run goes to the worker of pool `%s`", group[0].pool)
            tasks = [(r.connector, r.task_id) for r in group]
            answer = run_on_worker(
                path,
                self._mark,
                list(dict.fromkeys(c for c, _ in tasks)),
                tasks=tasks,
                master=master,
                on_log=self._on_log,
            )
            if answer is not None:
                return [outcome_of(record, Where.WORKER) for record in answer["results"]]
            where = Where.CLIENT  # refused before it ran anything (stopping, at its limit): run it here
        results = self._run_here(group, master, where)
        return [self._outcome(result, run, where, since) for result, run in zip(results, group, strict=True)]

    def _run_here(self, group: list[PlannedRun], master: str | None, where: Where) -> list[SubmitResult]:
        from connect_core.runtime.execution.submit import run_as_client
        from connect_core.runtime.spark.conf import merge_spark_conf

        tasks = [(r.connector, r.task_id) for r in group]
        if where is Where.CLIENT:
            # an explicit master is no pool: the run is not fenced by the task's assignment
            target = _target(group[0], master)
            assert target is not None
            return run_as_client(self.runtime, tasks, target, group[0].pool if group[0].placement else None)
        conf = merge_spark_conf(*(self.runtime.spark_conf_for(c) for c in dict.fromkeys(c for c, _ in tasks)))
        return self._submit(tasks, master=master, placement=group[0].placement, conf=conf)

    def _submit_tasks(
        self,
        tasks: Sequence[tuple[str, int]],
        *,
        master: str | None,
        placement: Placement | None,
        conf: Mapping[str, str],
    ) -> list[SubmitResult]:
        from connect_core.runtime.execution.submit import submit_tasks

        rt = self.runtime
        return submit_tasks(rt.settings, rt.database_url, tasks, master=master, placement=placement, conf=conf)

    def _outcome(self, result: SubmitResult, run: PlannedRun, where: Where, since: int) -> Outcome:
        record = run_record(result, run.pool)
        if result.result:
            return outcome_of(record, where)
        # The runner never reported (killed, or a driver on the cluster): its run's record says.
        runs = self.runtime.connectors.last_runs(run.connector, limit=1, task_id=run.task_id)
        found = runs[0] if runs and runs[0]["run_id"] > since else None
        stats = (found or {}).get("stats") or {}
        state = str((found or {}).get("state"))
        cause = f"the runner ({where}) exited with {result.exit_code} before it reported"
        if found is not None and state in (RunState.SUCCEEDED, RunState.FAILED, RunState.FENCED):
            cause = "" if state == RunState.SUCCEEDED else root_cause(found.get("error") or "") or cause
        else:
            state = RunState.FAILED
            cause += f"; its last output:\n{result.stderr_tail}" if result.stderr_tail else ""
        return Outcome(
            run.connector,
            run.task_id,
            State(state),
            run.pool,
            where,
            run_id=found["run_id"] if found else None,
            rows=int(stats.get("rows") or 0),
            cause=cause,
            error_kind=stats.get("error_kind"),
            wall_s=result.wall_s,
            timings={k: v for k, v in stats.items() if k.endswith("_s") and isinstance(v, int | float)},
            record=record,
        )


def launch_names(
    settings: Settings,
    names: Sequence[str],
    *,
    task: int | None = None,
    master: str | None = None,
    open_runtime: Callable[[], AbstractContextManager[Runtime]],
    on_log: Callable[[int, str], None] | None = None,
) -> Launch:
    """`connect run`: every task of the connectors (or only `task`). A warm worker here serving this
    store is asked first, with nothing heavy loaded (it places the tasks itself, with `plan_runs`, and
    takes them only if all run on Spark Connect pools); else the runtime is opened, the tasks placed
    and launched (`Launcher.launch`)."""
    from connect_core.runtime.spark.connect import is_connect_master

    if master is None or is_connect_master(master):
        mark = fingerprint(settings)
        path = find_worker(settings.home, mark)
        answer = run_on_worker(path, mark, names, task=task, master=master, on_log=on_log) if path else None
        if answer is not None:
            return Launch([outcome_of(r, Where.WORKER) for r in answer["results"]], int(answer["groups"]))
    with open_runtime() as rt:
        return Launcher(rt, on_log=on_log).launch(plan_runs(rt, names, master, task), master)


def outcome_of(record: Mapping[str, Any], where: Where) -> Outcome:
    """The outcome of a run the runner reported (`run_record` of its `RunResult`)."""
    raw = str(record.get("state"))
    state = State(raw) if raw in State.__members__ else State.FAILED  # KILLED, or a runner gone mid-run
    cause = "" if state is State.SUCCEEDED else str(record.get("message") or "")
    if not cause and state is State.FAILED:
        cause = f"the runner exited with {record.get('exit_code')} before it reported"
    return Outcome(
        str(record["connector"]),
        int(record["task_id"]),
        state,
        str(record.get("pool") or ""),
        where,
        run_id=record.get("run_id"),
        rows=int(record.get("rows") or 0),
        cause=cause,
        error_kind=record.get("error_kind"),
        wall_s=float(record.get("wall_s") or 0.0),
        timings=dict(record.get("timings") or {}),
        record=dict(record),
    )


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


def root_cause(error: str) -> str:
    """The exception line(s) of a recorded run error: `Class: message` of the outermost exception,
    without the frames (the error is a masked traceback, or already just a message)."""
    from connect_core.runtime.security import mask_text

    text = error.strip()
    marker = "Traceback (most recent call last):"
    if marker in text:
        text = text[text.rindex(marker) + len(marker) :]
        lines = text.splitlines()
        # Frames are indented; the exception starts at the first line that is not.
        start = next((i for i, line in enumerate(lines) if line and not line[0].isspace()), len(lines))
        text = "\n".join(lines[start:]).strip()
    return mask_text(text[:2000])


def _target(run: PlannedRun, master: str | None) -> str | None:
    return run.placement.master if run.placement else master


def _busy(run: PlannedRun, holder: str) -> Outcome:
    """BUSY before any launch: the record `connect run` shows, as the runner's would be."""
    record = {
        "connector": run.connector,
        "task_id": run.task_id,
        "state": "BUSY",
        "run_id": None,
        "generation": None,
        "rows": 0,
        "segments": 0,
        "message": holder,
        "error_kind": None,
        "timings": {},
        "counts": {},
        "source": {},
        "pool": run.pool,
        "exit_code": 1,
        "wall_s": 0.0,
        "tail": "",
    }
    return Outcome(run.connector, run.task_id, State.BUSY, run.pool, None, cause=holder, record=record)
