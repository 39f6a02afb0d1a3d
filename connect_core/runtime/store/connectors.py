"""Connectors, their task configs, status, source positions and sink offsets.

Every method that changes state is one transaction. Locks are taken in one order by every
writer (the connector row, then its task rows by id, then, through the triggers of migration
0002, the change counter), the order the task runner and the rebalance use too, so concurrent
changes wait for each other instead of deadlocking.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import Engine, delete, func, select, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session, sessionmaker

from connect_core.runtime.store.db import check_storable
from connect_core.runtime.store.models import (
    ChangeCounterRow,
    ConnectorRow,
    ConnectorStatusRow,
    SinkOffsetRow,
    SourcePositionRow,
    TaskConfigRow,
    TaskRunRow,
    TaskStatusRow,
)
from connect_core.sdk.errors import ConflictError, NotFoundError
from connect_core.sdk.records import CommittedOffset, Positions, SourcePosition, TopicPartition, partition_key

__all__ = [
    "TARGET_STATES",
    "ConnectorExistsError",
    "ConnectorInfo",
    "ConnectorStatus",
    "ConnectorStore",
    "TaskStatus",
]

TARGET_STATES = ("RUNNING", "PAUSED", "STOPPED")


class ConnectorExistsError(ConflictError):
    """A connector of that name exists already."""


@dataclass(frozen=True)
class ConnectorInfo:
    name: str
    connector_class: str
    type: str
    config: dict[str, Any]
    target_state: str
    config_version: int
    tasks: tuple[dict[str, Any], ...]


@dataclass(frozen=True)
class TaskStatus:
    id: int
    state: str
    trace: str | None
    worker_id: str | None
    last_run_id: int | None
    #: records failed, skipped, dead-lettered, retries: totals over the task's runs
    errors: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class ConnectorStatus:
    name: str
    type: str
    state: str
    trace: str | None
    worker_id: str | None
    tasks: tuple[TaskStatus, ...]


class ConnectorStore:
    def __init__(self, engine: Engine) -> None:
        self._sessions = sessionmaker(engine, expire_on_commit=False)

    # -- connectors ---------------------------------------------------------

    def create(
        self,
        name: str,
        *,
        connector_class: str,
        type: str,
        config: Mapping[str, Any],
        task_configs: Sequence[Mapping[str, Any]],
        target_state: str = "RUNNING",
    ) -> ConnectorInfo:
        _check_storable(name, config, task_configs)
        with self._sessions.begin() as s:
            # ON CONFLICT: of concurrent creates of one name, the first commits and the others
            # wait for it on the key, then insert nothing (a check-then-insert would let two
            # through to a unique violation).
            created = s.execute(
                insert(ConnectorRow)
                .values(
                    name=name,
                    connector_class=connector_class,
                    type=type,
                    config=dict(config),
                    target_state=target_state,
                    config_version=1,
                )
                .on_conflict_do_nothing(index_elements=["name"])
                .returning(ConnectorRow.name)
            ).scalar()
            if created is None:
                raise ConnectorExistsError(f"connector `{name}` already exists; delete it first or update its config")
            s.add(ConnectorStatusRow(connector=name, state=target_state))
            s.flush()
            self._replace_tasks(s, name, task_configs, config_version=1)
        return self.get(name)

    def update_config(
        self,
        name: str,
        *,
        connector_class: str,
        type: str,
        config: Mapping[str, Any],
        task_configs: Sequence[Mapping[str, Any]],
    ) -> ConnectorInfo:
        """Replace the config and task configs; bumps the config version (fencing running tasks)."""
        new = {"connector_class": connector_class, "type": type, "config": config, "task_configs": task_configs}
        return self.modify_config(name, lambda _current: new)

    def modify_config(self, name: str, change: Callable[[dict[str, Any]], Mapping[str, Any]]) -> ConnectorInfo:
        """Read-modify-write of a connector's config under its row lock, in one transaction.

        `change` gets the current config and returns the new `connector_class`, `type`, `config`
        and `task_configs` (it validates: a ConfigError leaves everything as it was). Concurrent
        changes of one connector wait for each other, so none is lost (a PATCH that read the
        config before another PATCH committed would otherwise overwrite it).
        """
        with self._sessions.begin() as s:
            row = self._lock(s, name)
            new = change(dict(row.config))
            _check_storable(name, new["config"], new["task_configs"])
            row.connector_class, row.type = new["connector_class"], new["type"]
            row.config = dict(new["config"])
            row.config_version += 1
            row.updated_at = func.now()
            self._replace_tasks(s, name, new["task_configs"], config_version=row.config_version)
        return self.get(name)

    def _replace_tasks(
        self, s: Session, name: str, task_configs: Sequence[Mapping[str, Any]], *, config_version: int
    ) -> None:
        existing = {t.task_id: t for t in s.scalars(select(TaskConfigRow).where(TaskConfigRow.connector == name))}
        for task_id, cfg in enumerate(task_configs):
            task = existing.pop(task_id, None)
            if task is None:
                s.add(TaskConfigRow(connector=name, task_id=task_id, config=dict(cfg), config_version=config_version))
                s.add(TaskStatusRow(connector=name, task_id=task_id, state="UNASSIGNED"))
            else:
                # A new config is a new generation: a run of the old config must not commit.
                task.config, task.config_version, task.generation = dict(cfg), config_version, task.generation + 1
        for gone in existing.values():
            s.delete(gone)

    def _lock(self, s: Session, name: str, *, for_delete: bool = False) -> ConnectorRow:
        """Lock the connector's row, then its task rows by id: the lock order of every writer.

        FOR NO KEY UPDATE (not FOR UPDATE) unless deleting: a rebalance holds the connector
        rows FOR KEY SHARE while it writes assignments, and must not wait for a config change.
        """
        query = select(ConnectorRow).where(ConnectorRow.name == name)
        row = s.scalars(query.with_for_update(key_share=not for_delete)).one_or_none()
        if row is None:
            raise NotFoundError(f"connector `{name}` not found")
        # Task rows now, before any write fires the change-counter trigger: a runner locks its task
        # row before the counter, so taking a task row after the counter could deadlock with it.
        s.execute(
            select(TaskConfigRow.task_id)
            .where(TaskConfigRow.connector == name)
            .order_by(TaskConfigRow.task_id)
            .with_for_update()
        )
        return row

    def get(self, name: str) -> ConnectorInfo:
        with self._sessions() as s:
            row = s.get(ConnectorRow, name)
            if row is None:
                raise NotFoundError(f"connector `{name}` not found")
            tasks = s.scalars(
                select(TaskConfigRow.config).where(TaskConfigRow.connector == name).order_by(TaskConfigRow.task_id)
            ).all()
            return ConnectorInfo(
                name=row.name,
                connector_class=row.connector_class,
                type=row.type,
                config=row.config,
                target_state=row.target_state,
                config_version=row.config_version,
                tasks=tuple(tasks),
            )

    def names(self) -> list[str]:
        with self._sessions() as s:
            return list(s.scalars(select(ConnectorRow.name).order_by(ConnectorRow.name)))

    def delete(self, name: str) -> None:
        """Delete the connector, its tasks and status. Positions and offsets stay, as in Kafka Connect."""
        with self._sessions.begin() as s:
            self._lock(s, name, for_delete=True)
            s.execute(delete(ConnectorRow).where(ConnectorRow.name == name))

    def set_target_state(self, name: str, state: str) -> None:
        if state not in TARGET_STATES:
            raise ValueError(f"target state must be one of {TARGET_STATES}, not `{state}`")
        with self._sessions.begin() as s:
            row = self._lock(s, name)
            row.target_state = state
            row.updated_at = func.now()
            s.execute(
                update(ConnectorStatusRow)
                .where(ConnectorStatusRow.connector == name)
                .values(state=state, trace=None, updated_at=func.now())
            )

    def reset_task_states(self, name: str, task_ids: Sequence[int]) -> None:
        """Clear the given tasks' FAILED state and trace (a restart): they run again when next scheduled."""
        with self._sessions.begin() as s:
            self._lock(s, name)
            s.execute(
                update(TaskStatusRow)
                .where(TaskStatusRow.connector == name, TaskStatusRow.task_id.in_(list(task_ids)))
                .values(state="UNASSIGNED", trace=None, updated_at=func.now())
            )
            s.execute(
                update(ConnectorStatusRow)
                .where(ConnectorStatusRow.connector == name, ConnectorStatusRow.state == "FAILED")
                .values(state="RUNNING", trace=None, updated_at=func.now())
            )

    def alter_positions(
        self, name: str, *, set_: Sequence[SourcePosition], remove: Sequence[Mapping[str, Any]]
    ) -> None:
        """Set or remove source positions (Kafka's PATCH offsets); fences running tasks."""
        check_storable([[dict(p.partition), dict(p.offset)] for p in set_] + [dict(p) for p in remove], "offsets")
        with self._sessions.begin() as s:
            self._lock(s, name)
            self._fence(s, name)
            self.upsert_positions(s, name, set_)
            keys = [partition_key(p) for p in remove]
            if keys:
                s.execute(
                    delete(SourcePositionRow).where(
                        SourcePositionRow.connector == name, SourcePositionRow.partition_key.in_(keys)
                    )
                )

    def alter_sink_offsets(self, name: str, changes: Mapping[TopicPartition, int | None]) -> None:
        """Set (or, with None, remove) sink offsets; fences running tasks."""
        with self._sessions.begin() as s:
            self._lock(s, name)
            self._fence(s, name)
            for tp, offset in sorted(changes.items()):
                if offset is None:
                    s.execute(
                        delete(SinkOffsetRow).where(
                            SinkOffsetRow.connector == name,
                            SinkOffsetRow.topic == tp.topic,
                            SinkOffsetRow.partition == tp.partition,
                        )
                    )
                else:
                    # A moved offset invalidates the sink's recovery metadata (it described another position).
                    self.upsert_sink_offsets(s, name, {tp: offset}, {})

    def reset_offsets(self, name: str) -> None:
        """Forget every position and offset of the connector: its next run starts over."""
        with self._sessions.begin() as s:
            self._lock(s, name)
            self._fence(s, name)
            s.execute(delete(SourcePositionRow).where(SourcePositionRow.connector == name))
            s.execute(delete(SinkOffsetRow).where(SinkOffsetRow.connector == name))

    def _fence(self, s: Session, name: str) -> None:
        s.execute(
            update(TaskConfigRow).where(TaskConfigRow.connector == name).values(generation=TaskConfigRow.generation + 1)
        )

    # -- status -------------------------------------------------------------

    def status(self, name: str) -> ConnectorStatus:
        with self._sessions() as s:
            row = s.get(ConnectorRow, name)
            if row is None:
                raise NotFoundError(f"connector `{name}` not found")
            conn = s.get(ConnectorStatusRow, name)
            tasks = s.scalars(
                select(TaskStatusRow).where(TaskStatusRow.connector == name).order_by(TaskStatusRow.task_id)
            ).all()
            in_progress = _runs_in_progress(s, name)
            return ConnectorStatus(
                name=name,
                type=row.type,
                state=conn.state if conn else "UNASSIGNED",
                trace=conn.trace if conn else None,
                worker_id=conn.worker_id if conn else None,
                tasks=_task_statuses(row.target_state, tasks, in_progress),
            )

    def change_count(self) -> int:
        """How many changes connectors and their status have seen (one-row read)."""
        with self._sessions() as s:
            return int(s.scalar(select(ChangeCounterRow.n).where(ChangeCounterRow.id == 1)) or 0)

    def snapshot(self) -> tuple[int, dict[str, ConnectorInfo], dict[str, ConnectorStatus]]:
        """Every connector's info and status, and the change count they are at least as new as."""
        with self._sessions() as s:
            # The count first: data read after it can only be newer, never older.
            version = int(s.scalar(select(ChangeCounterRow.n).where(ChangeCounterRow.id == 1)) or 0)
            rows = s.scalars(select(ConnectorRow).order_by(ConnectorRow.name)).all()
            tasks: dict[str, list[dict[str, Any]]] = {}
            for t in s.scalars(select(TaskConfigRow).order_by(TaskConfigRow.connector, TaskConfigRow.task_id)):
                tasks.setdefault(t.connector, []).append(t.config)
            conn_status = {c.connector: c for c in s.scalars(select(ConnectorStatusRow))}
            task_rows: dict[str, list[TaskStatusRow]] = {}
            for ts in s.scalars(select(TaskStatusRow).order_by(TaskStatusRow.connector, TaskStatusRow.task_id)):
                task_rows.setdefault(ts.connector, []).append(ts)
            in_progress = _runs_in_progress(s)
        infos, statuses = {}, {}
        for r in rows:
            infos[r.name] = ConnectorInfo(
                r.name,
                r.connector_class,
                r.type,
                r.config,
                r.target_state,
                r.config_version,
                tuple(tasks.get(r.name, ())),
            )
            c = conn_status.get(r.name)
            statuses[r.name] = ConnectorStatus(
                r.name,
                r.type,
                c.state if c else "UNASSIGNED",
                c.trace if c else None,
                c.worker_id if c else None,
                _task_statuses(r.target_state, task_rows.get(r.name, ()), in_progress),
            )
        return version, infos, statuses

    def last_runs(self, name: str, limit: int = 10, task_id: int | None = None) -> list[dict[str, Any]]:
        """The most recent task runs of a connector (or of one of its tasks), newest first."""
        query = select(TaskRunRow).where(TaskRunRow.connector == name)
        if task_id is not None:
            query = query.where(TaskRunRow.task_id == task_id)
        with self._sessions() as s:
            rows = s.scalars(query.order_by(TaskRunRow.id.desc()).limit(limit)).all()
            return [
                {
                    "run_id": r.id,
                    "task": r.task_id,
                    "generation": r.generation,
                    "state": r.state,
                    "pool": r.pool,
                    "started_at": _iso(r.started_at),
                    "finished_at": _iso(r.finished_at),
                    "duration_s": round((r.finished_at - r.started_at).total_seconds(), 3) if r.finished_at else None,
                    "stats": r.stats,
                    "error": r.error,
                }
                for r in rows
            ]

    # -- positions and offsets ---------------------------------------------

    def positions(self, connector: str) -> Positions:
        with self._sessions() as s:
            rows = s.scalars(select(SourcePositionRow).where(SourcePositionRow.connector == connector)).all()
            return Positions({r.partition_key: SourcePosition(r.partition, r.offset) for r in rows})

    def sink_offsets(self, connector: str) -> dict[TopicPartition, CommittedOffset]:
        with self._sessions() as s:
            rows = s.scalars(select(SinkOffsetRow).where(SinkOffsetRow.connector == connector)).all()
            return {TopicPartition(r.topic, r.partition): CommittedOffset(r.offset, r.metadata_) for r in rows}

    def upsert_positions(self, s: Session, connector: str, positions: Sequence[SourcePosition]) -> None:
        """Part of a caller's transaction (the run commit)."""
        for p in positions:
            stmt = insert(SourcePositionRow).values(
                connector=connector,
                partition_key=partition_key(p.partition),
                partition=dict(p.partition),
                offset=dict(p.offset),
            )
            s.execute(
                stmt.on_conflict_do_update(
                    index_elements=["connector", "partition_key"],
                    set_={"offset": stmt.excluded.offset, "updated_at": func.now()},
                )
            )

    def upsert_sink_offsets(
        self, s: Session, connector: str, offsets: Mapping[TopicPartition, int], metadata: Mapping[str, Any]
    ) -> None:
        """Part of a caller's transaction (the run commit)."""
        for tp, offset in sorted(offsets.items()):
            stmt = insert(SinkOffsetRow).values(
                connector=connector, topic=tp.topic, partition=tp.partition, offset=offset, metadata_=dict(metadata)
            )
            s.execute(
                stmt.on_conflict_do_update(
                    index_elements=["connector", "topic", "partition"],
                    set_={"offset": stmt.excluded.offset, "metadata": stmt.excluded.metadata, "updated_at": func.now()},
                )
            )


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def _runs_in_progress(s: Session, connector: str | None = None) -> set[tuple[str, int]]:
    """(connector, task) of every run holding a live lease: the tasks actually running now."""
    query = select(TaskRunRow.connector, TaskRunRow.task_id).where(
        TaskRunRow.state == "RUNNING", TaskRunRow.lease_expires_at > func.now()
    )
    if connector is not None:
        query = query.where(TaskRunRow.connector == connector)
    return {(c, t) for c, t in s.execute(query)}


