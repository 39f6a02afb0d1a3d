"""`GET /metrics`: Kafka Connect's metrics in Prometheus' text format, read at scrape time.

Nothing is counted in this process: the REST server may be several processes and the runs
happen elsewhere, so every scrape reads the metadata store (a handful of set-based queries,
whatever the number of connectors: `connect_core.runtime.store.metrics`) and a
`prometheus_client` collector turns that one read into metric families.

Kafka's metric groups and names become `kafka_connect_<group>_<name>` (the group without its
`-metrics`, dashes as underscores), labelled `connector`, `task` (and `topic`, `partition`,
`pool`, `type`, `state`); counters end in `_total` as Prometheus names them, times are in
milliseconds as Kafka's, timestamps in seconds as Prometheus'. For example:

=====================================================  =================================================
Kafka (group / name)                                   Prometheus
=====================================================  =================================================
connector-metrics status                               kafka_connect_connector_status{state} 1
connector-task-metrics status                          kafka_connect_connector_task_status{state} 1
connector-task-metrics batch-size-avg                  kafka_connect_connector_task_batch_size_avg
connector-task-metrics running-ratio                   kafka_connect_connector_task_running_ratio
connector-task-metrics offset-commit-avg-time-ms       kafka_connect_connector_task_offset_commit_avg_time_ms
source-task-metrics source-record-poll-total           kafka_connect_source_task_source_record_poll_total
source-task-metrics source-record-poll-rate            kafka_connect_source_task_source_record_poll_rate
sink-task-metrics sink-record-lag-max                  kafka_connect_sink_task_sink_record_lag_max
task-error-metrics total-record-errors                 kafka_connect_task_error_record_errors_total
task-error-metrics last-error-timestamp                kafka_connect_task_error_last_error_timestamp_seconds
connect-worker-rebalance-metrics completed-rebalances  kafka_connect_worker_rebalance_completed_rebalances_total
=====================================================  =================================================

Two of this runtime's own, as the issue's lag asks: `kafka_connect_sink_task_sink_record_lag_seconds`
(per topic partition: since the oldest records the sink has not committed were written) and
`kafka_connect_source_task_position_age_seconds{connector}` (since the source last committed a
position).

A log-based source's incremental snapshot (Debezium's signals) is reported as Debezium's snapshot
metrics (`debezium.<db>:type=connector-metrics,context=snapshot`), the group `snapshot`, labelled
`connector`, read from its committed position (the truth: a run's stats also say it, but a failed
run's describe a progress that was never committed). Every source whose plugin acts on signals has
them, 0 when no snapshot runs:

=====================================================  =================================================
Debezium (snapshot metrics)                            Prometheus
=====================================================  =================================================
SnapshotRunning                                        kafka_connect_snapshot_running
SnapshotPaused                                         kafka_connect_snapshot_paused
RemainingTableCount                                    kafka_connect_snapshot_remaining_table_count
RowsScanned (a map by table)                           kafka_connect_snapshot_rows_scanned{table}
(ChunkId names the chunk; here a count, an extension)  kafka_connect_snapshot_chunks_read{table}
(extension: signals sent, no run took yet)             kafka_connect_snapshot_signals_pending
=====================================================  =================================================

Only of the table being read: the progress keeps no other's. Debezium's `ChunkFrom`/`ChunkTo`,
`TableFrom`/`TableTo` are key values, the user's data: never a label nor a value here. Its
`SnapshotCompleted` and `TotalTableCount` are not kept by the progress (done is its absence).

A micro-batch run is the unit here: a source's "poll" is a run's read, a sink's "put" a run's
write, an "offset commit" a run's commit. Labels hold only connector names, task ids, topics,
partitions, pools and the table a source's snapshot reads: never a config value. The route has the app's auth, as every route; a
metadata store that cannot be reached answers 503 with the reason (`errors.answer_for`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Annotated

from fastapi import APIRouter, Depends, Request, Response
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import choose_encoder, generate_latest
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString
from starlette.concurrency import run_in_threadpool

from connect_core.rest.deps import service
from connect_core.rest.errors import storable_params
from connect_core.rest.service import ConnectService
from connect_core.runtime.context import Runtime
from connect_core.runtime.store.connectors import ConnectorStatus, Page
from connect_core.runtime.store.incremental import IncrementalSnapshot, signal_takers
from connect_core.runtime.store.metrics import MetricsSnapshot, MetricsStore, TaskRunTotals

__all__ = ["ConnectCollector", "encode_text", "read_collector", "router"]

router = APIRouter(tags=["Metrics"], dependencies=[Depends(storable_params)])
Svc = Annotated[ConnectService, Depends(service)]

_PREFIX = "kafka_connect"
_TASK = ("connector", "task")


@dataclass(frozen=True)
class _RunMetric:
    """A metric of each task's run totals: `value` None means no sample (e.g. no committed run yet)."""

    name: str
    doc: str
    value: Callable[[TaskRunTotals], float | None]
    counter: bool = False
    type: str | None = None  # only the tasks of source or of sink connectors


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else seconds * 1000


