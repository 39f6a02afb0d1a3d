"""The task runner: one run of one task, from lease to commit.

This is the loop connector authors do not write (and cannot override): take
the lease, load the connector, read positions or offsets, run the task's one
hook, stage the output, and commit output + positions + stats in one
generation-guarded transaction. If anything fails, nothing is committed, the
task is marked FAILED with its trace, and the staged files are deleted (now,
or by the next run of the task when the process was killed).
"""

from __future__ import annotations

import functools
import logging
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from connect_core.runtime.cluster.runs import CommitRequest, Lease, RunStore, StagedSegment, TaskBusyError
from connect_core.runtime.execution._gate import Gate, SinkGated, shape_of
from connect_core.runtime.plugins import PluginRegistry
from connect_core.runtime.processing.apply import (
    SinkTransformed,
    arrow_in_driver,
    stamp_source,
    transform_sink,
    transform_source,
)
from connect_core.runtime.processing.chain import TRANSFORM_FAILURE, TransformChain
from connect_core.runtime.processing.config import build_chain
from connect_core.runtime.processing.contract import Contract
from connect_core.runtime.processing.deadletter import DeadLetters, ErrorSettings
from connect_core.runtime.processing.propagation import Decision, decide
from connect_core.runtime.processing.retry import RetryPolicy
from connect_core.runtime.security import ConfigProviders, mask_text
from connect_core.runtime.security.paths import AllowedPaths
from connect_core.runtime.spark.session import explain_failure, prepare_session, release_session, where_it_runs
from connect_core.runtime.store.connector_schemas import Pending, Shape
from connect_core.runtime.store.connectors import ConnectorStore
from connect_core.runtime.store.states import RunState, TargetState
from connect_core.runtime.topics.config import creation_config
from connect_core.runtime.topics.resyncs import plan_batch, told_of, with_told
from connect_core.runtime.topics.segments import arrow_topics, delete_path, read_topics, write_segment
from connect_core.runtime.topics.store import Segment, TopicStore
from connect_core.runtime.validation import connector_config_model
from connect_core.sdk.config import ConnectorConfig, SinkConnectorConfig, SourceConnectorConfig
from connect_core.sdk.connector import WRITE_REPORT, WRITE_TABLES, Signal, SinkTask, SourceTask, TaskContext
from connect_core.sdk.errors import ConfigError, DataError, FatalError, FencedError, NotFoundError, RetriableError
from connect_core.sdk.records import (
    OFFSET_COLUMN,
    PARTITION_COLUMN,
    TOPIC_COLUMN,
    Resync,
    SinkBatch,
    SourcePosition,
    TopicPartition,
    partition_key,
)
from connect_core.sdk.testing import faults as _faults

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from connect_core.runtime.context import Runtime
    from connect_core.runtime.topics.schemas import TopicSchema

__all__ = ["RunResult", "TaskRunner", "error_kind", "task_signals"]

log = logging.getLogger(__name__)


@dataclass
class RunResult:
    connector: str
    task_id: int
    state: str  # SUCCEEDED | FAILED | FENCED | SKIPPED (not RUNNING) | BUSY (another run holds the lease)
    run_id: int | None = None
    generation: int | None = None
    rows: int = 0
    segments: int = 0
    message: str = ""
    #: Why a FAILED run failed, for whoever decides on a retry: `config` and `fatal` will fail the same
    #: way again (Airflow fails the task without retries); `retriable` and `unexpected` may not.
    error_kind: str | None = None
    timings: dict[str, float] = field(default_factory=dict)
    #: Records failed, skipped, retried, sent to the dead-letter topic (`errors.*`), when any were.
    counts: dict[str, int] = field(default_factory=dict)
    #: What a source reported about the system it reads (`SourceBatch.stats`).
    source: dict[str, Any] = field(default_factory=dict)
    #: What a sink reported writing to its target (`WRITE_REPORT` keys of its `write` metadata).
    target: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class _Heartbeat(threading.Thread):
    """Extends the lease every third of its length; notices when the run is fenced."""

    def __init__(self, runs: RunStore, lease: Lease, lease_seconds: float) -> None:
        super().__init__(name=f"heartbeat-{lease.connector}-{lease.task_id}", daemon=True)
        self._runs, self._lease, self._seconds = runs, lease, lease_seconds
        self._stop_event = threading.Event()
        self.fenced = threading.Event()

    def run(self) -> None:
        while not self._stop_event.wait(self._seconds / 3):
            try:
                if not self._runs.heartbeat(self._lease, self._seconds):
                    self.fenced.set()
                    return
            except Exception:  # a database blip: keep the lease alive if we can
                log.warning("heartbeat of run %s failed; retrying", self._lease.run_id, exc_info=True)

    def stop(self) -> None:
        self._stop_event.set()


