"""Read models of the Connect view: what every connector did lately, in a handful of set-based
queries whatever the number of connectors (the page polls them every few seconds).

* the last finished runs of every connector (for the sparkline), the newest one's timings, and its
  count of failed runs: a few index reads per connector (`task_runs(connector, id)`), whatever the
  history holds; among those runs, a sink's tables (`sdk.WRITE_TABLES`): those the newest committed
  run of each of its tasks reported writing, each table at the newest version they left;
* the runs running now (state RUNNING, lease held): an index read per task
  (`task_runs(connector, task_id, state)`);
* the newest failed run's error, and whether a later run of its task succeeded since: one
  `DISTINCT ON` over the failed runs;
* each sink's lag (records of its topics it has not committed): one `GROUP BY` over the topics'
  end offsets and the sinks' offsets, the query `GET /metrics` uses per partition;
* the pools each connector is assigned to, and what each pool holds (the connectors and the tasks
  placed on it): two `GROUP BY`s over the assignments of one snapshot, so the two always agree;
* each connector's schedule (a cron, a preset or an interval: never a secret).

They are read in one read-only snapshot. Config values other than the schedule are never read;
errors leave unmasked: the caller masks them before they are shown.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy import Engine, Row, text

from connect_core.runtime.store.readers import SINK_TOPICS

__all__ = [
    "TABLES_SHOWN",
    "TIMINGS",
    "ConnectorActivity",
    "FailedRun",
    "PoolLoad",
    "RunPoint",
    "RunningRun",
    "TableVersion",
    "connector_activity",
    "failed_runs",
    "pool_load",
]

#: The timings a run's stats hold (seconds), in the order a run spends them; the newest run's are read.
TIMINGS = ("python_s", "spark_session_s", "work_s", "commit_s", "run_s")
#: A sink's tables in `ConnectorActivity.tables`: the most recently written, at most this many.
TABLES_SHOWN = 20
#: Of one run's tables, the first this many are read, names and versions cut to these lengths: what
#: the runner records (`execution.runner._write_report`); stats another writer left are held to it too.
_TABLES_READ, _TABLE_NAME_CHARS, _TABLE_VERSION_CHARS = 20, 300, 40

# Each connector's last `:runs` finished runs, by the index on (connector, id): a few index reads
# per connector, whatever the history holds; the newest one's timings; and how many of its
# retained runs failed. Of a sink, the tables (`sdk.WRITE_TABLES`, in the stats' `target`) of the
# newest committed run of each task that reported some, among those runs: they leave the database
# once per task, not once per run. A run is its task's newest to report tables when no newer run of
# the task did: `newer` gathers the task ids of the newer runs that did, in the order the rows are
# read anyway (a window partitioned by task would sort, so read, the connector's whole history
# before the `LIMIT`). A run with nothing new to write reports no tables: the run before it says
# the version its tables are at.
_TIMINGS_OBJECT = "jsonb_build_object(" + ", ".join(f"'{k}', r.stats->'{k}'" for k in TIMINGS) + ")"
_TABLES = "r.stats->'target'->'tables'"
_REPORTED_TABLES = f"c.type = 'sink' AND r.state = 'SUCCEEDED' AND jsonb_typeof({_TABLES}) = 'array'"
_RUNS = text(
    f"""
    SELECT c.name AS connector, r.id, r.task_id, r.state, r.rows, r.duration_s, r.finished_at, r.timings,
           r.tables, f.failures
    FROM connect.connectors c
    CROSS JOIN LATERAL (
        SELECT r.id, r.task_id, r.state, r.finished_at,
               CASE WHEN jsonb_typeof(r.stats->'rows') = 'number' THEN (r.stats->>'rows')::float8 END AS rows,
               extract(epoch FROM r.finished_at - r.started_at)::float8 AS duration_s,
               CASE WHEN row_number() OVER (ORDER BY r.id DESC) = 1 THEN {_TIMINGS_OBJECT} END AS timings,
               CASE WHEN {_REPORTED_TABLES}
                     AND r.task_id <> ALL(coalesce(array_agg(r.task_id) FILTER (WHERE {_REPORTED_TABLES}) OVER newer, '{{}}'))
                    THEN {_TABLES} END AS tables
        FROM connect.task_runs r
        WHERE r.connector = c.name AND r.state <> 'RUNNING'
        WINDOW newer AS (ORDER BY r.id DESC ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
        ORDER BY r.id DESC
        LIMIT :runs) r
    CROSS JOIN LATERAL (
        SELECT count(*) AS failures FROM connect.task_runs x WHERE x.connector = c.name AND x.state = 'FAILED') f
    ORDER BY c.name, r.id
    """
)

# The runs running now: RUNNING with their lease held (a run whose driver died keeps its state
# until another run takes the lease over; it is not running). An index read per task.
_RUNNING = text(
    """
    SELECT r.connector, r.task_id, r.id, r.started_at, r.pool
    FROM connect.task_configs t
    CROSS JOIN LATERAL (
        SELECT r.connector, r.task_id, r.id, r.started_at, r.pool
        FROM connect.task_runs r
        WHERE r.connector = t.connector AND r.task_id = t.task_id AND r.state = 'RUNNING'
          AND r.lease_expires_at > now()) r
    ORDER BY r.connector, r.task_id, r.id
    """
)

# When a later run of a failed run's task succeeded (NULL: none did), by the (connector, task_id,
# state) index: the failure is past then.
_SUCCEEDED_SINCE = """
    (SELECT s.finished_at FROM connect.task_runs s
     WHERE s.connector = e.connector AND s.task_id = e.task_id AND s.state = 'SUCCEEDED' AND s.id > e.id
     ORDER BY s.id DESC LIMIT 1) AS succeeded_since
"""

# Each connector's newest failed run with its error: the error text leaves the database only for it,
# and only its tail (where the cause is; the readers show less).
_LAST_ERRORS = text(
    f"""
    SELECT e.*, {_SUCCEEDED_SINCE}
    FROM (
        SELECT DISTINCT ON (connector) connector, id, task_id, pool, started_at, finished_at, right(error, 32768) AS error
        FROM connect.task_runs
        WHERE state = 'FAILED' AND error IS NOT NULL
        ORDER BY connector, id DESC) e
    """
)

# Each sink's records behind: the end offsets of its topics' partitions minus what it committed.
_LAGS = text(
    SINK_TOPICS
    + """
    SELECT st.name AS connector,
           sum(greatest(p.next_offset - coalesce(o.offset, 0), 0))::bigint AS lag,
           count(*) AS partitions
    FROM sink_topics st
    JOIN connect.topic_partitions p ON p.topic = st.topic
    LEFT JOIN connect.sink_offsets o ON o.connector = st.name AND o.topic = p.topic AND o.partition = p.partition
    GROUP BY st.name
    """
)

# Each connector's schedule (not a secret: a cron, a preset or an interval), and whether it set one.
_SCHEDULES = text("SELECT name, config->>'schedule' AS schedule, config ? 'schedule' AS given FROM connect.connectors")

_POOLS = text(
    """
    SELECT connector, array_agg(DISTINCT pool ORDER BY pool) AS pools
    FROM connect.assignments
    GROUP BY connector
    """
)

# What each pool holds: the connectors placed on it (their own assignment, task id -1) and the
# tasks. Pools are as the assignments name them, registered or not (a pool removed while it held
# work): with `_POOLS` in the same snapshot, every connector's pools add up to these counts.
_POOL_LOAD = text(
    """
    SELECT pool, count(*) FILTER (WHERE task_id < 0) AS connectors, count(*) FILTER (WHERE task_id >= 0) AS tasks
    FROM connect.assignments
    GROUP BY pool
    """
)

# One connector's failed runs, newest first: the (connector, task_id, state) index finds them.
_FAILED = text(
    f"""
    SELECT e.*, {_SUCCEEDED_SINCE}
    FROM (
        SELECT connector, id, task_id, pool, started_at, finished_at, right(error, 32768) AS error
        FROM connect.task_runs
        WHERE connector = :connector AND state = 'FAILED'
        ORDER BY id DESC
        LIMIT :limit) e
    ORDER BY e.id DESC
    """
)


@dataclass(frozen=True)
class RunPoint:
    """One finished run of a connector, with the connector's count of failed runs."""

    connector: str
    id: int
    task_id: int
    state: str
    #: the run's `rows` stat, when it counted one
    rows: float | None
    duration_s: float | None
    finished_at: datetime | None
    failures: int
    #: the newest run's timings (seconds, of `TIMINGS`, those its stats hold); empty for the others
    timings: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class RunningRun:
    """A run running now: RUNNING, its lease held."""

    connector: str
    task_id: int
    id: int
    started_at: datetime
    pool: str | None


@dataclass(frozen=True)
class FailedRun:
    id: int
    task_id: int
    pool: str | None
    started_at: datetime | None
    finished_at: datetime | None
    #: as the run recorded it: not masked
    error: str | None
    #: when a later run of the same task succeeded (the newest such), None while none did
    succeeded_since: datetime | None = None


@dataclass(frozen=True)
class TableVersion:
    """A table a sink's committed run wrote to (`sdk.WRITE_TABLES`), at the version the run left it:
    an Iceberg snapshot id, a Delta version; as the plugin reported them, so not masked."""

    name: str
    version: str
    run_id: int
    #: when the run ended
    at: datetime | None


@dataclass(frozen=True)
class PoolLoad:
    """What a pool holds: the connectors placed on it (a connector's own assignment), and the tasks."""

    connectors: int
    tasks: int


@dataclass(frozen=True)
class ConnectorActivity:
    """What the connectors did lately, as of one snapshot."""

    #: each connector's last finished runs, by connector name then oldest first
    runs: list[RunPoint]
    #: each connector's runs running now, by task
    running: dict[str, list[RunningRun]]
    #: each connector's newest failed run that recorded an error
    last_errors: dict[str, FailedRun]
    #: each sink's (records behind, partitions of its topics)
    lags: dict[str, tuple[int, int]]
    #: the pools each connector's work is assigned to, sorted
    pools: dict[str, list[str]]
    #: what each pool named by an assignment holds (agrees with `pools`: same snapshot, same rows)
    pool_load: dict[str, PoolLoad]
    #: each connector's `schedule` and whether its config sets one
    schedules: dict[str, tuple[str | None, bool]]
    #: each sink's tables, one per name at its newest version, by name (see the module's docstring);
    #: a sink none of whose last runs reported tables is left out
    tables: dict[str, list[TableVersion]] = field(default_factory=dict)


def connector_activity(engine: Engine, runs: int) -> ConnectorActivity:
    """The last `runs` finished runs of every connector, and the rest of `ConnectorActivity` (a sink's
    tables read with those runs): seven queries in one read-only snapshot, whatever the number of
    connectors."""
    with engine.connect() as conn:
        conn = conn.execution_options(isolation_level="REPEATABLE READ", postgresql_readonly=True)
        with conn.begin():
            run_rows = conn.execute(_RUNS, {"runs": runs}).all()
            running: dict[str, list[RunningRun]] = {}
            for r in conn.execute(_RUNNING):
                running.setdefault(r.connector, []).append(
                    RunningRun(r.connector, r.task_id, r.id, r.started_at, r.pool)
                )
            error_rows = conn.execute(_LAST_ERRORS).all()
            lags = {r.connector: (int(r.lag), int(r.partitions)) for r in conn.execute(_LAGS)}
            pools = {r.connector: list(r.pools) for r in conn.execute(_POOLS)}
            load = _pool_load(conn.execute(_POOL_LOAD))
            schedules = {r.name: (r.schedule, bool(r.given)) for r in conn.execute(_SCHEDULES)}
    points: list[RunPoint] = []
    reported: list[_Reported] = []
    # Unpacked, not read by name: a row's attributes cost ten times its positions (20,000 rows a poll).
    for connector, run_id, task_id, state, rows, duration_s, finished_at, timings, tables, failures in run_rows:
        points.append(
            RunPoint(connector, run_id, task_id, state, rows, duration_s, finished_at, int(failures), _timings(timings))
        )
        if tables is not None:
            reported.append(_Reported(connector, run_id, finished_at, tables))
    return ConnectorActivity(
        runs=points,
        running=running,
        last_errors={r.connector: _failed(r) for r in error_rows},
        lags=lags,
        pools=pools,
        pool_load=load,
        schedules=schedules,
        tables=_tables(reported),
    )


def pool_load(engine: Engine) -> dict[str, PoolLoad]:
    """What each pool named by an assignment holds (`ConnectorActivity.pool_load`, read alone)."""
    with engine.connect() as conn:
        return _pool_load(conn.execute(_POOL_LOAD))


def failed_runs(engine: Engine, connector: str, limit: int = 10) -> list[FailedRun]:
    """The connector's last `limit` failed runs, newest first."""
    with engine.connect() as conn:
        rows = conn.execute(_FAILED, {"connector": connector, "limit": limit}).all()
    return [_failed(r) for r in rows]


def _failed(r: Row[Any]) -> FailedRun:
    return FailedRun(r.id, r.task_id, r.pool, r.started_at, r.finished_at, r.error, r.succeeded_since)


def _pool_load(rows: Iterable[Row[Any]]) -> dict[str, PoolLoad]:
    return {r.pool: PoolLoad(int(r.connectors), int(r.tasks)) for r in rows}


class _Reported(NamedTuple):
    """A run of `_RUNS` that carries its tables (its task's newest to report some)."""

    connector: str
    run_id: int
    finished_at: datetime | None
    tables: list[Any]


def _tables(runs: Iterable[_Reported]) -> dict[str, list[TableVersion]]:
    """Each sink's tables over the runs that reported some (one per task): per name, the newest run's."""
    newest: dict[str, dict[str, TableVersion]] = {}
    for run in runs:
        by_name = newest.setdefault(run.connector, {})
        for name, version in _reported(run.tables):
            kept = by_name.get(name)
            if kept is None or kept.run_id < run.run_id:
                by_name[name] = TableVersion(name, version, run.run_id, run.finished_at)
    shown = {}
    for connector, by_name in newest.items():
        latest = sorted(by_name.values(), key=lambda t: t.run_id, reverse=True)[:TABLES_SHOWN]
        shown[connector] = sorted(latest, key=lambda t: t.name)
    return shown


def _reported(tables: list[Any]) -> Iterator[tuple[str, str]]:
    """The (name, version) pairs of a run's `tables`, as strings, cut; entries of another shape left out."""
    for t in tables[:_TABLES_READ]:
        if not isinstance(t, dict) or not isinstance(t.get("name"), str) or not t["name"]:
            continue
        version = t.get("version")
        if isinstance(version, bool) or not isinstance(version, str | int):
            version = ""
        yield t["name"][:_TABLE_NAME_CHARS], str(version)[:_TABLE_VERSION_CHARS]


def _timings(stats: dict[str, Any] | None) -> dict[str, float]:
    """The numbers among a run's timings (a stat another version wrote differently is left out)."""
    return {k: float(v) for k, v in (stats or {}).items() if isinstance(v, int | float) and not isinstance(v, bool)}