def _success(r: TaskRunTotals) -> float | None:
    ended = r.succeeded + r.failed
    return r.succeeded / ended if ended else None


_RUN_METRICS = (
    _RunMetric("connector_task_batch_size_avg", "Records per committed run (batch-size-avg).", lambda r: r.batch_avg),
    _RunMetric(
        "connector_task_running_ratio",
        "The share of the last hour the task spent in runs (running-ratio: a micro-batch task is idle between runs).",
        lambda r: r.running_ratio,
    ),
    _RunMetric(
        "source_task_source_record_poll_rate",
        "Records per second read by committed runs over the last hour (source-record-poll-rate).",
        lambda r: r.recent_rate,
        type="source",
    ),
    _RunMetric(
        "sink_task_sink_record_read_rate",
        "Records per second read by committed runs over the last hour (sink-record-read-rate).",
        lambda r: r.recent_rate,
        type="sink",
    ),
    _RunMetric(
        "connector_task_batch_size_max", "Most records of a committed run (batch-size-max).", lambda r: r.batch_max
    ),
    _RunMetric(
        "connector_task_offset_commit_avg_time_ms",
        "Time a run's commit took (offset-commit-avg-time-ms).",
        lambda r: _ms(r.commit_avg_s),
    ),
    _RunMetric(
        "connector_task_offset_commit_success_percentage",
        "Runs that committed, of those that ended (offset-commit-success-percentage, 0-1).",
        _success,
    ),
    _RunMetric(
        "source_task_source_record_poll",
        "Records read by committed runs, including those set aside as errors (source-record-poll-total).",
        lambda r: r.records + r.errored,
        counter=True,
        type="source",
    ),
    _RunMetric(
        "source_task_source_record_write",
        "Records written to topics by committed runs (source-record-write-total).",
        lambda r: r.records,
        counter=True,
        type="source",
    ),
    _RunMetric(
        "source_task_poll_batch_avg_time_ms",
        "A committed run's read and staging time, average (poll-batch-avg-time-ms).",
        lambda r: _ms(r.work_avg_s),
        type="source",
    ),
    _RunMetric(
        "source_task_poll_batch_max_time_ms",
        "A committed run's read and staging time, longest (poll-batch-max-time-ms).",
        lambda r: _ms(r.work_max_s),
        type="source",
    ),
    _RunMetric(
        "sink_task_sink_record_read",
        "Records read from topics by committed runs (sink-record-read-total).",
        lambda r: r.records,
        counter=True,
        type="sink",
    ),
    _RunMetric(
        "sink_task_sink_record_send",
        "Records read and not set aside as errors (sink-record-send-total).",
        lambda r: max(r.records - r.errored, 0),
        counter=True,
        type="sink",
    ),
    _RunMetric(
        "sink_task_put_batch_avg_time_ms",
        "A committed run's write time, average (put-batch-avg-time-ms).",
        lambda r: _ms(r.work_avg_s),
        type="sink",
    ),
    _RunMetric(
        "sink_task_put_batch_max_time_ms",
        "A committed run's write time, longest (put-batch-max-time-ms).",
        lambda r: _ms(r.work_max_s),
        type="sink",
    ),
    _RunMetric(
        "sink_task_offset_commit_completion",
        "Offset commits: committed runs (offset-commit-completion-total).",
        lambda r: r.succeeded,
        counter=True,
        type="sink",
    ),
    _RunMetric(
        "sink_task_target_files_written",
        "Files committed runs wrote to the target, as the sink reports them (data files, objects; extension).",
        lambda r: r.files_written,
        counter=True,
        type="sink",
    ),
    _RunMetric(
        "sink_task_target_bytes_written",
        "Bytes of those files, as the sink reports them (extension).",
        lambda r: r.bytes_written,
        counter=True,
        type="sink",
    ),
    _RunMetric(
        "sink_task_target_keys_deleted",
        "Keys committed runs deleted in the target (upserts and deletes; extension).",
        lambda r: r.keys_deleted,
        counter=True,
        type="sink",
    ),
    _RunMetric(
        "task_error_last_error_timestamp_seconds",
        "When the task's last run failed or set records aside (last-error-timestamp).",
        lambda r: r.last_error_at.timestamp() if r.last_error_at else None,
    ),
)