class TaskRunner:
    """Runs tasks once each, on the SparkSession `spark()` gives for the run.

    A classic session (the runner is the Spark driver) is the process's and outlives the run. A
    Spark Connect session (a warm pool's client) is the run's own: the runner gives it the runners'
    session settings, and stops it when the run ends, so that the server drops its temp views,
    settings and cached data; `spark` then makes a new one per call (`builder.remote(url).create()`).
    """

    @classmethod
    def for_runtime(cls, runtime: Runtime, spark: Callable[[], SparkSession], *, pool: str | None = None) -> TaskRunner:
        """A runner on `runtime`'s stores, plugins and config providers, running as if on Spark pool `pool`."""
        return cls(
            connectors=runtime.connectors,
            runs=runtime.runs,
            topics=runtime.topics,
            registry=runtime.registry,
            spark=spark,
            lease_seconds=runtime.settings.lease_seconds,
            pool=pool,
            providers=runtime.providers,
        )

    def __init__(
        self,
        *,
        connectors: ConnectorStore,
        runs: RunStore,
        topics: TopicStore,
        registry: PluginRegistry,
        spark: Callable[[], SparkSession],
        lease_seconds: float = 60.0,
        pool: str | None = None,
        providers: ConfigProviders | None = None,
    ) -> None:
        self._connectors = connectors
        self._runs = runs
        self._topics = topics
        self._registry = registry
        self._spark_factory = spark
        self._lease_seconds = lease_seconds
        self._providers = providers or ConfigProviders()
        self._pool = pool  # where this runner runs; acquire fences it when the task is assigned elsewhere

    def run(self, connector: str, task_id: int) -> RunResult:
        """Run the task once. Never raises for a task failure: the result says FAILED (and a task
        that does not exist, or no longer does, is a FAILED `config` result: the other tasks of the
        same launch keep theirs)."""
        try:
            info = self._connectors.get(connector)
            if info.target_state != TargetState.RUNNING:
                return RunResult(connector, task_id, "SKIPPED", message=f"connector is {info.target_state}")
            lease = self._runs.acquire(connector, task_id, self._lease_seconds, pool=self._pool)
        except TaskBusyError as exc:
            return RunResult(connector, task_id, "BUSY", message=str(exc))
        except FencedError as exc:
            return RunResult(connector, task_id, RunState.FENCED, message=str(exc))
        except NotFoundError as exc:
            return RunResult(connector, task_id, RunState.FAILED, message=f"NotFoundError: {exc}", error_kind="config")
        if lease.target_state != TargetState.RUNNING:  # paused or stopped between the read above and the lease
            self._runs.finish(lease, RunState.ABANDONED, f"connector is {lease.target_state}", {})
            return RunResult(connector, task_id, "SKIPPED", message=f"connector is {lease.target_state}")
        result = RunResult(connector, task_id, RunState.RUNNING, lease.run_id, lease.generation)
        heartbeat = _Heartbeat(self._runs, lease, self._lease_seconds)
        heartbeat.start()
        started = time.monotonic()
        staged: list[str] = []
        spark: SparkSession | None = None
        try:
            spark = self._spark_factory()
            prepare_session(spark)
            result.timings["spark_session_s"] = round(time.monotonic() - started, 3)
            self._collect_garbage(spark, lease)
            if lease.connector_type == "source":
                request = self._run_source(spark, lease, staged, result)
            else:
                request = self._run_sink(spark, lease, staged, result)
            _faults.checkpoint("before_commit")
            if heartbeat.fenced.is_set():
                raise FencedError(f"run {lease.run_id} lost its lease while running")
            request.stats = {
                **result.timings,
                **({"errors": result.counts} if result.counts else {}),
                "rows": result.rows,
                "segments": result.segments,
                **({"source": result.source} if result.source else {}),
                **({"target": result.target} if result.target else {}),
                **where_it_runs(spark),
            }
            commit_started = time.monotonic()
            self._runs.commit(lease, request)
            _faults.checkpoint("after_commit")
            result.timings["commit_s"] = round(time.monotonic() - commit_started, 3)
            result.state = RunState.SUCCEEDED
            self._record_commit_time(lease.run_id, result.timings["commit_s"])
        except FencedError as exc:
            result.state, result.message = RunState.FENCED, str(exc)
            self._finish(lease, RunState.FENCED, str(exc), result)
            self._discard(spark, staged)
        except Exception as raised:
            trace = mask_text(traceback.format_exc())
            failure = explain_failure(raised, spark)
            result.state, result.message = RunState.FAILED, mask_text(f"{type(failure).__name__}: {failure}")
            result.error_kind = error_kind(failure)
            log.error("run %s of `%s-%s` failed: %s", lease.run_id, connector, task_id, result.message)
            self._finish(lease, RunState.FAILED, trace, result)
            self._discard(spark, staged)
        finally:
            heartbeat.stop()
            if spark is not None:
                release_session(spark)
            result.timings["run_s"] = round(time.monotonic() - started, 3)
        return result

    # -- sources ------------------------------------------------------------

    def _run_source(self, spark: SparkSession, lease: Lease, staged: list[str], result: RunResult) -> CommitRequest:
        chain = self._chain(lease)
        committed = self._connectors.positions(lease.connector)
        read_started = time.monotonic()
        stamp = datetime.now(UTC)

        letters = self._dead_letters(lease)
        signals = self._signals(lease)
        generations = self._resync_generations(lease) if signals else {}

        def attempt(n: int) -> tuple[list[StagedSegment], list[SourcePosition], Mapping[str, Resync]]:
            # Each attempt reads anew with a new task; what an earlier one staged is replaced
            # (same paths) or deleted with the run's garbage.
            result.rows = result.segments = 0
            letters.reset()
            task = self._new_task(lease, letters, tuple(s for _, s in signals), generations)
            assert isinstance(task, SourceTask)
            try:
                batch = task.read(spark, committed)
                _faults.checkpoint("before_stage")
                segments = self._stage(spark, lease, chain, batch.records, stamp, staged, result, letters)
                segments += self._stage_dead_letters(spark, lease, letters, staged)
                _faults.checkpoint("after_stage")
                result.source = dict(batch.stats)
                return segments, list(batch.positions), batch.resyncs
            finally:
                task.close()

        segments, positions, resyncs = self._retry_policy(lease).run(
            f"run {lease.run_id} of `{lease.connector}-{lease.task_id}`", attempt, self._count_retry(result)
        )
        result.counts.update(letters.counts)
        result.timings["work_s"] = round(time.monotonic() - read_started, 3)
        changed = [p for p in positions if committed.offset(p.partition) != dict(p.offset)]
        shapes = {seg.topic: seg.schema for seg in segments if seg.schema is not None}
        return CommitRequest(
            segments=segments,
            positions=_dedupe(changed),
            shapes=shapes,
            signals=[i for i, _ in signals],
            resyncs=self._resync_marks(lease, resyncs),
        )

    def _resync_marks(self, lease: Lease, resyncs: Mapping[str, Resync]) -> dict[TopicPartition, Resync]:
        """The batch's re-reads by the topic partition this task writes (`_stage`'s rule), each topic made
        if new: an empty table's re-read begins and ends in a topic that may have no rows yet."""
        if not resyncs:
            return {}
        config = self._config(lease)
        partition_count = config.topic_partitions if isinstance(config, SourceConnectorConfig) else 1
        topic_config = creation_config(lease.connector_config)
        marks = {}
        for topic, mark in resyncs.items():
            partitions = self._topics.ensure_topic(topic, partition_count, topic_config)
            marks[TopicPartition(topic, lease.task_id % partitions)] = mark
        return marks

    def _resync_generations(self, lease: Lease) -> dict[str, int]:
        """The last re-read generation of each topic the connector writes (a re-read begun by this run
        takes the next number)."""
        plugin: Any = self._registry.resolve(lease.connector_class).cls()
        return self._topics.resyncs.last_generations(plugin.output_topics(self._config(lease)))

    def _stage(
        self,
        spark: SparkSession,
        lease: Lease,
        chain: TransformChain,
        records: Mapping[str, Any],
        stamp: datetime,
        staged: list[str],
        result: RunResult,
        letters: DeadLetters,
    ) -> list[StagedSegment]:
        """Write a source batch's records, transformed, as segments of the topics they go to; the
        records a transform set aside go to the run's dead letters."""
        segments = []
        config = self._config(lease)
        partition_count = config.topic_partitions if isinstance(config, SourceConnectorConfig) else 1
        topic_config = creation_config(lease.connector_config)  # topic.creation.default.*
        gate = Gate(Contract.of(config), self._connectors.schemas, lease.connector, self._declared(lease, config))
        for topic, topic_records in records.items():
            transformed = transform_source(chain, topic, stamp_source(topic_records, stamp))
            try:
                for errant in transformed.errant:
                    letters.report(errant)
                for out_topic, records_out in transformed.by_topic.items():
                    out, shape = gate.hold(out_topic, records_out, letters, transformed.cached)
                    partitions = self._topics.ensure_topic(out_topic, partition_count, topic_config)
                    partition = lease.task_id % partitions
                    path = self._topics.segment_path(out_topic, partition, lease.run_id)
                    if path not in staged:
                        self._runs.record_staged(lease, path)  # before writing: a kill leaves a known path
                        staged.append(path)
                    rows = write_segment(spark, out, path, lease.run_id)
                    if not rows:  # an empty DataFrame: nothing to publish, nothing to keep
                        delete_path(spark, path)
                        continue
                    segments.append(StagedSegment(out_topic, partition, rows, path, shape))
                    result.rows += rows
                    result.segments += 1
            finally:
                transformed.release()
        return segments

    # -- sinks --------------------------------------------------------------

    def _run_sink(self, spark: SparkSession, lease: Lease, staged: list[str], result: RunResult) -> CommitRequest:
        owned = self._owned_partitions(lease)
        committed = {tp: c for tp, c in self._connectors.sink_offsets(lease.connector).items() if tp in owned}
        start = {tp: committed[tp].offset if tp in committed else 0 for tp in owned}
        work_started = time.monotonic()
        config = self._config(lease)
        max_rows = config.batch_max_rows if isinstance(config, SinkConnectorConfig) else None
        previous = next(iter(committed.values())).metadata if committed else {}
        told = told_of(previous)
        plan = plan_batch(
            self._topics.segments_after(start, max_rows), self._topics.resyncs.replacing(owned), start, told, max_rows
        )
        segments = plan.segments
        batch: SinkBatch | None = None
        transformed: SinkTransformed | None = None
        letters = self._dead_letters(lease)
        gated = SinkGated(dead_letters=letters.dead_letters)

        def attempt(n: int) -> Mapping[str, Any] | None:
            # Each attempt opens a new task first: it finds what an earlier attempt left in the target
            # (the JDBC sink's offsets table, the file sink's committed size) before writing again.
            nonlocal batch, transformed
            letters.reset()
            task = self._new_task(lease, letters)
            assert isinstance(task, SinkTask)
            try:
                baseline = task.open(committed)
                if baseline is not None and n == 0:
                    # The sink's recovery state before its first write, committed on its own.
                    self._runs.commit_checkpoint(lease, start, with_told(baseline, told))
                if not segments and not plan.replacing:
                    return None
                if batch is None and not segments:  # only the end of a re-read to tell: no rows
                    batch = self._no_rows_batch(spark, plan.replacing, self._chain(lease))
                elif batch is None:
                    transformed = self._transform_sink(spark, lease, segments)
                    self._gate_sink(lease, config, transformed, gated)
                    batch = self._sink_batch(transformed, segments, owned, gated.changes, plan.replacing)
                for errant in transformed.errant if transformed is not None else ():  # reported by every attempt
                    letters.report(errant)
                for errant in gated.diverted:
                    letters.divert(errant)
                letters.discard(gated.counts)
                _faults.checkpoint("before_stage")
                metadata = task.write(spark, batch)
                _faults.checkpoint("after_stage")
                return metadata
            finally:
                task.close()

        try:
            metadata = self._retry_policy(lease).run(
                f"run {lease.run_id} of `{lease.connector}-{lease.task_id}`", attempt, self._count_retry(result)
            )
        finally:
            if transformed is not None:
                transformed.release()
        result.counts.update(letters.counts)
        result.target = _write_report(metadata)
        dead = self._stage_dead_letters(spark, lease, letters, staged)
        result.timings["work_s"] = round(time.monotonic() - work_started, 3)
        if not segments and not plan.replacing:
            return CommitRequest()
        result.rows, result.segments = sum(s.row_count for s in segments), len(segments)
        offsets = dict(start)
        for seg in segments:
            tp = TopicPartition(seg.topic, seg.partition)
            offsets[tp] = max(offsets[tp], seg.end_offset)
        return CommitRequest(
            segments=dead,
            offsets=offsets,
            # the re-reads whose end the sink was told (and swapped in): told once, unless this commit fails
            offset_metadata=with_told(metadata if metadata is not None else previous, {**told, **plan.told}),
            shapes=gated.shapes,
        )

    def _transform_sink(self, spark: SparkSession, lease: Lease, segments: list[Segment]) -> SinkTransformed:
        """The segments' rows, read and transformed."""
        read = read_topics(spark, segments)
        return transform_sink(self._chain(lease), read, arrow_topics(spark, segments, read))

    def _gate_sink(self, lease: Lease, config: ConnectorConfig, done: SinkTransformed, gated: SinkGated) -> None:
        """Each topic's records through the sink's schema contract, then its `schema.propagation`:
        what may leave the topic, and what the target does with a change (a breaking one pauses the
        connector, and the run fails with the reason, committing nothing)."""
        mode = config.schema_propagation if isinstance(config, SinkConnectorConfig) else None
        gate = Gate(Contract.of(config), self._connectors.schemas, lease.connector, self._declared(lease, config))
        for topic in list(done.by_topic):
            df, shape = gate.hold(topic, done.by_topic[topic], gated, done.cached)
            if df is not done.by_topic[topic]:  # the contract changed the records: the Arrow path has not
                done.by_topic[topic] = df
                done.arrow_by_topic.pop(topic, None)
            if shape is None:
                continue
            decision = decide(mode, topic, shape, gate.reference(topic), accepted=gate.accepted(topic, shape))
            if decision.pause is not None:
                self._pause(lease, topic, shape, gate.reference(topic), decision)
            if decision.strip:
                df = done.by_topic[topic].drop(*decision.strip)
                done.by_topic[topic] = df
                done.arrow_by_topic.pop(topic, None)
                shape = shape_of(topic, df.schema)
            if decision.changes and decision.diff is not None:
                gated.changes[topic] = decision.for_sink()
            if shape is not None:
                gated.shapes[topic] = shape

    def _declared(self, lease: Lease, config: ConnectorConfig) -> frozenset[str]:
        """The topics the connector's config names (their first load is free under a contract)."""
        if isinstance(config, SinkConnectorConfig):
            return frozenset(config.topics)
        try:
            plugin: Any = self._registry.resolve(lease.connector_class).cls()
            return frozenset(plugin.output_topics(config))
        except Exception:  # a plugin's own code: no topic named, every new one judged by the contract
            return frozenset()

    def _pause(
        self, lease: Lease, topic: str, shape: TopicSchema, current: TopicSchema | None, decision: Decision
    ) -> None:
        """Pause the connector on a change its `schema.propagation` does not let through: the change
        kept as pending (shown with its diff, until accepted), the connector PAUSED with the reason,
        and the run failed with it (not retried)."""
        how = (
            f"accept it with `connect schema accept {lease.connector}` (or POST "
            f"/connectors/{lease.connector}/schemas/accept), which resumes the connector"
        )
        reason = f"{decision.pause}; {how}"
        diff = decision.diff.to_dict() if decision.diff is not None else {}
        pending = Pending(Shape(shape.document, shape.fingerprint), diff, reason, lease.run_id)
        base = Shape(current.document, current.fingerprint) if current is not None else None
        # fenced: a run superseded meanwhile (the connector stopped, its config or offsets changed) pauses nothing
        self._runs.pause_on_schema(lease, topic, base, pending, f"schema change: {reason}")
        raise DataError(f"the connector paused on {reason}")

    @staticmethod
    def _sink_batch(
        done: SinkTransformed,
        segments: list[Segment],
        owned: set[TopicPartition],
        changes: Mapping[str, Mapping[str, Any]],
        replacing: Mapping[str, Resync],
    ) -> SinkBatch:
        data = functools.reduce(lambda a, b: a.unionByName(b, allowMissingColumns=True), done.by_topic.values())
        rows = sum(s.row_count for s in segments)
        return SinkBatch(
            data,
            rows,
            tuple(sorted(owned)),
            done.by_topic,
            done.arrow_by_topic,
            done.routes,
            dict(changes),
            dict(replacing),
        )

    @staticmethod
    def _no_rows_batch(spark: SparkSession, replacing: Mapping[str, Resync], chain: TransformChain) -> SinkBatch:
        """A batch with no rows that tells the sink where re-reads end (`SinkBatch.replacing`): no
        partitions either, so `read_topics()` is empty and the sink writes no topic (only swaps). Its
        `routes` are what the sink's routers make of each topic's name, where the name alone tells."""
        data = spark.createDataFrame([], f"{TOPIC_COLUMN} string, {PARTITION_COLUMN} int, {OFFSET_COLUMN} long")
        routes = {}
        for topic in replacing:
            routed = chain.routed_topics([topic])
            if routed is not None and routed != [topic]:
                routes[topic] = tuple(routed)
        return SinkBatch(data, 0, (), routes=routes, replacing=dict(replacing))

    def _dead_letters(self, lease: Lease) -> DeadLetters:
        plugin_cls: Any = self._registry.resolve(lease.connector_class).cls
        task_class = plugin_cls.task_class
        return DeadLetters(
            ErrorSettings(self._config(lease)),
            lease.connector,
            lease.task_id,
            f"{task_class.__module__}.{task_class.__qualname__}",
        )

    def _stage_dead_letters(
        self, spark: SparkSession, lease: Lease, letters: DeadLetters, staged: list[str]
    ) -> list[StagedSegment]:
        """The run's dead-letter records as a segment of the dead-letter topic, committed with the run."""
        table = letters.dead_letter_table()
        topic = letters.settings.topic
        if table is None or topic is None:
            return []
        partitions = self._topics.ensure_topic(topic, 1)
        partition = lease.task_id % partitions
        path = self._topics.segment_path(topic, partition, lease.run_id)
        if path in staged:
            raise ConfigError(
                f"`errors.deadletterqueue.topic.name` ({topic}) is a topic this run writes its records to; "
                "use a topic of its own",
                {"errors.deadletterqueue.topic.name": ["must differ from the connector's own topics"]},
            )
        self._runs.record_staged(lease, path)
        staged.append(path)
        rows = write_segment(spark, arrow_in_driver(spark, table), path, lease.run_id)
        return [StagedSegment(topic, partition, rows, path)]

    def _retry_policy(self, lease: Lease) -> RetryPolicy:
        config = self._config(lease)
        return RetryPolicy(config.errors_retry_timeout, config.errors_retry_delay_max_ms)

    @staticmethod
    def _count_retry(result: RunResult) -> Callable[[BaseException], None]:
        def count(exc: BaseException) -> None:
            result.counts["retried"] = result.counts.get("retried", 0) + 1

        return count

    def _owned_partitions(self, lease: Lease) -> set[TopicPartition]:
        """Partition p of every topic belongs to task p mod task-count."""
        model = self._config(lease)
        topics = model.topics if isinstance(model, SinkConnectorConfig) else []
        return self._topics.owned_partitions(topics, lease.task_id, lease.task_count)

    def _config(self, lease: Lease) -> ConnectorConfig:
        """The connector's config as its model reads it (validated at create): every setting the runner
        uses is read from here, with the rules that validated it, never from the raw dict."""
        model = connector_config_model(self._registry.resolve(lease.connector_class).cls)
        return model.model_validate(lease.connector_config)

    # -- housekeeping -------------------------------------------------------

    def _signals(self, lease: Lease) -> list[tuple[int, Signal]]:
        """The signals waiting for this task of the connector (`task_signals`)."""
        return task_signals(self._registry, self._connectors, lease.connector, lease.task_id)

    def _new_task(
        self,
        lease: Lease,
        letters: DeadLetters | None = None,
        signals: tuple[Signal, ...] = (),
        generations: Mapping[str, int] | None = None,
    ) -> SourceTask | SinkTask:
        plugin_cls: Any = self._registry.resolve(lease.connector_class).cls
        config = self._providers.resolve(lease.task_config)  # secrets exist only in this process
        # Checked again on what the task will use: a placeholder filled only now, or a symlink swapped
        # since create, must not get out of `file.allowed.paths` (this process's, set by runner_env).
        config = AllowedPaths.from_env().confine(plugin_cls.config_model, config)
        context = self._context(lease, letters, signals, generations)
        task: SourceTask | SinkTask = plugin_cls.task_class(config, context)
        return task

    def _chain(self, lease: Lease) -> TransformChain:
        """The connector's transforms (checked at create; a plugin gone since then fails the run here)."""
        return build_chain(self._providers.resolve(lease.connector_config), self._registry)

    def _context(
        self,
        lease: Lease,
        letters: DeadLetters | None = None,
        signals: tuple[Signal, ...] = (),
        generations: Mapping[str, int] | None = None,
    ) -> TaskContext:
        logger = logging.getLogger(f"connect.{lease.connector}.task-{lease.task_id}")
        errant = letters if letters is not None and letters.settings.tolerate else None
        return TaskContext(
            lease.connector, lease.task_id, lease.task_count, logger, errant, signals, dict(generations or {})
        )

    def _record_commit_time(self, run_id: int, seconds: float) -> None:
        """The commit's own time, for Kafka's offset-commit-avg-time-ms (best effort: the run stands)."""
        try:
            self._runs.record_commit_time(run_id, seconds)
        except Exception as exc:
            log.info("run %s committed; its commit time was not recorded: %s", run_id, exc)

    def _collect_garbage(self, spark: SparkSession, lease: Lease) -> None:
        """Delete what earlier failed or killed runs of this task staged."""
        for run_id, paths in self._runs.garbage(lease.connector, lease.task_id):
            for path in paths:
                delete_path(spark, path)
            self._runs.forget_staged(run_id)
            log.info("deleted %d staged path(s) of run %s, which never committed", len(paths), run_id)

    def _finish(self, lease: Lease, state: RunState, error: str, result: RunResult) -> None:
        try:
            stats = {
                **result.timings,
                **({"error_kind": result.error_kind} if result.error_kind else {}),
                **({"errors": result.counts} if result.counts else {}),
            }
            self._runs.finish(lease, state, error, stats)
        except Exception:  # e.g. the metadata database is down: the lease simply lapses
            log.exception("could not record run %s as %s", lease.run_id, state)
            result.message += " (and the run could not be recorded: the metadata store is unreachable)"

    def _discard(self, spark: SparkSession | None, staged: list[str]) -> None:
        if spark is None:
            return
        for path in staged:
            try:
                delete_path(spark, path)
            except Exception:  # the next run of the task deletes it instead
                log.warning("could not delete staged path %s", path, exc_info=True)


