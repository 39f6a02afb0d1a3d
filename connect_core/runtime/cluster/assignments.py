"""Where the work runs: the assignment of every connector and task to a Spark pool under a
rebalance generation, and the rebalance that writes it.

`rebalance` is incremental, as Kafka's cooperative rebalancing (KIP-415): while
the live pools are those of the last full allocation, a create, resize or delete
touches only its own connector's rows (new work goes to the least loaded pools,
removed work's rows are deleted), at a cost independent of the cluster's size.
When the pools change, the strategy allocates everything again and only the rows
that change are written, under generation + 1 in one transaction, and the
fencing generation of every moved task is bumped, so a run still going on a lost
pool can finish but never commit. The log records what moved, not whole maps.

A *standby* pool gets work only while no other pool is up (alive and not failing its
probe): the allocation sees either the preferred pools or, when every one of them
is down, the standby ones (ADR 0008: the platform's warm pool before `local`).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from sqlalchemy import Engine, func, literal_column, select, text, tuple_, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session, sessionmaker

from connect_core.runtime.cluster._assignment_rows import (
    delete_assignments,
    dequeue,
    key_of,
    lock_connectors,
    log_rebalance,
    orphans,
    preferred_pools,
    task_id_of,
    unplaced_connectors,
    unplaced_tasks,
    update_assignments,
    work_of,
)
from connect_core.runtime.cluster.allocation import Pool, Work, allocate, least_loaded, pinned_connectors
from connect_core.runtime.store.db import CONFLICT, store_fault
from connect_core.runtime.store.models import (
    AssignmentRow,
    PlacementQueueRow,
    RebalanceLogRow,
    RebalanceStateRow,
    SparkPoolRow,
    TaskConfigRow,
)

__all__ = ["AssignmentStore", "RebalanceResult"]

_REBALANCE_ATTEMPTS = 3


@dataclass(frozen=True)
class RebalanceResult:
    generation: int
    #: items placed or moved (new work counts: it got a pool)
    moved: int
    #: where each placed or moved item went
    changes: dict[Work, str]
    reason: str = ""
    #: a full allocation (the live pools changed), or only new and removed work placed
    full: bool = False


class AssignmentStore:
    """The assignments of work to pools, read and rebalanced (`PoolStore` adds the pools themselves)."""

    def __init__(self, engine: Engine) -> None:
        self._sessions = sessionmaker(engine, expire_on_commit=False)

    def assignment(self) -> dict[Work, tuple[str, int]]:
        """Current pool and generation of every connector and task."""
        with self._sessions() as s:
            rows = s.scalars(select(AssignmentRow)).all()
        return {work_of(r.connector, r.task_id): (r.pool, r.generation) for r in rows}

    def running(self) -> dict[str, list[str]]:
        """What each pool runs: `connector` and `connector-task` names, in connector and task order."""
        by_pool: dict[str, list[str]] = {}
        for work, (pool, _generation) in sorted(
            self.assignment().items(), key=lambda kv: (kv[0].connector, -1 if kv[0].task is None else kv[0].task)
        ):
            by_pool.setdefault(pool, []).append(key_of(work))
        return by_pool

    def placement(self, connector: str, task_id: int) -> tuple[str, int] | None:
        """The pool a task is assigned to, and the rebalance generation that put it there."""
        with self._sessions() as s:
            row = s.get(AssignmentRow, (connector, task_id))
        return (row.pool, row.generation) if row else None

    def pending(self, strategy: str, heartbeat_timeout: float, max_delay: float = 0.0) -> str | None:
        """Why a rebalance is due now, or None (nothing written; three small queries, whatever the
        cluster's size): the live pools differ from the last full allocation's, or connectors'
        work changed since a rebalance placed it (the placement queue, filled by triggers)."""
        with self._sessions() as s:
            state = s.get(RebalanceStateRow, 1)
            pools = _live_pools(s, strategy, heartbeat_timeout, max_delay)
            if state is None or state.pools != pools or state.strategy != strategy:
                return _pools_reason(state.pools if state else None, pools)
            if s.execute(select(PlacementQueueRow.connector).limit(1)).first():
                return "connectors created, resized or deleted"
            return None

    def rebalance(
        self,
        strategy: str,
        heartbeat_timeout: float,
        reason: str | None = None,
        max_delay: float = 0.0,
        connectors: Collection[str] | None = None,
    ) -> RebalanceResult:
        """Place the work over the live pools; write only what changes.

        While the live pools (and their capacities) are those of the last full allocation and the
        strategy is `sticky`, only new work is placed (on the least loaded pools by capacity) and
        the assignments of removed work are deleted: the work of `connectors` if given (a create,
        resize or delete of those), else all unplaced work. Its cost does not grow with the
        cluster. Otherwise the strategy allocates everything again, and only the rows that change
        are written; moved tasks are fenced (a run still going on their old pool cannot commit).

        With `sticky`, a pool silent for less than `heartbeat_timeout + max_delay` keeps its work
        (Kafka's `scheduled.rebalance.max.delay`): a pool that blips does not reshuffle anything.

        A rebalance that loses a lock wait (a long config change, a runner's commit) is run
        again: it recomputes its plan from scratch, so a retry is always safe, and the caller
        (a create that already committed) should not fail for it.
        """
        for attempt in range(1, _REBALANCE_ATTEMPTS + 1):
            try:
                return self._rebalance(strategy, heartbeat_timeout, reason, max_delay, connectors)
            except DBAPIError as exc:
                if store_fault(exc) != CONFLICT or attempt == _REBALANCE_ATTEMPTS:
                    raise
        raise AssertionError("unreachable")

    def _rebalance(
        self,
        strategy: str,
        heartbeat_timeout: float,
        reason: str | None,
        max_delay: float,
        connectors: Collection[str] | None,
    ) -> RebalanceResult:
        with self._sessions.begin() as s:
            # One rebalance at a time, whoever runs it (sensors on several schedulers).
            s.execute(text("SELECT pg_advisory_xact_lock(hashtext('connect_core.rebalance'))"))
            state = s.get(RebalanceStateRow, 1)
            if state is None:  # a store whose row was deleted by hand: start the count again
                state = RebalanceStateRow(id=1, generation=0)
                s.add(state)
            pools = _live_pools(s, strategy, heartbeat_timeout, max_delay)
            if strategy == "sticky" and state.pools == pools and state.strategy == strategy:
                if not _off_their_preferred_pool(s, pools, connectors):
                    return _incremental(s, state, strategy, pools, reason, connectors)
                reason = reason or "a connector's preferred pool changed"
            return _full(s, state, strategy, pools, reason)

    def history(self, limit: int = 20) -> list[dict[str, Any]]:
        """The latest rebalances, newest first, with what each placed or moved."""
        with self._sessions() as s:
            rows = s.scalars(select(RebalanceLogRow).order_by(RebalanceLogRow.id.desc()).limit(limit)).all()
        return [
            {
                "generation": r.generation,
                "strategy": r.strategy,
                "reason": r.reason,
                "moved": r.moved,
                "placed": r.placed,
                "removed": r.removed,
                "at": r.created_at.isoformat(),
                "moves": [{"item": item, "from": old, "to": new} for item, old, new in r.moves],
            }
            for r in rows
        ]


def _live_pools(s: Session, strategy: str, heartbeat_timeout: float, max_delay: float) -> dict[str, int]:
    """name → capacity of the pools a rebalance allocates over now: the live preferred pools while
    one of them is up (alive and not failing its probe), else the live standby pools, if any.

    `sticky`'s grace (`max_delay`) keeps a silent pool's work among preferred pools, where moving it
    reshuffles a cluster; it does not delay a fallback to a standby, which costs only a fenced run,
    and the way back is as quick: the first good probe."""
    grace = max_delay if strategy == "sticky" else 0.0
    local = SparkPoolRow.master.startswith("local")
    cutoff = func.now() - timedelta(seconds=heartbeat_timeout + grace)
    up = local | (
        (SparkPoolRow.heartbeat_at >= func.now() - timedelta(seconds=heartbeat_timeout))
        & (SparkPoolRow.probe["ok"].as_boolean().is_not(False))
    )
    rows = s.execute(
        select(SparkPoolRow.name, SparkPoolRow.capacity, SparkPoolRow.standby, up)
        .where((SparkPoolRow.heartbeat_at >= cutoff) | local)
        .order_by(SparkPoolRow.name)
    ).all()
    preferred_up = any(not standby and is_up for _, _, standby, is_up in rows)
    standbys = any(standby for _, _, standby, _ in rows)
    keep_standby = standbys and not preferred_up
    return {name: capacity for name, capacity, standby, _ in rows if not standbys or standby == keep_standby}


def _off_their_preferred_pool(s: Session, pools: Mapping[str, int], connectors: Collection[str] | None) -> bool:
    """Whether work of `connectors` (None: of any) placed before runs off its connector's preferred pool
    while that pool is up (a `pool.preferred` set or changed since): only a full allocation moves it."""
    preferred = preferred_pools(s, connectors)
    pinned = pinned_connectors(pools, set(preferred), preferred)
    if not pinned:
        return False
    placed = select(AssignmentRow.connector, AssignmentRow.pool).where(AssignmentRow.connector.in_(list(pinned)))
    return any(pool != pinned[connector] for connector, pool in s.execute(placed))


def _pools_reason(before: Mapping[str, int] | None, now: Mapping[str, int]) -> str:
    if before is None:
        return "first allocation"
    parts = [f"pool {p} lost" for p in sorted(set(before) - set(now))]
    parts += [f"pool {p} joined" for p in sorted(set(now) - set(before))]
    parts += [f"pool {p} resized" for p in sorted(set(now) & set(before)) if now[p] != before[p]]
    return "; ".join(parts) or "strategy changed"


def _incremental(
    s: Session,
    state: RebalanceStateRow,
    strategy: str,
    pools: dict[str, int],
    reason: str | None,
    connectors: Collection[str] | None,
) -> RebalanceResult:
    """Place the unplaced work of `connectors` (or of all) on the least loaded pools; delete the
    assignments of their removed tasks. Nothing that runs moves, so nothing is fenced."""
    if connectors is None:  # the sensor: the connectors whose work changed since they were placed
        connectors = set(s.scalars(select(PlacementQueueRow.connector)))
    locked = lock_connectors(s, connectors) if connectors else set()
    if not locked:
        dequeue(s, set())  # those named and deleted meanwhile
        return RebalanceResult(state.generation, 0, {}, reason or "nothing to do")
    new = [Work(c) for c in sorted(s.scalars(unplaced_connectors(locked)))]
    new += [Work(c, t) for c, t in sorted(s.execute(unplaced_tasks(locked)))]
    pinned = pinned_connectors(pools, locked, preferred_pools(s, locked))
    gone = [(Work(c, t), p) for c, t, p in s.execute(orphans(locked))]
    if not (gone or (new and pools)):
        dequeue(s, locked if pools or not new else set())
        return RebalanceResult(state.generation, 0, {}, reason or "nothing to do")
    generation = state.generation + 1
    load = {p: n for p, n in s.execute(select(AssignmentRow.pool, func.count()).group_by(AssignmentRow.pool))}
    changes = least_loaded([w for w in new if w.connector not in pinned], pools, load)
    changes.update({w: pinned[w.connector] for w in new if w.connector in pinned})
    if gone:
        delete_assignments(s, [w for w, _ in gone])
    if changes:
        s.execute(
            insert(AssignmentRow).values(
                [
                    {"connector": w.connector, "task_id": task_id_of(w), "pool": p, "generation": generation}
                    for w, p in changes.items()
                ]
            )
        )
    why = reason or "; ".join(
        ([f"{len(changes)} new connector/task item(s)"] if changes else [])
        + ([f"{len(gone)} item(s) removed"] if gone else [])
    )
    log_rebalance(
        s, state, generation, strategy, why, [(w, None, p) for w, p in changes.items()], len(changes), len(gone)
    )
    dequeue(s, locked if pools or not new else set())  # without a live pool, new work stays queued
    return RebalanceResult(generation, len(changes), changes, why)


def _full(
    s: Session, state: RebalanceStateRow, strategy: str, pools: dict[str, int], reason: str | None
) -> RebalanceResult:
    """The strategy over every connector and task: what moves is fenced; only changed rows are written."""
    connectors = lock_connectors(s, None)
    tasks: dict[str, list[dict[str, Any]]] = {}
    if strategy == "consistent-hash":  # the only strategy that reads a task's config
        query = select(TaskConfigRow.connector, TaskConfigRow.config)
    else:
        query = select(TaskConfigRow.connector, literal_column("NULL"))
    for connector, config in s.execute(query.order_by(TaskConfigRow.connector, TaskConfigRow.task_id)):
        if connector in connectors:
            tasks.setdefault(connector, []).append(config or {})
    for name in connectors:
        tasks.setdefault(name, [])
    previous = {
        work_of(c, t): p
        for c, t, p in s.execute(select(AssignmentRow.connector, AssignmentRow.task_id, AssignmentRow.pool))
    }
    pool_list = [Pool(name, capacity) for name, capacity in pools.items()]
    new = allocate(strategy, pool_list, tasks, previous, preferred_pools(s))
    placed = {w: p for w, p in new.items() if w not in previous}
    moved = {w: p for w, p in new.items() if w in previous and previous[w] != p}
    gone = [w for w in previous if w not in new]
    why = reason or _full_reason(state.pools, pools, previous, new, placed, gone)
    state.pools, state.strategy = pools, strategy
    done = connectors if pools else set()  # placed (without a live pool, nothing is)
    if not (placed or moved or gone):
        dequeue(s, done)
        return RebalanceResult(state.generation, 0, {}, why, full=True)
    generation = state.generation + 1
    fenced = sorted((w.connector, w.task) for w in moved if w.task is not None)
    if fenced:  # their rows before any write: a runner locks a task row before the counter
        s.execute(
            select(TaskConfigRow.task_id)
            .where(tuple_(TaskConfigRow.connector, TaskConfigRow.task_id).in_(fenced))
            .order_by(TaskConfigRow.connector, TaskConfigRow.task_id)
            .with_for_update()
        )
    if gone:
        delete_assignments(s, gone)
    if moved:
        update_assignments(s, moved, generation)
    if placed:
        s.execute(
            insert(AssignmentRow).values(
                [
                    {"connector": w.connector, "task_id": task_id_of(w), "pool": p, "generation": generation}
                    for w, p in placed.items()
                ]
            )
        )
    if fenced:  # fence runs of the old assignment; one statement: the change counter is bumped once
        s.execute(
            update(TaskConfigRow)
            .where(tuple_(TaskConfigRow.connector, TaskConfigRow.task_id).in_(fenced))
            .values(generation=TaskConfigRow.generation + 1)
        )
    moves = [(w, previous[w], p) for w, p in moved.items()] + [(w, None, p) for w, p in placed.items()]
    log_rebalance(s, state, generation, strategy, why, moves, len(placed), len(gone))
    dequeue(s, done)
    return RebalanceResult(generation, len(moves), {**moved, **placed}, why, full=True)


def _full_reason(
    before: Mapping[str, int] | None,
    pools: Mapping[str, int],
    previous: Mapping[Work, str],
    new: Mapping[Work, str],
    placed: Mapping[Work, str],
    gone: Sequence[Work],
) -> str:
    """Lost and joined pools (of those that held or take work), new and gone work."""
    lost = sorted({p for p in previous.values() if p not in pools})
    used = set(previous.values())
    joined = sorted({p for p in new.values() if p not in used}) if used else []
    parts = [f"pool {p} lost" for p in lost] + [f"pool {p} joined" for p in joined]
    if placed:
        parts.append(f"{len(placed)} new connector/task item(s)")
    if gone:
        parts.append(f"{len(gone)} item(s) removed")
    if parts:
        return "; ".join(parts)
    return "load rebalanced" if before is not None else "first allocation"