#: Kafka's task-error-metrics, by the key the runner counts them under in a task's error totals.
_ERROR_COUNTERS = (
    ("failed", "record_errors", "Records that failed in a transform or the task (total-record-errors)."),
    ("skipped", "records_skipped", "Records skipped under errors.tolerance=all (total-records-skipped)."),
    ("retried", "retries", "Retries of a run's operation (total-retries)."),
    (
        "dead_lettered",
        "deadletterqueue_produce_requests",
        "Records written to the dead-letter topic (deadletterqueue-produce-requests).",
    ),
)


@dataclass(frozen=True)
class ConnectCollector:
    """Metric families of one read of the metadata store (a `prometheus_client` collector).

    Each family is built when the encoder asks for it and dropped once written: a scrape of
    thousands of tasks holds one family's samples at a time, not all of them."""

    statuses: Sequence[ConnectorStatus]
    snapshot: MetricsSnapshot
    #: the source connectors whose plugin acts on signals: their snapshot metrics exist, 0 included
    signal_sources: frozenset[str] = frozenset()

    def collect(self) -> Iterator[Metric]:
        yield from self._states()
        for spec in _RUN_METRICS:
            yield self._runs(spec)
        yield from self._lags()
        for key, name, doc in _ERROR_COUNTERS:
            yield self._errors(key, name, doc)
        yield from self._pools()
        yield from self._snapshots()

    def _states(self) -> Iterator[Metric]:
        connectors = _gauge(
            "connector_status", "The connector's state (1 for the current one).", "connector", "type", "state"
        )
        for st in self.statuses:
            connectors.add_metric([st.name, st.type, st.state], 1)
        yield connectors
        tasks = _gauge("connector_task_status", "The task's state (1 for the current one).", *_TASK, "state")
        for st in self.statuses:
            for t in st.tasks:
                tasks.add_metric([st.name, str(t.id), t.state], 1)
        yield tasks
        yield GaugeMetricFamily(
            f"{_PREFIX}_worker_connector_count", "Connectors (connector-count).", len(self.statuses)
        )
        task_count = sum(len(st.tasks) for st in self.statuses)
        yield GaugeMetricFamily(f"{_PREFIX}_worker_task_count", "Tasks with a status (task-count).", task_count)

    def _runs(self, spec: _RunMetric) -> Metric:
        family = _counter(spec.name, spec.doc, *_TASK) if spec.counter else _gauge(spec.name, spec.doc, *_TASK)
        for r in self.snapshot.runs:
            if spec.type is None or r.type == spec.type:
                value = spec.value(r)
                if value is not None:
                    family.add_metric([r.connector, str(r.task)], value)
        return family

    def _lags(self) -> Iterator[Metric]:
        lag = _gauge(
            "sink_task_sink_record_lag",
            "Records of the topic partition the sink has not committed (its end offset minus the sink's offset).",
            *_TASK,
            "topic",
            "partition",
        )
        most: dict[tuple[str, int], int] = {}
        for item in self.snapshot.lags:
            lag.add_metric([item.connector, str(item.task), item.topic, str(item.partition)], item.lag)
            key = (item.connector, item.task)
            most[key] = max(most.get(key, 0), item.lag)
        yield lag
        lag_max = _gauge(
            "sink_task_sink_record_lag_max", "The task's largest partition lag (sink-record-lag-max).", *_TASK
        )
        for (connector, task), value in most.items():
            lag_max.add_metric([connector, str(task)], value)
        yield lag_max
        seconds = _gauge(
            "sink_task_sink_record_lag_seconds",
            "Seconds since the oldest records of the topic partition the sink has not committed were written (0: none).",
            *_TASK,
            "topic",
            "partition",
        )
        for item in self.snapshot.lags:
            seconds.add_metric(
                [item.connector, str(item.task), item.topic, str(item.partition)], round(item.lag_seconds, 3)
            )
        yield seconds
        age = _gauge(
            "source_task_position_age_seconds", "Seconds since the source last committed a position.", "connector"
        )
        for source in self.snapshot.source_ages:
            age.add_metric([source.connector], round(source.seconds, 3))
        yield age

    def _errors(self, key: str, name: str, doc: str) -> Metric:
        """Every task's total, 0 included: a counter that exists from the start shows its first increase."""
        family = _counter(f"task_error_{name}", doc, *_TASK)
        for st in self.statuses:
            for t in st.tasks:
                family.add_metric([st.name, str(t.id)], int(t.errors.get(key, 0)))
        return family

    def _pools(self) -> Iterator[Metric]:
        pools = self.snapshot.pools
        for name, doc, value in (
            ("pool_alive", "Whether the Spark pool (a Connect worker) heartbeats (1) or not (0).", lambda p: p.alive),
            ("pool_capacity", "Concurrent tasks the pool runs.", lambda p: p.capacity),
            (
                "pool_seconds_since_heartbeat",
                "Seconds since the pool's last heartbeat.",
                lambda p: p.seconds_since_heartbeat,
            ),
            ("pool_assigned_tasks", "Tasks assigned to the pool.", lambda p: p.tasks),
            ("pool_assigned_connectors", "Connectors assigned to the pool.", lambda p: p.connectors),
        ):
            family = _gauge(name, doc, "pool")
            for p in pools:
                family.add_metric([p.pool], float(value(p)))
            yield family
        generation = self.snapshot.rebalance_generation
        yield CounterMetricFamily(
            f"{_PREFIX}_worker_rebalance_completed_rebalances",
            "Rebalances that changed an assignment (completed-rebalances-total).",
            generation,
        )
        yield GaugeMetricFamily(
            f"{_PREFIX}_worker_rebalance_epoch", "The assignment's rebalance generation (epoch).", generation
        )
        if self.snapshot.last_rebalance_at is not None:
            yield GaugeMetricFamily(
                f"{_PREFIX}_worker_rebalance_last_rebalance_timestamp_seconds",
                "When the last rebalance committed.",
                self.snapshot.last_rebalance_at.timestamp(),
            )

    def _snapshots(self) -> Iterator[Metric]:
        """Debezium's snapshot metrics of each source that acts on signals (or whose position holds a
        snapshot); those of the table being read only while one is."""
        shown = [s for s in self.snapshot.incremental if s.active or s.connector in self.signal_sources]
        for name, doc, value in _SNAPSHOT_METRICS:
            family = _gauge(name, doc, "connector")
            for s in shown:
                family.add_metric([s.connector], value(s))
            yield family
        for name, doc, count in _SNAPSHOT_TABLE_METRICS:
            family = _gauge(name, doc, "connector", "table")
            for s in shown:
                if s.table is not None:
                    family.add_metric([s.connector, s.table], count(s))
            yield family


