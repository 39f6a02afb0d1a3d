"""Spark pools (the Connect workers) and rebalancing tasks across them.

A pool is alive while it heartbeats within `heartbeat_timeout` (database time);
a `local[…]` pool is the machine the runner runs on, so it is always alive. A
*standby* pool gets work only while no other pool is up (alive and not failing its
probe): the allocation sees either the preferred pools or, when every one of them
is down, the standby ones (ADR 0008: the platform's warm pool before `local`).

`rebalance` is incremental, as Kafka's cooperative rebalancing (KIP-415): while
the live pools are those of the last full allocation, a create, resize or delete
touches only its own connector's rows (new work goes to the least loaded pools,
removed work's rows are deleted), at a cost independent of the cluster's size.
When the pools change, the strategy allocates everything again and only the rows
that change are written, under generation + 1 in one transaction, and the
fencing generation of every moved task is bumped, so a run still going on a lost
pool can finish but never commit. The log records what moved, not whole maps.
"""

from __future__ import annotations

import builtins
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from sqlalchemy import Engine, Select, delete, func, literal_column, select, text, tuple_, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session, sessionmaker

from connect_core.runtime.cluster.allocation import Pool, Work, allocate, least_loaded
from connect_core.runtime.cluster.conf_policy import SparkConfPolicy, check_master
from connect_core.runtime.cluster.spark_connect import ConnectUrl, is_connect_master, pool_kind, public_master
from connect_core.runtime.security.urls import mask_url_credentials
from connect_core.runtime.settings import Settings
from connect_core.runtime.store.db import CONFLICT, check_storable, store_fault
from connect_core.runtime.store.models import (
    AssignmentRow,
    ConnectorRow,
    PlacementQueueRow,
    RebalanceLogRow,
    RebalanceStateRow,
    SparkPoolRow,
    TaskConfigRow,
)
from connect_core.sdk.errors import ConfigError, NotFoundError

__all__ = ["PoolInfo", "PoolStore", "RebalanceResult", "check_pool_name", "public_probe"]

_POOL_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,100}$")
CONNECTOR_ITSELF = -1
_REBALANCE_ATTEMPTS = 3


def check_pool_name(name: str) -> None:
    """A ConfigError unless `name` is a pool name (it also names files: no path in it)."""
    if not _POOL_NAME.match(name) or name in (".", ".."):
        raise ConfigError(f"invalid pool name `{name}`: 1-100 letters, digits, '.', '_' or '-'")


@dataclass(frozen=True)
class PoolInfo:
    name: str
    master: str
    conf: dict[str, Any]
    capacity: int
    labels: dict[str, Any]
    alive: bool
    seconds_since_heartbeat: float
    probe_url: str | None = None
    probe: dict[str, Any] = field(default_factory=dict)
    #: gets work only while no other pool is up (ADR 0008)
    standby: bool = False

    @property
    def up(self) -> bool:
        """Alive and not failing its last probe: a preferred pool that keeps its standby idle."""
        return self.alive and self.probe.get("ok") is not False

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": pool_kind(self.master),
            "master": public_master(self.master),
            "capacity": self.capacity,
            "conf": self.conf,
            "labels": self.labels,
            "probe_url": mask_url_credentials(self.probe_url) if self.probe_url else None,
            "alive": self.alive,
            "seconds_since_heartbeat": round(self.seconds_since_heartbeat, 1),
            "probe": public_probe(self.probe),
            "standby": self.standby,
        }


def public_probe(probe: Mapping[str, Any]) -> dict[str, Any]:
    """What a probe saw, as it may be shown: credentials of the URLs in it masked."""
    return {k: mask_url_credentials(v) if isinstance(v, str) else v for k, v in probe.items()}


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


