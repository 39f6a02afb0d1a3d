"""Read models of the Connect view: what every connector did lately, in a handful of set-based
queries whatever the number of connectors (the page polls them every few seconds).

* the last finished runs of every connector (for the sparkline) and its count of failed runs:
  a few index reads per connector (`task_runs(connector, id)`), whatever the history holds;
* the newest failed run's error: one `DISTINCT ON` over the failed runs;
* each sink's lag (records of its topics it has not committed): one `GROUP BY` over the topics'
  end offsets and the sinks' offsets, the query `GET /metrics` uses per partition;
* the pools each connector is assigned to: one `GROUP BY` over the assignments;
* each connector's schedule (a cron, a preset or an interval: never a secret).

They are read in one read-only snapshot. Config values other than the schedule are never read;
errors leave unmasked: the caller masks them before they are shown.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Engine, Row, text

from connect_core.runtime.store.readers import SINK_TOPICS

__all__ = ["ConnectorActivity", "FailedRun", "RunPoint", "connector_activity", "failed_runs"]

# Each connector's last `:runs` finished runs, by the index on (connector, id): a few index reads
# per connector, whatever the history holds; and how many of its retained runs failed.
_RUNS = text(
    """
    SELECT c.name AS connector, r.id, r.task_id, r.state, r.rows, r.duration_s, r.finished_at, f.failures
    FROM connect.connectors c
    CROSS JOIN LATERAL (
        SELECT r.id, r.task_id, r.state, r.finished_at,
               CASE WHEN jsonb_typeof(r.stats->'rows') = 'number' THEN (r.stats->>'rows')::float8 END AS rows,
               extract(epoch FROM r.finished_at - r.started_at)::float8 AS duration_s
        FROM connect.task_runs r
        WHERE r.connector = c.name AND r.state <> 'RUNNING'
        ORDER BY r.id DESC
        LIMIT :runs) r
    CROSS JOIN LATERAL (
        SELECT count(*) AS failures FROM connect.task_runs x WHERE x.connector = c.name AND x.state = 'FAILED') f
    ORDER BY c.name, r.id
    """
)

# Each connector's newest failed run with its error: the error text leaves the database only for it.
_LAST_ERRORS = text(
    """
    SELECT DISTINCT ON (connector) connector, id, task_id, pool, started_at, finished_at, error
    FROM connect.task_runs
    WHERE state = 'FAILED' AND error IS NOT NULL
    ORDER BY connector, id DESC
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

# One connector's failed runs, newest first: the (connector, task_id, state) index finds them.
_FAILED = text(
    """
    SELECT id, task_id, pool, started_at, finished_at, error
    FROM connect.task_runs
    WHERE connector = :connector AND state = 'FAILED'
    ORDER BY id DESC
    LIMIT :limit
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


@dataclass(frozen=True)
class FailedRun:
    id: int
    task_id: int
    pool: str | None
    started_at: datetime | None
    finished_at: datetime | None
    #: as the run recorded it: not masked
    error: str | None


@dataclass(frozen=True)
class ConnectorActivity:
    """What the connectors did lately, as of one snapshot."""

    #: each connector's last finished runs, by connector name then oldest first
    runs: list[RunPoint]
    #: each connector's newest failed run that recorded an error
    last_errors: dict[str, FailedRun]
    #: each sink's (records behind, partitions of its topics)
    lags: dict[str, tuple[int, int]]
    #: the pools each connector's work is assigned to, sorted
    pools: dict[str, list[str]]
    #: each connector's `schedule` and whether its config sets one
    schedules: dict[str, tuple[str | None, bool]]


def connector_activity(engine: Engine, runs: int) -> ConnectorActivity:
    """The last `runs` finished runs of every connector, and the rest of `ConnectorActivity`: five
    queries in one read-only snapshot, whatever the number of connectors."""
    with engine.connect() as conn:
        conn = conn.execution_options(isolation_level="REPEATABLE READ", postgresql_readonly=True)
        with conn.begin():
            run_rows = conn.execute(_RUNS, {"runs": runs}).all()
            error_rows = conn.execute(_LAST_ERRORS).all()
            lags = {r.connector: (int(r.lag), int(r.partitions)) for r in conn.execute(_LAGS)}
            pools = {r.connector: list(r.pools) for r in conn.execute(_POOLS)}
            schedules = {r.name: (r.schedule, bool(r.given)) for r in conn.execute(_SCHEDULES)}
    return ConnectorActivity(
        runs=[
            RunPoint(r.connector, r.id, r.task_id, r.state, r.rows, r.duration_s, r.finished_at, int(r.failures))
            for r in run_rows
        ],
        last_errors={r.connector: _failed(r) for r in error_rows},
        lags=lags,
        pools=pools,
        schedules=schedules,
    )


def failed_runs(engine: Engine, connector: str, limit: int = 10) -> list[FailedRun]:
    """The connector's last `limit` failed runs, newest first."""
    with engine.connect() as conn:
        rows = conn.execute(_FAILED, {"connector": connector, "limit": limit}).all()
    return [_failed(r) for r in rows]


def _failed(r: Row[Any]) -> FailedRun:
    return FailedRun(r.id, r.task_id, r.pool, r.started_at, r.finished_at, r.error)
