"""What `GET /metrics` reports, read from the metadata store in a few set-based queries.

The metadata database is the truth: the REST server may run as several processes and the
runs happen in others (spark-submit, Airflow workers), so no process counts anything in memory.
A scrape reads, in one read-only snapshot, whatever the number of connectors:

* the run totals of every task (one `GROUP BY connector, task` over `task_runs`, plus what its
  pruned runs counted: `task_run_totals`);
* every sink's lag per topic partition (the topics' end offsets against its committed offsets), in
  records and in seconds (the age of the oldest segment it has not committed);
* every source's position age (since it last committed a position);
* every source's incremental snapshot, as its committed position holds it, and the signals waiting
  for its next run (`store.incremental`: the position is the truth, not a run's stats);
* the pools with what is assigned to each, and the rebalance generation.

Connector and task states and error totals are the status listing's (`ConnectorStore.listing`),
so `/metrics` and `GET /connectors?expand=status` always agree.

The counters among the run totals (runs committed and failed, records, records set aside) and the
last error cover the task's whole history: history retention (`store.retention`) adds what the runs
it deletes counted to the task's `task_run_totals` row in the statement that deletes them, so they
never go down (no counter reset in Prometheus) and never count a run twice. The averages and
maxima (batch size, work and commit times) are gauges over the retained runs, a window of
`history_retention_days`. Error totals live on the task's status row and are kept whole.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Engine, text

from connect_core.runtime.store.incremental import IncrementalSnapshot, read_incremental
from connect_core.runtime.store.readers import SINK_TOPICS

__all__ = [
    "RUN_COUNTERS",
    "RUN_PARTS",
    "RUN_STATS",
    "MetricsSnapshot",
    "MetricsStore",
    "PoolLoad",
    "SinkLag",
    "TaskRunTotals",
]


@dataclass(frozen=True)
class TaskRunTotals:
    """One task's runs, summed: the basis of Kafka's connector-, source- and sink-task-metrics.
    Counts and `last_error_at` cover every run the task ever finished (pruned ones by their totals),
    averages and maxima the runs still kept."""

    connector: str
    task: int
    type: str  # "source" | "sink"
    succeeded: int  # runs that committed (Kafka: offset commits completed)
    failed: int  # runs that failed or were fenced (Kafka: offset commits failed)
    records: int  # records written (source) or read (sink) by committed runs
    errored: int  # records of committed runs a transform or the task could not convert
    batch_avg: float | None
    batch_max: int | None
    work_avg_s: float | None  # a source's read-and-stage time, a sink's write time, per committed run
    work_max_s: float | None
    commit_avg_s: float | None  # only where the run's stats hold `commit_s`
    last_error_at: datetime | None  # the last run that failed or set records aside
    recent_rate: float  # records (errored included) per second of committed runs over the last `RATE_WINDOW_S`
    running_ratio: float  # the share of the last `RATE_WINDOW_S` the task spent in runs that ended
    # what a sink's committed runs wrote to its target, as it reported them (`sdk.WRITE_REPORT`)
    files_written: int = 0
    bytes_written: int = 0
    keys_deleted: int = 0


@dataclass(frozen=True)
class SinkLag:
    """Records of a topic partition a sink has not committed yet."""

    connector: str
    task: int  # the task that owns the partition (partition mod task count)
    topic: str
    partition: int
    end_offset: int
    committed: int
    lag_seconds: float  # since the oldest segment holding records past `committed` was committed (0: none)

    @property
    def lag(self) -> int:
        return max(self.end_offset - self.committed, 0)


@dataclass(frozen=True)
class SourceAge:
    """How long ago a source last committed a position (any of its source partitions)."""

    connector: str
    seconds: float


@dataclass(frozen=True)
class PoolLoad:
    pool: str
    capacity: int
    alive: bool
    seconds_since_heartbeat: float
    connectors: int  # connectors themselves assigned here (task id -1)
    tasks: int


@dataclass(frozen=True)
class MetricsSnapshot:
    runs: tuple[TaskRunTotals, ...]
    lags: tuple[SinkLag, ...]
    source_ages: tuple[SourceAge, ...]
    pools: tuple[PoolLoad, ...]
    rebalance_generation: int  # bumped by every rebalance that changed an assignment; never pruned
    last_rebalance_at: datetime | None
    incremental: tuple[IncrementalSnapshot, ...] = ()  # every source connector's, by name


def _number(value: str) -> str:
    """SQL for the JSON `value` as a float8, NULL when it is no number: one odd stat must not fail a scrape."""
    return f"CASE WHEN jsonb_typeof({value}) = 'number' THEN ({value})::float8 END"


# One finished run's parts as the totals count them, from `connect.task_runs r`; history retention
# folds the runs it deletes with the same expressions (`store.retention`), so the two always agree.
# Each run's stats are taken apart once (`jsonb_to_record`), summed as float8 (exact to 2^53,
# faster than numeric).
RUN_PARTS = f"""
    r.connector, r.task_id, r.state, r.state = 'SUCCEEDED' AS ok, r.finished_at,
    {_number("x.rows")} AS records,
    {_number("x.errors->'failed'")} AS errored,
    {_number("x.work_s")} AS work_s,
    {_number("x.commit_s")} AS commit_s,
    {_number("x.target->'files_written'")} AS files_written,
    {_number("x.target->'bytes_written'")} AS bytes_written,
    {_number("x.target->'keys_deleted'")} AS keys_deleted
    """
RUN_STATS = """
    jsonb_to_record(CASE WHEN jsonb_typeof(r.stats) = 'object' THEN r.stats ELSE '{}' END)
        AS x(rows jsonb, work_s jsonb, commit_s jsonb, errors jsonb, target jsonb)
    """
#: The counters over rows of `RUN_PARTS`: only committed runs count records (a failed run's output
#: was discarded); a run that failed or set records aside is an error.
RUN_COUNTERS = """
    count(*) FILTER (WHERE ok) AS succeeded,
    count(*) FILTER (WHERE state IN ('FAILED', 'FENCED')) AS failed,
    coalesce(sum(records) FILTER (WHERE ok), 0)::bigint AS records,
    coalesce(sum(errored) FILTER (WHERE ok), 0)::bigint AS errored,
    max(finished_at) FILTER (WHERE state = 'FAILED' OR errored > 0) AS last_error_at,
    coalesce(sum(files_written) FILTER (WHERE ok), 0)::bigint AS files_written,
    coalesce(sum(bytes_written) FILTER (WHERE ok), 0)::bigint AS bytes_written,
    coalesce(sum(keys_deleted) FILTER (WHERE ok), 0)::bigint AS keys_deleted
    """

# Per task first, then the pruned runs' totals added (a task whose runs are all pruned keeps its
# totals: the full join), then the connectors' types joined: 1,000 rows to join, not every run.
#: The window of the rates and the running ratio (Kafka samples 30 s windows; runs come hourly).
RATE_WINDOW_S = 3600

_RUNS = text(
    f"""
    WITH r AS (
        SELECT {RUN_PARTS},
               extract(epoch FROM r.finished_at - greatest(r.started_at, now() - make_interval(secs => :window)))
                   AS recent_s
        FROM connect.task_runs r, {RUN_STATS}
        WHERE r.state <> 'RUNNING'),
    t AS (
        SELECT connector, task_id, {RUN_COUNTERS},
               avg(records) FILTER (WHERE ok) AS batch_avg,
               (max(records) FILTER (WHERE ok))::bigint AS batch_max,
               avg(work_s) FILTER (WHERE ok) AS work_avg_s,
               max(work_s) FILTER (WHERE ok) AS work_max_s,
               avg(commit_s) FILTER (WHERE ok) AS commit_avg_s,
               coalesce(sum(records + coalesce(errored, 0)) FILTER (WHERE ok AND recent_s > 0), 0)
                   / :window AS recent_rate,
               least(coalesce(sum(recent_s) FILTER (WHERE recent_s > 0), 0) / :window, 1) AS running_ratio
        FROM r
        GROUP BY connector, task_id),
    a AS (
        SELECT coalesce(t.connector, p.connector) AS connector, coalesce(t.task_id, p.task_id) AS task_id,
               coalesce(t.succeeded, 0) + coalesce(p.succeeded, 0) AS succeeded,
               coalesce(t.failed, 0) + coalesce(p.failed, 0) AS failed,
               coalesce(t.records, 0) + coalesce(p.records, 0) AS records,
               coalesce(t.errored, 0) + coalesce(p.errored, 0) AS errored,
               t.batch_avg, t.batch_max, t.work_avg_s, t.work_max_s, t.commit_avg_s,
               greatest(t.last_error_at, p.last_error_at) AS last_error_at,
               coalesce(t.recent_rate, 0) AS recent_rate, coalesce(t.running_ratio, 0) AS running_ratio,
               coalesce(t.files_written, 0) + coalesce(p.files_written, 0) AS files_written,
               coalesce(t.bytes_written, 0) + coalesce(p.bytes_written, 0) AS bytes_written,
               coalesce(t.keys_deleted, 0) + coalesce(p.keys_deleted, 0) AS keys_deleted
        FROM t FULL JOIN connect.task_run_totals p ON p.connector = t.connector AND p.task_id = t.task_id)
    SELECT a.connector, a.task_id, c.type, a.succeeded, a.failed, a.records, a.errored, a.batch_avg, a.batch_max,
           a.work_avg_s, a.work_max_s, a.commit_avg_s, a.last_error_at, a.recent_rate::float8, a.running_ratio::float8,
           a.files_written, a.bytes_written, a.keys_deleted
    FROM a JOIN connect.connectors c ON c.name = a.connector
    ORDER BY a.connector, a.task_id
    """
)

# Only topics that exist are joined (`readers.SINK_TOPICS` reads them from the sinks' configs): a
# config value never becomes a label unless it names a real topic.
_LAGS = text(
    SINK_TOPICS
    + """
    SELECT st.name AS connector, (p.partition % st.tasks)::int AS task, p.topic, p.partition,
           p.next_offset AS end_offset, coalesce(o.offset, 0) AS committed,
           coalesce((SELECT extract(epoch FROM now() - g.created_at)
                     FROM connect.topic_segments g
                     WHERE g.topic = p.topic AND g.partition = p.partition AND g.end_offset > coalesce(o.offset, 0)
                     ORDER BY g.start_offset LIMIT 1), 0)::float8 AS lag_seconds
    FROM sink_topics st
    JOIN connect.topic_partitions p ON p.topic = st.topic
    LEFT JOIN connect.sink_offsets o ON o.connector = st.name AND o.topic = p.topic AND o.partition = p.partition
    ORDER BY st.name, p.topic, p.partition
    """
)

_SOURCE_AGES = text(
    """
    SELECT p.connector, extract(epoch FROM now() - max(p.updated_at))::float8
    FROM connect.source_positions p
    JOIN connect.connectors c ON c.name = p.connector AND c.type = 'source'
    GROUP BY p.connector
    ORDER BY p.connector
    """
)

# Alive as `PoolStore.list` decides it: a local[…] pool always, any other while it heartbeats.
_POOLS = text(
    """
    SELECT p.name, p.capacity,
           (p.master LIKE 'local%' OR p.heartbeat_at >= now() - make_interval(secs => :timeout)) AS alive,
           extract(epoch FROM now() - p.heartbeat_at)::float8 AS age,
           count(a.task_id) FILTER (WHERE a.task_id < 0) AS connectors,
           count(a.task_id) FILTER (WHERE a.task_id >= 0) AS tasks
    FROM connect.spark_pools p
    LEFT JOIN connect.assignments a ON a.pool = p.name
    GROUP BY p.name
    ORDER BY p.name
    """
)

_REBALANCE = text(
    """
    SELECT (SELECT generation FROM connect.rebalance_state WHERE id = 1) AS generation,
           (SELECT created_at FROM connect.rebalance_log ORDER BY id DESC LIMIT 1) AS last_at
    """
)


class MetricsStore:
    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def snapshot(self, heartbeat_timeout: float) -> MetricsSnapshot:
        """Run totals, sink lags, pools, the rebalance generation and the sources' incremental
        snapshots, in one read-only snapshot."""
        with self._engine.connect() as conn:
            conn = conn.execution_options(isolation_level="REPEATABLE READ", postgresql_readonly=True)
            with conn.begin():
                runs = tuple(TaskRunTotals(*row) for row in conn.execute(_RUNS, {"window": RATE_WINDOW_S}))
                lags = tuple(SinkLag(*row) for row in conn.execute(_LAGS))
                ages = tuple(SourceAge(*row) for row in conn.execute(_SOURCE_AGES))
                pools = tuple(PoolLoad(*row) for row in conn.execute(_POOLS, {"timeout": float(heartbeat_timeout)}))
                generation, last_at = conn.execute(_REBALANCE).one()
                incremental = tuple(read_incremental(conn))
        return MetricsSnapshot(runs, lags, ages, pools, int(generation or 0), last_at, incremental)
