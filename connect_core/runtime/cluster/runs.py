"""Task runs: the lease a run holds, its heartbeat, and its fenced commit.

A run takes the task's lease by bumping the task's *generation*; from then on
only that generation may commit. A run whose lease lapsed (its process was
killed, or hung) is taken over by the next run, which bumps the generation
again, so the old run, should it wake up, can no longer commit: its commit
finds a different generation and is rejected (`FencedError`). Time is the
database's `now()`, so worker clocks do not matter.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from sqlalchemy import Engine, func, select, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session, sessionmaker

from connect_core.runtime.store.connector_schemas import ConnectorSchemas, Pending, Shape
from connect_core.runtime.store.connectors import ConnectorStore
from connect_core.runtime.store.models import (
    AssignmentRow,
    ConnectorRow,
    ConnectorStatusRow,
    TaskConfigRow,
    TaskRunRow,
    TaskStatusRow,
)
from connect_core.runtime.store.signals import SignalStore
from connect_core.runtime.store.states import ConnectorState, RunState, TargetState
from connect_core.runtime.topics.resyncs import ResyncLog
from connect_core.runtime.topics.schemas import TopicSchema
from connect_core.runtime.topics.store import Segment, TopicStore
from connect_core.sdk.errors import FencedError, NotFoundError, RetriableError
from connect_core.sdk.records import Resync, SourcePosition, TopicPartition

__all__ = ["MAX_ERROR_CHARS", "Lease", "RunStore", "StagedSegment", "TaskBusyError", "bounded_error"]


class TaskBusyError(RetriableError):
    """Another run of the task holds a live lease."""


@dataclass(frozen=True)
class Lease:
    run_id: int
    connector: str
    task_id: int
    generation: int
    task_count: int
    task_config: dict[str, Any]
    connector_config: dict[str, Any]
    connector_class: str
    connector_type: str
    target_state: str


@dataclass(frozen=True)
class StagedSegment:
    topic: str
    partition: int
    row_count: int
    path: str
    #: the shape of its records, recorded in the topic's schema history by the commit (None: not
    #: recorded; a dead-letter segment's rows are the errant records of whatever topics failed)
    schema: TopicSchema | None = None


@dataclass
class CommitRequest:
    """Everything one run commits, in one transaction."""

    segments: Sequence[StagedSegment] = ()
    positions: Sequence[SourcePosition] = ()
    offsets: Mapping[TopicPartition, int] = field(default_factory=dict)
    offset_metadata: Mapping[str, Any] = field(default_factory=dict)
    stats: Mapping[str, Any] = field(default_factory=dict)
    #: topic → the shape this run let through (its schema contract applied): the connector's from now on
    shapes: Mapping[str, TopicSchema] = field(default_factory=dict)
    #: the signals the run got (`connect.connector_signals` ids): consumed by its commit
    signals: Sequence[int] = ()
    #: a source's re-reads (`SourceBatch.resyncs`) by the topic partition its rows go to: where they
    #: begin and end is recorded with the segments (`runtime.topics.resyncs`)
    resyncs: Mapping[TopicPartition, Resync] = field(default_factory=dict)


class RunStore:
    def __init__(self, engine: Engine, connectors: ConnectorStore, topics: TopicStore, worker_id: str) -> None:
        self._sessions = sessionmaker(engine, expire_on_commit=False)
        self._connectors = connectors
        self._topics = topics
        self.worker_id = worker_id

    def acquire(self, connector: str, task_id: int, lease_seconds: float, pool: str | None = None) -> Lease:
        """Take the task's lease as a new run, fencing any run whose lease lapsed.

        With `pool`, the run must be where the current assignment puts the task:
        a run started on a pool the task was moved away from is fenced before it
        reads anything (the rebalance locks the same task row to move it).
        """
        with self._sessions.begin() as s:
            task = s.scalars(
                select(TaskConfigRow)
                .where(TaskConfigRow.connector == connector, TaskConfigRow.task_id == task_id)
                .with_for_update()
            ).one_or_none()
            conn = s.get(ConnectorRow, connector)
            if task is None or conn is None:
                raise NotFoundError(f"task `{connector}-{task_id}` not found")
            if pool is not None:
                assigned = s.get(AssignmentRow, (connector, task_id))
                if assigned is not None and assigned.pool != pool:
                    raise FencedError(
                        f"task `{connector}-{task_id}` is assigned to pool `{assigned.pool}` "
                        f"(rebalance generation {assigned.generation}), not `{pool}`: not run here"
                    )
            now = s.scalars(select(func.now())).one()
            for other in s.scalars(_running(connector, task_id)):
                if other.lease_expires_at > now and not _holder_died(other.worker_id):
                    raise TaskBusyError(_busy_message(connector, task_id, other))
                other.state, other.finished_at = RunState.ABANDONED, now
                other.error = "lease expired without a commit; the task was taken over by a newer run"
            task.generation += 1
            task_count = s.scalar(select(func.count()).where(TaskConfigRow.connector == connector)) or 1
            run = TaskRunRow(
                connector=connector,
                task_id=task_id,
                generation=task.generation,
                state=RunState.RUNNING,
                worker_id=self.worker_id,
                lease_expires_at=now + timedelta(seconds=lease_seconds),
                pool=pool,
            )
            s.add(run)
            s.flush()
            return Lease(
                run_id=run.id,
                connector=connector,
                task_id=task_id,
                generation=task.generation,
                task_count=task_count,
                task_config=task.config,
                connector_config=conn.config,
                connector_class=conn.connector_class,
                connector_type=conn.type,
                target_state=conn.target_state,
            )

    def holder(self, connector: str, task_id: int) -> str | None:
        """Why a run of the task would be BUSY now (another run holds a live lease), or None. A read
        only, by `acquire`'s rule: a launcher asks before paying for a Spark start; `acquire` decides."""
        with self._sessions() as s:
            now = s.scalars(select(func.now())).one()
            for other in s.scalars(_running(connector, task_id)):
                if other.lease_expires_at > now and not _holder_died(other.worker_id):
                    return _busy_message(connector, task_id, other)
        return None

    def newest_run_id(self) -> int:
        """The id of the newest run of any task (0 when none): runs recorded after it are newer."""
        with self._sessions() as s:
            return int(s.scalar(select(func.coalesce(func.max(TaskRunRow.id), 0))) or 0)

    def heartbeat(self, lease: Lease, lease_seconds: float) -> bool:
        """Extend the lease; False when the run has been fenced and should stop."""
        with self._sessions.begin() as s:
            current = _current_generation(s, lease)
            if current != lease.generation:
                return False
            result = s.execute(
                update(TaskRunRow)
                .where(TaskRunRow.id == lease.run_id, TaskRunRow.state == RunState.RUNNING)
                .values(heartbeat_at=func.now(), lease_expires_at=func.now() + timedelta(seconds=lease_seconds))
            )
            return bool(result.rowcount)  # type: ignore[attr-defined]

    def record_staged(self, lease: Lease, path: str) -> None:
        """Write-ahead: note a path before writing to it, so a killed run's files can be found."""
        with self._sessions.begin() as s:
            run = s.get(TaskRunRow, lease.run_id, with_for_update=True)
            assert run is not None
            run.staged_paths = [*run.staged_paths, path]

    def commit(self, lease: Lease, request: CommitRequest) -> list[Segment]:
        """Commit a run's output atomically, or raise FencedError and commit nothing."""
        with self._sessions.begin() as s:
            current = _current_generation(s, lease, lock=True)
            run = s.get(TaskRunRow, lease.run_id, with_for_update=True)
            if current != lease.generation or run is None or run.state != RunState.RUNNING:
                raise FencedError(
                    f"run {lease.run_id} of task `{lease.connector}-{lease.task_id}` is fenced: its generation "
                    f"{lease.generation} was superseded by {current}; its output is discarded"
                )
            segments = [
                self._topics.append_segment(
                    s,
                    topic=seg.topic,
                    partition=seg.partition,
                    row_count=seg.row_count,
                    path=seg.path,
                    run_id=lease.run_id,
                )
                for seg in sorted(request.segments, key=lambda seg: (seg.topic, seg.partition))
            ]
            ResyncLog.record(s, lease.connector, lease.run_id, request.resyncs, segments)
            # after every partition lock: the per-topic locks of new versions (taken in one order) never deadlock
            self._topics.schemas.record(s, _schemas(request.segments), lease.run_id, lease.connector)
            shapes = {t: Shape(shape.document, shape.fingerprint) for t, shape in request.shapes.items()}
            ConnectorSchemas.record(s, lease.connector, shapes, lease.run_id)
            SignalStore.consume(s, request.signals, lease.run_id)
            self._connectors.upsert_positions(s, lease.connector, request.positions)
            self._connectors.upsert_sink_offsets(s, lease.connector, request.offsets, request.offset_metadata)
            used = [seg.topic for seg in request.segments] + [tp.topic for tp in request.offsets]
            self._connectors.record_topics(s, lease.connector, used)
            run.state, run.finished_at, run.stats = RunState.SUCCEEDED, func.now(), dict(request.stats)
            run.staged_paths = []  # committed paths are topic data now, not garbage
            _set_task_status(s, lease, ConnectorState.RUNNING, None, self.worker_id, request.stats.get("errors"))
            return segments

    def pause_on_schema(self, lease: Lease, topic: str, current: Shape | None, pending: Pending, reason: str) -> None:
        """Pause the connector on a schema change of `topic` its sink does not let through: the change
        kept as pending and the connector PAUSED with `reason` as its trace, in one transaction, and
        only while the run's lease is current and the connector RUNNING (FencedError otherwise: a run
        superseded by a stop, a config change or an offset reset pauses nothing)."""
        with self._sessions.begin() as s:
            connector = s.get(ConnectorRow, lease.connector, with_for_update=True)  # the connector row first
            generation = _current_generation(s, lease, lock=True)
            if connector is None or generation != lease.generation or connector.target_state != TargetState.RUNNING:
                raise FencedError(
                    f"run {lease.run_id} of task `{lease.connector}-{lease.task_id}` was superseded before it "
                    "paused the connector on a schema change: nothing paused"
                )
            ConnectorSchemas.hold(s, lease.connector, topic, current, pending)
            connector.target_state, connector.updated_at = TargetState.PAUSED, func.now()
            s.execute(
                update(ConnectorStatusRow)
                .where(ConnectorStatusRow.connector == lease.connector)
                .values(state=TargetState.PAUSED, trace=reason, updated_at=func.now())
            )

    def commit_checkpoint(
        self, lease: Lease, offsets: Mapping[TopicPartition, int], metadata: Mapping[str, Any]
    ) -> None:
        """Record a sink's recovery metadata (offsets unchanged) before it first writes."""
        with self._sessions.begin() as s:
            if _current_generation(s, lease, lock=True) != lease.generation:
                raise FencedError(f"run {lease.run_id} of task `{lease.connector}-{lease.task_id}` is fenced")
            self._connectors.upsert_sink_offsets(s, lease.connector, offsets, metadata)

    def finish(self, lease: Lease, state: RunState, error: str | None, stats: Mapping[str, Any]) -> None:
        """Close a run that did not commit (FAILED, FENCED or ABANDONED); positions and offsets stay untouched.
        A very long `error` is kept as its head and tail (`bounded_error`)."""
        error = bounded_error(error)
        with self._sessions.begin() as s:
            run = s.get(TaskRunRow, lease.run_id, with_for_update=True)
            if run is None or run.state != RunState.RUNNING:
                return
            run.state, run.finished_at, run.error, run.stats = state, func.now(), error, dict(stats)
            if state == RunState.FAILED and _current_generation(s, lease) == lease.generation:
                # what it set aside was not committed; its retries did happen
                retried = {"retried": (stats.get("errors") or {}).get("retried", 0)}
                _set_task_status(s, lease, ConnectorState.FAILED, error, self.worker_id, retried)

    def garbage(self, connector: str, task_id: int) -> list[tuple[int, list[str]]]:
        """Staged paths of this task's runs that ended without committing them."""
        with self._sessions() as s:
            rows = s.execute(
                select(TaskRunRow.id, TaskRunRow.staged_paths).where(
                    TaskRunRow.connector == connector,
                    TaskRunRow.task_id == task_id,
                    TaskRunRow.state.in_((RunState.FAILED, RunState.FENCED, RunState.ABANDONED)),
                    func.jsonb_array_length(TaskRunRow.staged_paths) > 0,
                )
            ).all()
            return [(run_id, list(paths)) for run_id, paths in rows]

    def record_commit_time(self, run_id: int, seconds: float) -> None:
        """Add how long the run's commit took to its stats (known only once the commit is done)."""
        with self._sessions.begin() as s:
            s.execute(
                update(TaskRunRow)
                .where(TaskRunRow.id == run_id)
                .values(stats=TaskRunRow.stats.op("||")(func.jsonb_build_object("commit_s", seconds)))
            )

    def forget_staged(self, run_id: int) -> None:
        with self._sessions.begin() as s:
            s.execute(update(TaskRunRow).where(TaskRunRow.id == run_id).values(staged_paths=[]))


