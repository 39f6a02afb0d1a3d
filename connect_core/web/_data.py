"""What the Connect view shows, read in a handful of set-based queries whatever the number of connectors.

The page polls this every few seconds, so its cost must not grow with one query per connector:

* states and tasks: the REST list's own read (`ConnectorStore.listing(Page(), status=True)`: one
  query), so the view and `GET /connectors?expand=status` always agree;
* runs (finished and running now), failures, the last error, lags, pools, what each pool holds,
  schedules and a sink's tables (with their versions, read with the runs): the store's read model
  of the view (`runtime.store.views.connector_activity`: seven queries in one read-only snapshot);
* a source's incremental snapshot as its committed position holds it (the table being read, the
  tables queued, paused, chunks and rows read: never the keys it reads between, the user's data)
  and the signals waiting for its next run (`runtime.store.incremental`: one query); whether its
  plugin acts on signals (the view offers to start a snapshot) is the plugin's class attribute.

Config values are never read here; errors, traces and table names are masked (`mask_text`: a
Delta table's URI may carry a credential). The list shows an
error's cause on one line (`Class: message`, as `connect status` and the Airflow task say it); the
error history keeps the trace, cut to its tail if it is very long.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from connect_core.runtime.airflow_client import dag_id_for
from connect_core.runtime.context import Runtime
from connect_core.runtime.execution.launcher import root_cause
from connect_core.runtime.security import mask_text
from connect_core.runtime.spark.connect import pool_kind, public_master
from connect_core.runtime.store import views
from connect_core.runtime.store.connectors import ConnectorStatus, Page
from connect_core.runtime.store.incremental import IncrementalSnapshot, read_incremental, signal_takers
from connect_core.runtime.store.views import (
    ConnectorActivity,
    FailedRun,
    PoolLoad,
    RunningRun,
    RunPoint,
    TableVersion,
)
from connect_core.sdk.config import CRON_PRESETS, check_schedule, schedule_interval

__all__ = ["RUNS_SHOWN", "connectors_view", "failed_runs", "one_line_cause", "pools_view", "view_document"]

#: Runs per connector the sparkline draws (newest last).
RUNS_SHOWN = 20
#: Characters kept of an error's one-line cause; of a trace in the list (its tail, for the JSON's
#: readers: the page shows the cause) and in the error history.
_CAUSE_CHARS = 300
#: Of an error, the tail its cause is looked for in (the outermost exception and its message).
_CAUSE_SOURCE_CHARS = 8192
_TRACEBACK = "Traceback (most recent call last):"
_LIST_TAIL = 600
_HISTORY_TAIL = 16000


def view_document(runtime: Runtime, runs: int = RUNS_SHOWN) -> dict[str, Any]:
    """What the page polls: every connector and every pool, their counts read in one snapshot."""
    activity = views.connector_activity(runtime.engine, runs)
    return {"connectors": _connectors(runtime, activity), "pools": pools_view(runtime, activity.pool_load)}


def connectors_view(runtime: Runtime, runs: int = RUNS_SHOWN) -> list[dict[str, Any]]:
    """Every connector as the view lists it, in name order (see the module's docstring for the reads)."""
    return _connectors(runtime, views.connector_activity(runtime.engine, runs))


def pools_view(
    runtime: Runtime, load: Mapping[str, PoolLoad], running: Mapping[str, list[str]] | None = None
) -> list[dict[str, Any]]:
    """Spark pools with their health and what each holds (no Spark conf: it may hold credentials).

    The counts are the assignments' (`load`): the connectors placed on the pool, and the tasks. A
    pool the assignments still name but that is no longer registered (removed while it held work)
    is listed too, not alive, so the rows add up to what is placed. With `running`, each pool's
    work by name (the page leaves it out: at 1,000 connectors its poll would carry every name twice)."""
    pools: list[dict[str, Any]] = []
    for p in runtime.pools.list(runtime.settings.heartbeat_timeout):
        # `local[…]` is the runner's own machine: up without heartbeats (`PoolStore.list` says alive),
        # so how long ago it last heartbeat says nothing.
        local = p.master.startswith("local")
        pools.append(
            {
                "name": p.name,
                "kind": pool_kind(p.master),
                "master": public_master(p.master),
                "capacity": p.capacity,
                "registered": True,
                "alive": p.alive,
                "always_up": local,
                "seconds_since_heartbeat": None if local else round(p.seconds_since_heartbeat, 1),
                "probe": p.probe,
            }
        )
    registered = {p["name"] for p in pools}
    for name in sorted(set(load) - registered):
        pools.append(
            {
                "name": name,
                "kind": "",
                "master": "",
                "capacity": 0,
                "registered": False,
                "alive": False,
                "always_up": False,
                "seconds_since_heartbeat": None,
                "probe": {},
            }
        )
    for pool in pools:
        held = load.get(pool["name"], PoolLoad(0, 0))
        pool["connectors"], pool["tasks"] = held.connectors, held.tasks
        if running is not None:
            pool["running"] = running.get(pool["name"], [])
    return pools


def one_line_cause(error: str | None) -> str | None:
    """A recorded error's cause on one line: the outermost exception's `Class: message` without the
    frames (`root_cause`, what `connect status` and the Airflow task say), masked, whitespace folded,
    the class without its module (`ConfigError`, not `connect_core.sdk.errors.ConfigError`)."""
    if not error:
        return None
    # The outermost exception is at the end: masked, a tail a margin longer than the cause is read in
    # (a tail cut inside the frames reads as frames: indented, after the trace's marker).
    tail = error[-(_CAUSE_SOURCE_CHARS + _MASK_MARGIN) :]
    if _TRACEBACK not in tail and '\n  File "' in tail:  # the tail of a trace whose start was cut
        tail = f"{_TRACEBACK}\n  {tail}"
    line = " ".join(root_cause(mask_text(tail)).split())
    name, sep, message = line.partition(": ")
    if sep and "." in name and name.replace(".", "").replace("_", "").isalnum():
        line = name.rsplit(".", 1)[1] + sep + message  # the class, not its module: the trace has it
    return line if len(line) <= _CAUSE_CHARS else line[: _CAUSE_CHARS - 1] + "…"


def _connectors(runtime: Runtime, activity: ConnectorActivity) -> list[dict[str, Any]]:
    listing = runtime.connectors.listing(Page(), status=True)
    history = _history(activity.runs, activity.last_errors)
    snapshots = _snapshots(runtime)
    now = datetime.now(UTC)
    shown = []
    for name in listing.names:
        status = listing.statuses[name]
        view = _connector(status, history.get(name, {}), activity.lags.get(name), activity.pools.get(name, []))
        view["running"] = [_running(r) for r in activity.running.get(name, [])]
        # Only sinks write tables: what each task's last committed run reported, one per table.
        view["tables"] = [_table(t) for t in activity.tables.get(name, [])] if status.type == "sink" else None
        schedule, given = activity.schedules.get(name, (None, False))
        if not given:  # the configs' defaults: sources hourly, sinks when their topics get data
            schedule = "@hourly" if status.type == "source" else None
        view["schedule"], view["next_run"] = next_run(schedule, status.type, status.state, view["last_run"], now)
        view["snapshot"] = snapshots.get(name)
        shown.append(view)
    return shown


def _snapshots(runtime: Runtime) -> dict[str, dict[str, Any]]:
    """Per source that acts on signals or has a snapshot in its position: what the details show of
    its incremental snapshot (`progress`, None when none runs) and the signals waiting for a run."""
    with runtime.engine.connect() as conn:
        conn = conn.execution_options(postgresql_readonly=True)
        with conn.begin():
            sources = read_incremental(conn)
    takers = signal_takers(runtime.registry, sources)
    return {
        s.connector: {
            "accepts_signals": s.connector in takers,
            "progress": _progress(s) if s.active else None,
            "pending": [{"type": p.type, "tables": [mask_text(t) for t in p.tables]} for p in s.pending],
            "pending_count": s.pending_count,
        }
        for s in sources
        if s.active or s.pending_count or s.connector in takers
    }


def _progress(s: IncrementalSnapshot) -> dict[str, Any]:
    """Table names as everywhere in the view: masked, shown as text."""
    return {
        "running": s.running,
        "paused": s.paused,
        "table": None if s.table is None else mask_text(s.table),
        "remaining": s.remaining,
        "queued": s.queued,
        "queued_tables": [mask_text(t) for t in s.queued_tables],
        "chunks": s.chunks,
        "rows": s.rows,
        "committed_at": _iso(s.committed_at),
    }


def next_run(
    schedule: str | None, kind: str, state: str, last_run: Mapping[str, Any] | None, now: datetime
) -> tuple[str, str | None]:
    """What the connector's DAG runs on, and when its next scheduled run is (ISO; None: no set time):
    a cron or preset's next time after `now`, an interval's after the last run (`now` when due). A
    sink also runs whenever its topics get data."""
    schedule = _checked(schedule, kind == "sink")
    if schedule == _INVALID:
        return "invalid schedule", None
    if state in ("PAUSED", "STOPPED"):
        return state.lower(), None
    if schedule is None:
        return ("on new data" if kind == "sink" else "by hand"), None
    interval = schedule_interval(schedule)
    if interval is not None:
        finished = last_run.get("finished_at") if last_run else None
        due = datetime.fromisoformat(finished) + interval if finished else now
        return f"every {schedule}", _iso(max(due, now))
    if schedule in ("@continuous", "@once"):
        return schedule, None
    return schedule, _cron_next(schedule, now)


_INVALID = "\0invalid"


@functools.lru_cache(maxsize=1024)
def _checked(schedule: str | None, sink: bool) -> str | None:
    """`check_schedule`'s answer, once per distinct schedule (most connectors share a few)."""
    try:
        return check_schedule(schedule, sink=sink)
    except ValueError:
        return _INVALID


@functools.lru_cache(maxsize=1024)
def _cron_next(schedule: str, now: datetime) -> str | None:
    """A cron or preset's next time after `now`, once per schedule for all the connectors of a read."""
    from croniter import croniter

    return _iso(croniter(CRON_PRESETS.get(schedule, schedule), now).get_next(datetime))


def failed_runs(runtime: Runtime, connector: str, limit: int = 10) -> list[dict[str, Any]]:
    """The connector's last failed runs with their causes and errors, masked (newest first); `past`
    once a later run of the same task succeeded."""
    return [
        {
            "run_id": r.id,
            "task": r.task_id,
            "pool": r.pool,
            "started_at": _iso(r.started_at),
            "finished_at": _iso(r.finished_at),
            "cause": one_line_cause(r.error),
            "past": r.succeeded_since is not None,
            "succeeded_since": _iso(r.succeeded_since),
            "error": _tail(r.error, _HISTORY_TAIL),
        }
        for r in views.failed_runs(runtime.engine, connector, limit)
    ]


def _history(rows: Sequence[RunPoint], last_errors: Mapping[str, FailedRun]) -> dict[str, dict[str, Any]]:
    """Per connector: the shown runs (oldest first), its failures and the newest one's error."""
    by_name: dict[str, dict[str, Any]] = {}
    for r in rows:
        entry = by_name.setdefault(r.connector, {"runs": [], "failures": r.failures, "last_error": None})
        entry["runs"].append(r)
    for name, e in last_errors.items():
        entry = by_name.setdefault(name, {"runs": [], "failures": 1, "last_error": None})
        entry["last_error"] = {
            "run_id": e.id,
            "task": e.task_id,
            "at": _iso(e.finished_at),
            "cause": one_line_cause(e.error),
            "error": _tail(e.error, _LIST_TAIL),
            # a later run of the same task succeeded: the error is history, not the current state
            "past": e.succeeded_since is not None,
            "succeeded_since": _iso(e.succeeded_since),
        }
    return by_name


def _connector(
    status: ConnectorStatus, history: Mapping[str, Any], lag: tuple[int, int] | None, pools: list[str]
) -> dict[str, Any]:
    runs = history.get("runs", [])
    last = runs[-1] if runs else None
    return {
        "name": status.name,
        "type": status.type,
        "state": status.state,
        "dag_id": dag_id_for(status.name),
        # the page shows a task's cause; its details read the whole trace from the REST status
        "tasks": [
            {
                "id": t.id,
                "state": t.state,
                "worker_id": t.worker_id,
                "cause": one_line_cause(t.trace),
                "trace": _tail(t.trace, _LIST_TAIL),
            }
            for t in status.tasks
        ],
        "pools": pools,
        # Only sinks have a lag; a sink whose topics hold no partitions yet is 0 behind.
        "lag": (lag[0] if lag else 0) if status.type == "sink" else None,
        # Rows of each shown run, oldest first: None where the run failed (its output was discarded).
        "rows": [_rows(r) if r.state == "SUCCEEDED" else None for r in runs],
        "last_run": None
        if last is None
        else {
            "run_id": last.id,
            "state": last.state,
            "finished_at": _iso(last.finished_at),
            "rows": _rows(last),
            "duration_s": None if last.duration_s is None else round(last.duration_s, 3),
            "timings": last.timings,
        },
        "failures": history.get("failures", 0),
        "last_error": history.get("last_error"),
    }


def _running(run: RunningRun) -> dict[str, Any]:
    return {"run_id": run.id, "task": run.task_id, "started_at": _iso(run.started_at), "pool": run.pool}


def _table(table: TableVersion) -> dict[str, Any]:
    """A table and the version a run left it at, when the run ended; the plugin's text, masked."""
    return {
        "name": mask_text(table.name),
        "version": mask_text(table.version),
        "run_id": table.run_id,
        "at": _iso(table.at),
    }


def _rows(run: RunPoint) -> int | None:
    return None if run.rows is None else int(run.rows)


#: What is masked beyond the characters shown: a secret the cut would split is still whole in it.
_MASK_MARGIN = 2048


def _tail(value: str | None, keep: int) -> str | None:
    """The tail, masked before the last cut (a cut could split a secret the masker would no longer
    know), on a slice only a margin longer than what is kept: masking is the poll's costliest part."""
    if not value:
        return None
    masked = mask_text(value[-(keep + _MASK_MARGIN) :])
    return masked if len(value) <= keep and len(masked) <= keep else "…" + masked[-keep:]


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None