#: Debezium's snapshot metrics (`context=snapshot`) of a connector, and two of this runtime's own.
_SNAPSHOT_METRICS: tuple[tuple[str, str, Callable[[IncrementalSnapshot], float]], ...] = (
    (
        "snapshot_running",
        "Whether an incremental snapshot reads a table (1), or none runs, is paused or done (0) (SnapshotRunning; "
        "the snapshot's own state: a paused or stopped connector reads nothing either).",
        lambda s: float(s.running),
    ),
    ("snapshot_paused", "Whether the incremental snapshot is paused (SnapshotPaused).", lambda s: float(s.paused)),
    (
        "snapshot_remaining_table_count",
        "Tables the incremental snapshot has still to read, the one being read included (RemainingTableCount).",
        lambda s: float(s.remaining),
    ),
    (
        "snapshot_signals_pending",
        "Signals sent over REST that no run of the connector has taken yet (extension).",
        lambda s: float(s.pending_count),
    ),
)
_SNAPSHOT_TABLE_METRICS: tuple[tuple[str, str, Callable[[IncrementalSnapshot], float]], ...] = (
    (
        "snapshot_rows_scanned",
        "Rows the incremental snapshot has read of the table it is reading (RowsScanned).",
        lambda s: float(s.rows),
    ),
    (
        "snapshot_chunks_read",
        "Chunks (by primary key) the incremental snapshot has read of the table it is reading (extension).",
        lambda s: float(s.chunks),
    ),
)


