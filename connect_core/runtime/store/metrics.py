"""What `GET /metrics` reports, read from the metadata store in a few set-based queries.

The metadata database is the truth: the REST server may run as several processes and the
runs happen in others (spark-submit, Airflow workers), so no process counts anything in memory.
A scrape reads, in one read-only snapshot, whatever the number of connectors:

* the run totals of every task (one `GROUP BY connector, task` over `task_runs`);
* every sink's lag per topic partition (the topics' end offsets against its committed offsets);
* the pools with what is assigned to each, and the rebalance generation.

Connector and task states and error totals are the status listing's (`ConnectorStore.listing`),
so `/metrics` and `GET /connectors?expand=status` always agree.

Run totals cover the retained run history (`history_retention_days`): pruning old runs lowers
them, which Prometheus reads as a counter reset. Error totals live on the task's status row and
are kept whole.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Engine, text

from connect_core.runtime.store.readers import SINK_TOPICS

__all__ = ["MetricsSnapshot", "MetricsStore", "PoolLoad", "SinkLag", "TaskRunTotals"]


@dataclass(frozen=True)
class TaskRunTotals:
    """One task's runs, summed: the basis of Kafka's connector-, source- and sink-task-metrics."""

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


@dataclass(frozen=True)
class SinkLag:
    """Records of a topic partition a sink has not committed yet."""

    connector: str
    task: int  # the task that owns the partition (partition mod task count)
    topic: str
    partition: int
    end_offset: int
    committed: int

    @property
    def lag(self) -> int:
        return max(self.end_offset - self.committed, 0)


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
    pools: tuple[PoolLoad, ...]
    rebalance_generation: int  # bumped by every rebalance that changed an assignment; never pruned
    last_rebalance_at: datetime | None


def _number(value: str) -> str:
    """SQL for the JSON `value` as a float8, NULL when it is no number: one odd stat must not fail a scrape."""
    return f"CASE WHEN jsonb_typeof({value}) = 'number' THEN ({value})::float8 END"


# Only committed runs count records: a failed run's output was discarded. Each run's stats are
# taken apart once (`jsonb_to_record`), summed as float8 (exact to 2^53, faster than numeric),
# per task first and joined to the connectors' types after: 1,000 rows to join, not every run.
_RUNS = text(
    f"""
    WITH r AS (
        SELECT r.connector, r.task_id, r.state, r.state = 'SUCCEEDED' AS ok, r.finished_at,
               {_number("x.rows")} AS records,
               {_number("x.errors->'failed'")} AS errored,
               {_number("x.work_s")} AS work_s,
               {_number("x.commit_s")} AS commit_s
        FROM connect.task_runs r,
             jsonb_to_record(CASE WHEN jsonb_typeof(r.stats) = 'object' THEN r.stats ELSE '{{}}' END)
                 AS x(rows jsonb, work_s jsonb, commit_s jsonb, errors jsonb)
        WHERE r.state <> 'RUNNING'),
    t AS (
        SELECT connector, task_id,
               count(*) FILTER (WHERE ok) AS succeeded,
               count(*) FILTER (WHERE state IN ('FAILED', 'FENCED')) AS failed,
               coalesce(sum(records) FILTER (WHERE ok), 0)::bigint AS records,
               coalesce(sum(errored) FILTER (WHERE ok), 0)::bigint AS errored,
               avg(records) FILTER (WHERE ok) AS batch_avg,
               (max(records) FILTER (WHERE ok))::bigint AS batch_max,
               avg(work_s) FILTER (WHERE ok) AS work_avg_s,
               max(work_s) FILTER (WHERE ok) AS work_max_s,
               avg(commit_s) FILTER (WHERE ok) AS commit_avg_s,
               max(finished_at) FILTER (WHERE state = 'FAILED' OR errored > 0) AS last_error_at
        FROM r
        GROUP BY connector, task_id)
    SELECT t.connector, t.task_id, c.type, t.succeeded, t.failed, t.records, t.errored, t.batch_avg, t.batch_max,
           t.work_avg_s, t.work_max_s, t.commit_avg_s, t.last_error_at
    FROM t JOIN connect.connectors c ON c.name = t.connector
    ORDER BY t.connector, t.task_id
    """
)

# Only topics that exist are joined (`readers.SINK_TOPICS` reads them from the sinks' configs): a
# config value never becomes a label unless it names a real topic.
_LAGS = text(
    SINK_TOPICS
    + """
    SELECT st.name AS connector, (p.partition % st.tasks)::int AS task, p.topic, p.partition,
           p.next_offset AS end_offset, coalesce(o.offset, 0) AS committed
    FROM sink_topics st
    JOIN connect.topic_partitions p ON p.topic = st.topic
    LEFT JOIN connect.sink_offsets o ON o.connector = st.name AND o.topic = p.topic AND o.partition = p.partition
    ORDER BY st.name, p.topic, p.partition
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
        """Run totals, sink lags, pools and the rebalance generation, in one read-only snapshot."""
        with self._engine.connect() as conn:
            conn = conn.execution_options(isolation_level="REPEATABLE READ", postgresql_readonly=True)
            with conn.begin():
                runs = tuple(TaskRunTotals(*row) for row in conn.execute(_RUNS))
                lags = tuple(SinkLag(*row) for row in conn.execute(_LAGS))
                pools = tuple(PoolLoad(*row) for row in conn.execute(_POOLS, {"timeout": float(heartbeat_timeout)}))
                generation, last_at = conn.execute(_REBALANCE).one()
        return MetricsSnapshot(runs, lags, pools, int(generation or 0), last_at)