def _task_statuses(
    target_state: str, rows: Sequence[TaskStatusRow], in_progress: set[tuple[str, int]]
) -> tuple[TaskStatus, ...]:
    """Task states as Kafka Connect reports them: a task row says how the last run went, but
    where no run is in progress the connector's target state decides. A PAUSED connector's tasks
    are PAUSED (a FAILED one stays FAILED, with its trace, as in Kafka); a STOPPED connector has
    no tasks, as Kafka's (KIP-875) has none; a run still going on, whatever the target, is RUNNING."""
    tasks = []
    for t in rows:
        running_now = (t.connector, t.task_id) in in_progress
        state, trace = t.state, t.trace
        if running_now:
            state, trace = "RUNNING", None
        elif target_state == "STOPPED":
            continue
        elif target_state == "PAUSED" and state != "FAILED":
            state, trace = "PAUSED", None
        tasks.append(TaskStatus(t.task_id, state, trace, t.worker_id, t.last_run_id, dict(t.errors or {})))
    return tuple(tasks)


def _check_storable(name: str, config: Mapping[str, Any], task_configs: Sequence[Mapping[str, Any]]) -> None:
    """Refuse, naming the key, what Postgres cannot hold (a NUL in a name or value) before it
    reaches SQL: a database error would be a 500 quoting the statement."""
    check_storable(name, "connector name")
    check_storable(dict(config), "config")
    check_storable([dict(t) for t in task_configs], "task config")
