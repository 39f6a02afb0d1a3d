"""The rows of the assignment tables a rebalance reads and writes: which work is unplaced or orphaned,
the locks it takes, the assignments it moves or deletes, and its log entry. A connector's own
assignment is stored with task id `CONNECTOR_ITSELF`."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from sqlalchemy import Select, delete, func, select, text
from sqlalchemy.orm import Session

from connect_core.runtime.cluster.allocation import PREFERRED_POOL_KEY, Work
from connect_core.runtime.store.models import (
    AssignmentRow,
    ConnectorRow,
    PlacementQueueRow,
    RebalanceLogRow,
    RebalanceStateRow,
    TaskConfigRow,
)

__all__ = [
    "CONNECTOR_ITSELF",
    "delete_assignments",
    "dequeue",
    "key_of",
    "lock_connectors",
    "log_rebalance",
    "orphans",
    "preferred_pools",
    "task_id_of",
    "unplaced_connectors",
    "unplaced_tasks",
    "update_assignments",
    "work_of",
]

CONNECTOR_ITSELF = -1


def preferred_pools(s: Session, names: Collection[str] | None = None) -> dict[str, str]:
    """connector → its `pool.preferred`, for the connectors (of `names`, if given) that have one."""
    preferred = ConnectorRow.config[PREFERRED_POOL_KEY].astext
    query = select(ConnectorRow.name, preferred).where(preferred.is_not(None))
    if names is not None:
        query = query.where(ConnectorRow.name.in_(list(names)))
    return {name: pool for name, pool in s.execute(query) if pool}


def unplaced_connectors(names: Collection[str]) -> Select[str]:
    placed = select(AssignmentRow.connector).where(
        AssignmentRow.connector == ConnectorRow.name, AssignmentRow.task_id == CONNECTOR_ITSELF
    )
    query = select(ConnectorRow.name).where(~placed.exists())
    return query.where(ConnectorRow.name.in_(list(names)))


def unplaced_tasks(names: Collection[str]) -> Select[str, int]:
    placed = select(AssignmentRow.connector).where(
        AssignmentRow.connector == TaskConfigRow.connector, AssignmentRow.task_id == TaskConfigRow.task_id
    )
    query = select(TaskConfigRow.connector, TaskConfigRow.task_id).where(~placed.exists())
    return query.where(TaskConfigRow.connector.in_(list(names)))


def orphans(names: Collection[str]) -> Select[str, int, str]:
    """Assignments of tasks that are gone (a connector resized down; a deleted connector's rows go
    with it by the foreign key)."""
    exists = select(TaskConfigRow.connector).where(
        TaskConfigRow.connector == AssignmentRow.connector, TaskConfigRow.task_id == AssignmentRow.task_id
    )
    query = select(AssignmentRow.connector, AssignmentRow.task_id, AssignmentRow.pool).where(
        AssignmentRow.task_id != CONNECTOR_ITSELF, ~exists.exists()
    )
    return query.where(AssignmentRow.connector.in_(list(names)))


def lock_connectors(s: Session, names: Collection[str] | None) -> set[str]:
    """Hold the connectors FOR KEY SHARE, in name order (every writer locks a connector row first):
    none can be deleted before its assignments are written, so their foreign key always holds.
    Config changes (FOR NO KEY UPDATE) do not wait. Returns those that exist."""
    query = select(ConnectorRow.name).order_by(ConnectorRow.name).with_for_update(read=True, key_share=True)
    if names is not None:
        query = query.where(ConnectorRow.name.in_(sorted(names)))
    return set(s.scalars(query))


def dequeue(s: Session, placed: Collection[str]) -> None:
    """The `placed` connectors, and those deleted meanwhile, leave the placement queue. Done after
    every lock the rebalance takes, so a writer's trigger waiting on a queue row never waits for a
    rebalance that waits for that writer. A connector created after the rebalance took its locks
    stays queued (its own create places it, or the sensor does)."""
    gone = ~select(ConnectorRow.name).where(ConnectorRow.name == PlacementQueueRow.connector).exists()
    s.execute(delete(PlacementQueueRow).where(PlacementQueueRow.connector.in_(sorted(placed)) | gone))


def delete_assignments(s: Session, items: Sequence[Work]) -> None:
    s.execute(
        text(
            "DELETE FROM connect.assignments a USING unnest(CAST(:c AS text[]), CAST(:t AS int[])) AS g(c, t) "
            "WHERE a.connector = g.c AND a.task_id = g.t"
        ),
        {"c": [w.connector for w in items], "t": [task_id_of(w) for w in items]},
    )


def update_assignments(s: Session, moved: Mapping[Work, str], generation: int) -> None:
    s.execute(
        text(
            "UPDATE connect.assignments a SET pool = m.p, generation = :g "
            "FROM unnest(CAST(:c AS text[]), CAST(:t AS int[]), CAST(:p AS text[])) AS m(c, t, p) "
            "WHERE a.connector = m.c AND a.task_id = m.t"
        ),
        {
            "c": [w.connector for w in moved],
            "t": [task_id_of(w) for w in moved],
            "p": list(moved.values()),
            "g": generation,
        },
    )


def log_rebalance(
    s: Session,
    state: RebalanceStateRow,
    generation: int,
    strategy: str,
    reason: str,
    moves: Sequence[tuple[Work, str | None, str]],
    placed: int,
    removed: int,
) -> None:
    state.generation = generation
    state.updated_at = func.now()
    s.add(
        RebalanceLogRow(
            generation=generation,
            strategy=strategy,
            reason=reason,
            moved=len(moves),
            moves=[[key_of(w), old, new] for w, old, new in moves],
            placed=placed,
            removed=removed,
        )
    )


def work_of(connector: str, task_id: int) -> Work:
    return Work(connector, None if task_id == CONNECTOR_ITSELF else task_id)


def task_id_of(work: Work) -> int:
    return CONNECTOR_ITSELF if work.task is None else work.task


def key_of(work: Work) -> str:
    return work.connector if work.task is None else f"{work.connector}-{work.task}"
