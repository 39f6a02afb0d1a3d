"""Connectors, their task configs, status, source positions and sink offsets.

Every method that changes state is one transaction. Locks are taken in one order by every
writer (the connector row, then its task rows by id, then, through the triggers of migration
0002, the change counter), the order the task runner and the rebalance use too, so concurrent
changes wait for each other instead of deadlocking.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from itertools import chain
from typing import Any

from sqlalchemy import ColumnElement, Engine, FromClause, Select, delete, exists, func, literal_column, select, update
from sqlalchemy.dialects.postgresql import aggregate_order_by, insert
from sqlalchemy.orm import Session, sessionmaker

from connect_core.runtime.store.db import check_storable
from connect_core.runtime.store.models import (
    ChangeCounterRow,
    ConnectorRow,
    ConnectorStatusRow,
    ConnectorTopicRow,
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
    "ConnectorOverview",
    "ConnectorStatus",
    "ConnectorStore",
    "Listing",
    "Page",
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


@dataclass(frozen=True)
class ConnectorOverview:
    """What Kafka's connector info shows: the config and how many tasks, not the task configs."""

    name: str
    type: str
    config: dict[str, Any]
    task_count: int


@dataclass(frozen=True)
class Page:
    """A slice of the connectors in name order (the database's collation, as its primary key index):
    those after `after` (a keyset cursor: stable while connectors come and go, and it reads only
    the page through the index), then `offset` skipped, then at most `limit` (all when None)."""

    limit: int | None = None
    offset: int = 0
    after: str | None = None