def _schemas(segments: Sequence[StagedSegment]) -> list[tuple[str, TopicSchema]]:
    """Each distinct (topic, schema) of `segments`, by topic, then in the order they were staged."""
    seen: dict[tuple[str, str], TopicSchema] = {}
    for seg in segments:
        if seg.schema is not None:
            seen.setdefault((seg.topic, seg.schema.fingerprint), seg.schema)
    return [(topic, seen[(topic, f)]) for topic, f in sorted(seen, key=lambda k: k[0])]  # stable: staged order


def _busy_message(connector: str, task_id: int, other: TaskRunRow) -> str:
    return (
        f"task `{connector}-{task_id}` is already running as run {other.id} "
        f"(lease until {other.lease_expires_at.isoformat()}); wait for it to finish"
    )


def _running(connector: str, task_id: int) -> Any:
    """The task's runs still marked RUNNING (whether their leases are live is `acquire`'s and `holder`'s rule)."""
    return select(TaskRunRow).where(
        TaskRunRow.connector == connector, TaskRunRow.task_id == task_id, TaskRunRow.state == RunState.RUNNING
    )


def _holder_died(worker_id: str | None) -> bool:
    """True when the run's process ran on this host and is gone (killed before its lease ran out)."""
    host, _, pid = (worker_id or "").rpartition(":")
    if host != os.uname().nodename or not pid.isdigit():
        return False  # another host: only the lease can tell
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def _current_generation(s: Session, lease: Lease, lock: bool = False) -> int | None:
    query = select(TaskConfigRow.generation).where(
        TaskConfigRow.connector == lease.connector, TaskConfigRow.task_id == lease.task_id
    )
    return s.scalar(query.with_for_update() if lock else query)