class PoolStore:
    def __init__(self, engine: Engine, conf_policy: SparkConfPolicy | None = None) -> None:
        """`conf_policy`: the Spark conf keys a pool may set (default: `CONNECT_POOL_CONF_ALLOWED_KEYS`'s)."""
        self._sessions = sessionmaker(engine, expire_on_commit=False)
        self._conf_policy = conf_policy

    @property
    def conf_policy(self) -> SparkConfPolicy:
        return self._conf_policy or SparkConfPolicy.from_settings(Settings())

    def add(
        self,
        name: str,
        master: str,
        *,
        capacity: int = 1,
        conf: Mapping[str, str] | None = None,
        labels: Mapping[str, str] | None = None,
        probe_url: str | None = None,
        standby: bool | None = None,
    ) -> None:
        """Register (or update) a pool; it counts as alive from now (a failed probe before is
        forgotten). `standby`: gets work only while no other pool is up (None: as it was, else no)."""
        check_storable({"master": master, "conf": dict(conf or {}), "labels": dict(labels or {})}, "pool")
        check_storable(probe_url or "", "pool probe URL")
        check_pool_name(name)
        if capacity < 1:
            raise ConfigError(f"pool `{name}`: capacity must be at least 1, not {capacity}")
        if not master.strip():
            raise ConfigError(
                f"pool `{name}`: master is required (local[n], spark://host:port, yarn, k8s://…, or a Spark "
                "Connect server sc://host:port)"
            )
        check_master(master, f"pool `{name}`")
        if is_connect_master(master):
            ConnectUrl.parse(master)  # a clear error for a malformed sc:// URL
        self.conf_policy.check({str(k): str(v) for k, v in (conf or {}).items()}, f"pool `{name}`")
        if probe_url is not None and (
            not probe_url.startswith(("http://", "https://")) or any(c.isspace() for c in probe_url)
        ):
            raise ConfigError(
                f"pool `{name}`: probe URL must be http(s)://… without blanks, not `{mask_url_credentials(probe_url)}`"
            )
        values = {
            "master": master,
            "capacity": capacity,
            "conf": {str(k): str(v) for k, v in (conf or {}).items()},
            "labels": dict(labels or {}),
            "probe_url": probe_url,
        }
        stmt = insert(SparkPoolRow).values(name=name, **values, standby=bool(standby))
        fresh = {"heartbeat_at": func.now(), "probe": {}, **({} if standby is None else {"standby": standby})}
        with self._sessions.begin() as s:
            s.execute(stmt.on_conflict_do_update(index_elements=["name"], set_={**values, **fresh}))

    def set_standby(self, name: str, standby: bool) -> None:
        """Make the pool a standby (work only while no other pool is up), or a preferred pool again."""
        with self._sessions.begin() as s:
            result = s.execute(update(SparkPoolRow).where(SparkPoolRow.name == name).values(standby=standby))
            if result.rowcount == 0:  # type: ignore[attr-defined]
                raise NotFoundError(f"Spark pool `{name}` not found")

    def remove(self, name: str) -> None:
        with self._sessions.begin() as s:
            if s.execute(delete(SparkPoolRow).where(SparkPoolRow.name == name)).rowcount == 0:  # type: ignore[attr-defined]
                raise NotFoundError(f"Spark pool `{name}` not found")

    def heartbeat(self, name: str) -> None:
        """A generic heartbeat (for pools nobody can probe, e.g. from a cron job next to YARN)."""
        with self._sessions.begin() as s:
            result = s.execute(update(SparkPoolRow).where(SparkPoolRow.name == name).values(heartbeat_at=func.now()))
            if result.rowcount == 0:  # type: ignore[attr-defined]
                raise NotFoundError(f"Spark pool `{name}` not found")

    def record_probe(self, name: str, ok: bool, detail: Mapping[str, Any]) -> None:
        """What a probe saw; a successful probe is a heartbeat."""
        values: dict[str, Any] = {"probe": {**public_probe(detail), "ok": ok}}  # display only: no credentials
        if ok:
            values["heartbeat_at"] = func.now()
        with self._sessions.begin() as s:
            s.execute(update(SparkPoolRow).where(SparkPoolRow.name == name).values(**values))

    def list(self, heartbeat_timeout: float) -> list[PoolInfo]:
        with self._sessions() as s:
            age = func.extract("epoch", func.now() - SparkPoolRow.heartbeat_at)
            rows = s.execute(select(SparkPoolRow, age).order_by(SparkPoolRow.name)).all()
        return [_info(r, float(a), heartbeat_timeout) for r, a in rows]

    def get(self, name: str, heartbeat_timeout: float) -> PoolInfo:
        for pool in self.list(heartbeat_timeout):
            if pool.name == name:
                return pool
        raise NotFoundError(f"Spark pool `{name}` not found")

    def assignment(self) -> dict[Work, tuple[str, int]]:
        """Current pool and generation of every connector and task."""
        with self._sessions() as s:
            rows = s.scalars(select(AssignmentRow)).all()
        return {_work(r.connector, r.task_id): (r.pool, r.generation) for r in rows}

    def running(self) -> dict[str, builtins.list[str]]:
        """What each pool runs: `connector` and `connector-task` names, in connector and task order."""
        by_pool: dict[str, builtins.list[str]] = {}
        for work, (pool, _generation) in sorted(
            self.assignment().items(), key=lambda kv: (kv[0].connector, -1 if kv[0].task is None else kv[0].task)
        ):
            by_pool.setdefault(pool, []).append(_key(work))
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
                return _incremental(s, state, strategy, pools, reason, connectors)
            return _full(s, state, strategy, pools, reason)

    def history(self, limit: int = 20) -> builtins.list[dict[str, Any]]:
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