@dataclass(frozen=True)
class Listing:
    """One page of connectors, read in one snapshot of the database."""

    #: the change count the rows are exactly as new as (read in the same snapshot)
    version: int
    names: tuple[str, ...]
    #: filled when asked for (`info=True`, `status=True`), by name
    overviews: Mapping[str, ConnectorOverview]
    statuses: Mapping[str, ConnectorStatus]
    #: whether connectors follow this page
    more: bool


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
        # What this transaction wrote, not a read after it: a concurrent delete may already have
        # removed the row, and the create still succeeded (its answer is 201, never 404).
        return ConnectorInfo(
            name=name,
            connector_class=connector_class,
            type=type,
            config=dict(config),
            target_state=target_state,
            config_version=1,
            tasks=tuple(dict(c) for c in task_configs),
        )

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
            # As committed by this transaction (a read after it could meet a concurrent delete).
            info = ConnectorInfo(
                name=name,
                connector_class=row.connector_class,
                type=row.type,
                config=dict(new["config"]),
                target_state=row.target_state,
                config_version=row.config_version,
                tasks=tuple(dict(c) for c in new["task_configs"]),
            )
        return info

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
        """The connector and its task configs, in one query."""
        with self._sessions() as s:
            found = s.execute(_info_query(_CONNECTORS).where(ConnectorRow.name == name)).one_or_none()
        if found is None:
            raise NotFoundError(f"connector `{name}` not found")
        return _info(found)

    def get_many(self, names: Sequence[str]) -> dict[str, ConnectorInfo]:
        """The named connectors that exist and their task configs, in one query."""
        with self._sessions() as s:
            query = _info_query(_CONNECTORS).where(ConnectorRow.name.in_(list(names)))
            rows = s.execute(query.order_by(ConnectorRow.name)).all()
        return {r.name: _info(r) for r in rows}

    def overview(self, name: str) -> ConnectorOverview:
        """The connector's config and task count, in one query (no task configs read)."""
        with self._sessions() as s:
            found = s.execute(_overview_query(_CONNECTORS).where(ConnectorRow.name == name)).one_or_none()
        if found is None:
            raise NotFoundError(f"connector `{name}` not found")
        return ConnectorOverview(found.name, found.type, found.config, found.task_count)

    def names(self, page: Page | None = None) -> list[str]:
        with self._sessions() as s:
            return list(s.scalars(_paged(page or Page())))

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
        """The connector's state and its tasks' (with the runs in progress), in one query."""
        with self._sessions() as s:
            found = s.execute(_status_query(_CONNECTORS).where(ConnectorRow.name == name)).one_or_none()
        if found is None:
            raise NotFoundError(f"connector `{name}` not found")
        return _status(found)

    def change_count(self) -> int:
        """How many changes connectors and their status have seen (one-row read)."""
        with self._sessions() as s:
            return int(s.scalar(select(ChangeCounterRow.n).where(ChangeCounterRow.id == 1)) or 0)

    def listing(self, page: Page, *, info: bool = False, status: bool = False) -> Listing:
        """A page of connector names, with their overviews and/or statuses when asked: one query per
        kind asked (names alone: one), whatever the number of connectors, all in one snapshot."""
        with self._sessions() as s:
            # One snapshot for the change count and every query: they agree with each other exactly.
            s.connection(execution_options={"isolation_level": "REPEATABLE READ", "postgresql_readonly": True})
            version = int(s.scalar(select(ChangeCounterRow.n).where(ChangeCounterRow.id == 1)) or 0)
            # The page is cut first: the per-connector parts are read for its rows only.
            rows = _paged(page, *_CONNECTORS.c).subquery("c")
            statuses = None
            if status:
                statuses = [_status(r) for r in s.execute(_status_query(rows).order_by(rows.c.name))]
            overviews = None
            if info:
                query = _overview_query(rows).order_by(rows.c.name)
                overviews = [ConnectorOverview(r.name, r.type, r.config, r.task_count) for r in s.execute(query)]
            if statuses is not None:
                names = [st.name for st in statuses]
            elif overviews is not None:
                names = [o.name for o in overviews]
            else:
                names = list(s.scalars(_paged(page)))
        more = page.limit is not None and len(names) > page.limit
        shown = tuple(names[: page.limit] if more else names)  # the query read one more: is there more?
        return Listing(
            version=version,
            names=shown,
            overviews={o.name: o for o in (overviews or [])[: len(shown)]},
            statuses={st.name: st for st in (statuses or [])[: len(shown)]},
            more=more,
        )

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

    def record_topics(self, s: Session, connector: str, topics: Iterable[str]) -> None:
        """Part of a caller's transaction (the run commit): the topics a run wrote or read, added to
        the connector's active topics (Kafka's KIP-558) unless there already."""
        rows = [{"connector": connector, "topic": t} for t in sorted(set(topics))]
        if rows:
            s.execute(insert(ConnectorTopicRow).values(rows).on_conflict_do_nothing())

    def active_topics(self, connector: str) -> list[str]:
        """The topics the connector wrote or read since its creation or its last reset."""
        self.get(connector)  # 404 for an unknown name
        with self._sessions() as s:
            query = select(ConnectorTopicRow.topic).where(ConnectorTopicRow.connector == connector)
            return sorted(s.scalars(query))

    def reset_topics(self, connector: str) -> None:
        """Empty the connector's active topics (Kafka's `PUT /connectors/{name}/topics/reset`)."""
        self.get(connector)
        with self._sessions.begin() as s:
            s.execute(delete(ConnectorTopicRow).where(ConnectorTopicRow.connector == connector))

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


def _paged(page: Page, *columns: Any) -> Select[Any]:
    """Connectors' `columns` (the name by default) in name order, cut to `page`, with one row more
    than `limit`: whether more follow."""
    query = select(*(columns or (ConnectorRow.name,)))
    if page.after is not None:
        query = query.where(ConnectorRow.name > page.after)
    query = query.order_by(ConnectorRow.name)
    if page.offset:
        query = query.offset(page.offset)
    return query if page.limit is None else query.limit(page.limit + 1)


#: Every connector (the queries below take a page of them instead, as a subquery).
_CONNECTORS: FromClause = ConnectorRow.__table__
_EMPTY_JSON_ARRAY: ColumnElement[Any] = literal_column("'[]'::json")


def _info_query(c: FromClause) -> Select[Any]:
    """Each connector of `c` with its task configs as one JSON array, in task order."""
    task_configs = func.json_agg(aggregate_order_by(TaskConfigRow.config, TaskConfigRow.task_id))
    tasks = select(func.coalesce(task_configs, _EMPTY_JSON_ARRAY)).where(TaskConfigRow.connector == c.c.name)
    return select(
        c.c.name,
        c.c.connector_class,
        c.c.type,
        c.c.config,
        c.c.target_state,
        c.c.config_version,
        tasks.scalar_subquery().label("tasks"),
    )