def task_signals(
    registry: PluginRegistry, connectors: ConnectorStore, connector: str, task_id: int
) -> list[tuple[int, Signal]]:
    """The signals waiting for task `task_id` of `connector` (row id, signal), oldest first: those its
    connector routes to it (`SourceConnector.signal_task`: task 0, or the task reading the table a
    signal names), when the connector acts on signals. The runner's and the pre-check's one rule."""
    info = connectors.get(connector)
    plugin_cls: Any = registry.resolve(info.connector_class).cls
    if not getattr(plugin_cls, "accepts_signals", False):
        return []
    pending = connectors.signals.pending(connector)
    if not pending:
        return []
    plugin = plugin_cls()
    config = connector_config_model(plugin_cls).model_validate(info.config)
    return [(i, signal) for i, signal in pending if plugin.signal_task(config, info.tasks, signal) == task_id]


def error_kind(exc: BaseException) -> str:
    """`config`, `data`, `fatal`, `retriable` or `unexpected`: what a retry of the same run could change."""
    if isinstance(exc, ConfigError):
        return "config"
    if isinstance(exc, DataError) or TRANSFORM_FAILURE in str(exc):
        return "data"  # raised as such, or by a transform's check inside a Spark job (`raise_error`)
    if isinstance(exc, FatalError):
        return "fatal"
    if isinstance(exc, RetriableError):
        return "retriable"
    return "unexpected"