def _gauge(name: str, doc: str, *labels: str) -> GaugeMetricFamily:
    return GaugeMetricFamily(f"{_PREFIX}_{name}", doc, labels=labels)


def _counter(name: str, doc: str, *labels: str) -> CounterMetricFamily:
    return CounterMetricFamily(f"{_PREFIX}_{name}", doc, labels=labels)  # exposed with `_total`


def read_collector(runtime: Runtime) -> ConnectCollector:
    """One scrape's read: the status listing (one query) and the metrics snapshot (six), at once
    on two connections, so that a scrape waits for the slower of the two rather than for both."""
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="metrics-read") as pool:
        listing = pool.submit(runtime.connectors.listing, Page(), status=True)
        snapshot = MetricsStore(runtime.engine).snapshot(runtime.settings.heartbeat_timeout)
        statuses = listing.result().statuses
    return ConnectCollector(tuple(statuses.values()), snapshot, signal_takers(runtime.registry, snapshot.incremental))


def _render(runtime: Runtime, accept: str) -> tuple[bytes, str]:
    encoder, content_type = choose_encoder(accept)
    if encoder is generate_latest:  # the plain text format: ours, the same bytes, about 3x faster
        encoder = encode_text
    return encoder(read_collector(runtime)), content_type


def encode_text(collector: Collector) -> bytes:
    """`prometheus_client.generate_latest`'s bytes for this collector's families (gauges and
    counters, legacy metric names), without its per-sample generality: a scrape of 1,000
    connectors is some 16,000 samples. tests/rest/test_metrics.py checks the bytes are the same."""
    out: list[str] = []
    for metric in collector.collect():
        name = metric.name + "_total" if metric.type == "counter" else metric.name
        doc = metric.documentation.replace("\\", r"\\").replace("\n", r"\n")
        out.append(f"# HELP {name} {doc}\n# TYPE {name} {metric.type}\n")
        for sample in metric.samples:
            labels = sample.labels
            if labels:
                pairs = ",".join(f'{k}="{_escape(labels[k])}"' for k in sorted(labels))
                out.append(f"{sample.name}{{{pairs}}} {floatToGoString(sample.value)}\n")
            else:
                out.append(f"{sample.name} {floatToGoString(sample.value)}\n")
    return "".join(out).encode()


def _escape(value: str) -> str:
    if "\\" in value or "\n" in value or '"' in value:
        return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")
    return value


@router.get("/metrics", summary="Kafka Connect's metrics in Prometheus' text format (extension)")
async def metrics(svc: Svc, request: Request) -> Response:
    """Read and rendered off the event loop; a store that is down raises a store error, which the
    app's handlers answer 503 with `Retry-After` and a message naming the store."""
    body, content_type = await run_in_threadpool(_render, svc.rt, request.headers.get("accept", ""))
    return Response(content=body, headers={"Content-Type": content_type})