def _overview_query(c: FromClause) -> Select[Any]:
    """Each connector of `c` (name, type, config) with its number of tasks (their configs unread)."""
    count = select(func.count()).where(TaskConfigRow.connector == c.c.name).scalar_subquery()
    return select(c.c.name, c.c.type, c.c.config, count.label("task_count"))


#: Whether a run of the task holds a live lease (the task runs now): an index probe per task on
#: (connector, task_id, state), never a scan of the runs' history (a week of it by default).
_RUNNING_NOW = exists().where(
    TaskRunRow.connector == TaskStatusRow.connector,
    TaskRunRow.task_id == TaskStatusRow.task_id,
    TaskRunRow.state == "RUNNING",
    TaskRunRow.lease_expires_at > func.now(),
)

#: What a task's status holds, as the keys of a JSON object.
_TASK_FIELDS = {
    "id": TaskStatusRow.task_id,
    "state": TaskStatusRow.state,
    "trace": TaskStatusRow.trace,
    "worker_id": TaskStatusRow.worker_id,
    "last_run_id": TaskStatusRow.last_run_id,
    "errors": TaskStatusRow.errors,
    "running": _RUNNING_NOW,
}


def _status_query(c: FromClause) -> Select[Any]:
    """Each connector of `c`: its state, its tasks' states as one JSON array (in task order) and
    which of them run now — one statement."""
    task = func.json_build_object(*chain.from_iterable(_TASK_FIELDS.items()))
    task_states = func.json_agg(aggregate_order_by(task, TaskStatusRow.task_id))
    tasks = select(func.coalesce(task_states, _EMPTY_JSON_ARRAY)).where(TaskStatusRow.connector == c.c.name)
    return select(
        c.c.name,
        c.c.type,
        c.c.target_state,
        ConnectorStatusRow.state,
        ConnectorStatusRow.trace,
        ConnectorStatusRow.worker_id,
        tasks.scalar_subquery().label("tasks"),
    ).outerjoin(ConnectorStatusRow, ConnectorStatusRow.connector == c.c.name)


def _info(row: Any) -> ConnectorInfo:
    return ConnectorInfo(
        name=row.name,
        connector_class=row.connector_class,
        type=row.type,
        config=row.config,
        target_state=row.target_state,
        config_version=row.config_version,
        tasks=tuple(row.tasks),
    )


def _status(row: Any) -> ConnectorStatus:
    return ConnectorStatus(
        name=row.name,
        type=row.type,
        state=row.state or "UNASSIGNED",
        trace=row.trace,
        worker_id=row.worker_id,
        tasks=_task_statuses(row.target_state, row.tasks),
    )


def _task_statuses(target_state: str, rows: Sequence[Mapping[str, Any]]) -> tuple[TaskStatus, ...]:
    """Task states as Kafka Connect reports them: a task row says how the last run went, but
    where no run is in progress the connector's target state decides. A PAUSED connector's tasks
    are PAUSED (a FAILED one stays FAILED, with its trace, as in Kafka); a STOPPED connector has
    no tasks, as Kafka's (KIP-875) has none; a run still going on, whatever the target, is RUNNING."""
    tasks = []
    for t in rows:
        state, trace = t["state"], t["trace"]
        if t["running"]:
            state, trace = "RUNNING", None
        elif target_state == "STOPPED":
            continue
        elif target_state == "PAUSED" and state != "FAILED":
            state, trace = "PAUSED", None
        tasks.append(TaskStatus(t["id"], state, trace, t["worker_id"], t["last_run_id"], dict(t["errors"] or {})))
    return tuple(tasks)


def _check_storable(name: str, config: Mapping[str, Any], task_configs: Sequence[Mapping[str, Any]]) -> None:
    """Refuse, naming the key, what Postgres cannot hold (a NUL in a name or value) before it
    reaches SQL: a database error would be a 500 quoting the statement."""
    check_storable(name, "connector name")
    check_storable(dict(config), "config")
    check_storable([dict(t) for t in task_configs], "task config")
