"""Reading connectors, their status, source positions, sink offsets and active topics: each read
one query (or one snapshot of a few), whatever the number of connectors and tasks."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from itertools import chain
from typing import Any

from sqlalchemy import ColumnElement, Engine, FromClause, Select, exists, func, literal_column, select
from sqlalchemy.dialects.postgresql import aggregate_order_by
from sqlalchemy.orm import sessionmaker

from connect_core.runtime.store._connector_model import (
    ConnectorInfo,
    ConnectorOverview,
    ConnectorStatus,
    Listing,
    Page,
    TaskStatus,
)
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
from connect_core.runtime.store.states import ConnectorState, RunState, TargetState
from connect_core.sdk.errors import NotFoundError
from connect_core.sdk.records import CommittedOffset, Positions, SourcePosition, TopicPartition

__all__ = ["ConnectorReads"]


class ConnectorReads:
    """The reads of `ConnectorStore` (which adds the writes)."""

    def __init__(self, engine: Engine) -> None:
        self._sessions = sessionmaker(engine, expire_on_commit=False)

    # -- connectors ---------------------------------------------------------

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

    def active_topics(self, connector: str) -> list[str]:
        """The topics the connector wrote or read since its creation or its last reset."""
        self.get(connector)  # 404 for an unknown name
        with self._sessions() as s:
            query = select(ConnectorTopicRow.topic).where(ConnectorTopicRow.connector == connector)
            return sorted(s.scalars(query))


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
    TaskRunRow.state == RunState.RUNNING,
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
        state=row.state or ConnectorState.UNASSIGNED,
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
            state, trace = ConnectorState.RUNNING, None
        elif target_state == TargetState.STOPPED:
            continue
        elif target_state == TargetState.PAUSED and state != ConnectorState.FAILED:
            state, trace = ConnectorState.PAUSED, None
        tasks.append(TaskStatus(t["id"], state, trace, t["worker_id"], t["last_run_id"], dict(t["errors"] or {})))
    return tuple(tasks)