def _pools_reason(before: Mapping[str, int] | None, now: Mapping[str, int]) -> str:
    if before is None:
        return "first allocation"
    parts = [f"pool {p} lost" for p in sorted(set(before) - set(now))]
    parts += [f"pool {p} joined" for p in sorted(set(now) - set(before))]
    parts += [f"pool {p} resized" for p in sorted(set(now) & set(before)) if now[p] != before[p]]
    return "; ".join(parts) or "strategy changed"


def _unplaced_connectors(names: Collection[str]) -> Select[str]:
    placed = select(AssignmentRow.connector).where(
        AssignmentRow.connector == ConnectorRow.name, AssignmentRow.task_id == CONNECTOR_ITSELF
    )
    query = select(ConnectorRow.name).where(~placed.exists())
    return query.where(ConnectorRow.name.in_(builtins.list(names)))


def _unplaced_tasks(names: Collection[str]) -> Select[str, int]:
    placed = select(AssignmentRow.connector).where(
        AssignmentRow.connector == TaskConfigRow.connector, AssignmentRow.task_id == TaskConfigRow.task_id
    )
    query = select(TaskConfigRow.connector, TaskConfigRow.task_id).where(~placed.exists())
    return query.where(TaskConfigRow.connector.in_(builtins.list(names)))


def _orphans(names: Collection[str]) -> Select[str, int, str]:
    """Assignments of tasks that are gone (a connector resized down; a deleted connector's rows go
    with it by the foreign key)."""
    exists = select(TaskConfigRow.connector).where(
        TaskConfigRow.connector == AssignmentRow.connector, TaskConfigRow.task_id == AssignmentRow.task_id
    )
    query = select(AssignmentRow.connector, AssignmentRow.task_id, AssignmentRow.pool).where(
        AssignmentRow.task_id != CONNECTOR_ITSELF, ~exists.exists()
    )
    return query.where(AssignmentRow.connector.in_(builtins.list(names)))


def _lock_connectors(s: Session, names: Collection[str] | None) -> set[str]:
    """Hold the connectors FOR KEY SHARE, in name order (every writer locks a connector row first):
    none can be deleted before its assignments are written, so their foreign key always holds.
    Config changes (FOR NO KEY UPDATE) do not wait. Returns those that exist."""
    query = select(ConnectorRow.name).order_by(ConnectorRow.name).with_for_update(read=True, key_share=True)
    if names is not None:
        query = query.where(ConnectorRow.name.in_(sorted(names)))
    return set(s.scalars(query))


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
    locked = _lock_connectors(s, connectors) if connectors else set()
    if not locked:
        _dequeue(s, set())  # those named and deleted meanwhile
        return RebalanceResult(state.generation, 0, {}, reason or "nothing to do")
    new = [Work(c) for c in sorted(s.scalars(_unplaced_connectors(locked)))]
    new += [Work(c, t) for c, t in sorted(s.execute(_unplaced_tasks(locked)))]
    gone = [(Work(c, t), p) for c, t, p in s.execute(_orphans(locked))]
    if not (gone or (new and pools)):
        _dequeue(s, locked if pools or not new else set())
        return RebalanceResult(state.generation, 0, {}, reason or "nothing to do")
    generation = state.generation + 1
    load = {p: n for p, n in s.execute(select(AssignmentRow.pool, func.count()).group_by(AssignmentRow.pool))}
    changes = least_loaded(new, pools, load)
    if gone:
        _delete_assignments(s, [w for w, _ in gone])
    if changes:
        s.execute(
            insert(AssignmentRow).values(
                [
                    {"connector": w.connector, "task_id": _task_id(w), "pool": p, "generation": generation}
                    for w, p in changes.items()
                ]
            )
        )
    why = reason or "; ".join(
        ([f"{len(changes)} new connector/task item(s)"] if changes else [])
        + ([f"{len(gone)} item(s) removed"] if gone else [])
    )
    _log(s, state, generation, strategy, why, [(w, None, p) for w, p in changes.items()], len(changes), len(gone))
    _dequeue(s, locked if pools or not new else set())  # without a live pool, new work stays queued
    return RebalanceResult(generation, len(changes), changes, why)