def _dedupe(positions: list[SourcePosition]) -> list[SourcePosition]:
    """The last position per partition wins."""
    by_key: dict[str, SourcePosition] = {partition_key(p.partition): p for p in positions}
    return list(by_key.values())


#: At most this many tables of a run's `WRITE_TABLES` are kept, their names and versions cut to these lengths.
_TABLES_KEPT, _NAME_KEPT, _VERSION_KEPT = 20, 300, 40


def _write_report(metadata: Mapping[str, Any] | None) -> dict[str, Any]:
    """The `WRITE_REPORT` numbers of a sink's `write` metadata (whole, not negative) and its
    `WRITE_TABLES` (names and versions as short strings, a few tables); others ignored."""
    found = metadata or {}
    report: dict[str, Any] = {
        k: found[k]
        for k in WRITE_REPORT
        if isinstance(found.get(k), int) and not isinstance(found[k], bool) and found[k] >= 0
    }
    tables = found.get(WRITE_TABLES)
    if isinstance(tables, list | tuple):
        kept = [
            {
                "name": _shown_table(t["name"])[:_NAME_KEPT],
                "version": mask_text(str(t.get("version", "")))[:_VERSION_KEPT],
            }
            for t in tables[:_TABLES_KEPT]
            if isinstance(t, Mapping) and isinstance(t.get("name"), str) and t["name"]
        ]
        if kept:
            report[WRITE_TABLES] = kept
    return report


def _shown_table(name: str) -> str:
    """A table's name as the run's stats may show it: a URI without its userinfo, query and
    fragment (an access key, a signature), then masked as any text (a value a provider resolved)."""
    from urllib.parse import urlsplit, urlunsplit

    name = name[: _NAME_KEPT * 4]  # bounded before it is parsed
    if "://" in name:
        try:
            parts = urlsplit(name)
            host = parts.hostname or ""
            port = f":{parts.port}" if parts.port else ""
            name = urlunsplit((parts.scheme, host + port, parts.path, "", ""))
        except ValueError:  # a port that is no number, a broken IPv6 host: nothing of it is shown
            name = name.split("://", 1)[0] + "://…"
    return mask_text(name)