#: Characters of a run's error kept in the store: its head (where the run was) and its tail (the
#: outermost exception, the cause). A trace of every record of a batch would otherwise be stored,
#: and read on every poll of the view, whole.
MAX_ERROR_CHARS = 64 * 1024
_ERROR_HEAD_CHARS = 8 * 1024


def bounded_error(error: str | None) -> str | None:
    """`error`, or its first and last characters with what was cut between them said."""
    if error is None or len(error) <= MAX_ERROR_CHARS:
        return error
    tail = MAX_ERROR_CHARS - _ERROR_HEAD_CHARS
    cut = len(error) - _ERROR_HEAD_CHARS - tail
    return f"{error[:_ERROR_HEAD_CHARS]}\n… {cut:,} characters cut …\n{error[-tail:]}"


def _set_task_status(
    s: Session,
    lease: Lease,
    state: ConnectorState,
    trace: str | None,
    worker_id: str,
    errors: Mapping[str, int] | None = None,
) -> None:
    """The task's state after a run, its error counts (`errors`) added to the task's totals."""
    values: dict[str, Any] = {"state": state, "trace": trace, "worker_id": worker_id, "last_run_id": lease.run_id}
    added = {k: int(n) for k, n in (errors or {}).items() if n}
    if added:
        row = s.get(TaskStatusRow, (lease.connector, lease.task_id), with_for_update=True)
        totals = dict(row.errors) if row is not None else {}
        values["errors"] = {k: totals.get(k, 0) + added.get(k, 0) for k in sorted({*totals, *added})}
    stmt = insert(TaskStatusRow).values(connector=lease.connector, task_id=lease.task_id, **values)
    s.execute(
        stmt.on_conflict_do_update(index_elements=["connector", "task_id"], set_={**values, "updated_at": func.now()})
    )