def _full(
    s: Session, state: RebalanceStateRow, strategy: str, pools: dict[str, int], reason: str | None
) -> RebalanceResult:
    """The strategy over every connector and task: what moves is fenced; only changed rows are written."""
    connectors = _lock_connectors(s, None)
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
        _work(c, t): p
        for c, t, p in s.execute(select(AssignmentRow.connector, AssignmentRow.task_id, AssignmentRow.pool))
    }
    new = allocate(strategy, [Pool(name, capacity) for name, capacity in pools.items()], tasks, previous)
    placed = {w: p for w, p in new.items() if w not in previous}
    moved = {w: p for w, p in new.items() if w in previous and previous[w] != p}
    gone = [w for w in previous if w not in new]
    why = reason or _full_reason(state.pools, pools, previous, new, placed, gone)
    state.pools, state.strategy = pools, strategy
    done = connectors if pools else set()  # placed (without a live pool, nothing is)
    if not (placed or moved or gone):
        _dequeue(s, done)
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
        _delete_assignments(s, gone)
    if moved:
        _update_assignments(s, moved, generation)
    if placed:
        s.execute(
            insert(AssignmentRow).values(
                [
                    {"connector": w.connector, "task_id": _task_id(w), "pool": p, "generation": generation}
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
    _log(s, state, generation, strategy, why, moves, len(placed), len(gone))
    _dequeue(s, done)
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


def _dequeue(s: Session, placed: Collection[str]) -> None:
    """The `placed` connectors, and those deleted meanwhile, leave the placement queue. Done after
    every lock the rebalance takes, so a writer's trigger waiting on a queue row never waits for a
    rebalance that waits for that writer. A connector created after the rebalance took its locks
    stays queued (its own create places it, or the sensor does)."""
    gone = ~select(ConnectorRow.name).where(ConnectorRow.name == PlacementQueueRow.connector).exists()
    s.execute(delete(PlacementQueueRow).where(PlacementQueueRow.connector.in_(sorted(placed)) | gone))


def _delete_assignments(s: Session, items: Sequence[Work]) -> None:
    s.execute(
        text(
            "DELETE FROM connect.assignments a USING unnest(CAST(:c AS text[]), CAST(:t AS int[])) AS g(c, t) "
            "WHERE a.connector = g.c AND a.task_id = g.t"
        ),
        {"c": [w.connector for w in items], "t": [_task_id(w) for w in items]},
    )


def _update_assignments(s: Session, moved: Mapping[Work, str], generation: int) -> None:
    s.execute(
        text(
            "UPDATE connect.assignments a SET pool = m.p, generation = :g "
            "FROM unnest(CAST(:c AS text[]), CAST(:t AS int[]), CAST(:p AS text[])) AS m(c, t, p) "
            "WHERE a.connector = m.c AND a.task_id = m.t"
        ),
        {
            "c": [w.connector for w in moved],
            "t": [_task_id(w) for w in moved],
            "p": list(moved.values()),
            "g": generation,
        },
    )


def _log(
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
            moves=[[_key(w), old, new] for w, old, new in moves],
            placed=placed,
            removed=removed,
        )
    )


def _info(r: SparkPoolRow, age: float, heartbeat_timeout: float) -> PoolInfo:
    return PoolInfo(
        r.name,
        r.master,
        r.conf,
        r.capacity,
        r.labels,
        _is_local(r.master) or age <= heartbeat_timeout,
        age,
        r.probe_url,
        r.probe,
        r.standby,
    )


def _is_local(master: str) -> bool:
    return master.startswith("local")


def _work(connector: str, task_id: int) -> Work:
    return Work(connector, None if task_id == CONNECTOR_ITSELF else task_id)


def _task_id(work: Work) -> int:
    return CONNECTOR_ITSELF if work.task is None else work.task


def _key(work: Work) -> str:
    return work.connector if work.task is None else f"{work.connector}-{work.task}"
