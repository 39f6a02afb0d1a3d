"""Spark pools (the Connect workers) and rebalancing tasks across them.

A pool is alive while it heartbeats within `heartbeat_timeout` (database time);
a `local[…]` pool is the machine the runner runs on, so it is always alive.
`rebalance` runs an allocation strategy over the live pools and, if anything
moves, writes the new assignments under generation + 1 in one transaction and
bumps the fencing generation of every moved task, so a run still going on a
lost pool can finish but never commit.
"""

from __future__ import annotations

import builtins
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from sqlalchemy import Engine, delete, func, select, text, tuple_, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session, sessionmaker

from connect_core.runtime.cluster.allocation import Pool, Work, allocate
from connect_core.runtime.cluster.spark_connect import ConnectUrl, is_connect_master, pool_kind, public_master
from connect_core.runtime.store.db import CONFLICT, check_storable, store_fault
from connect_core.runtime.store.models import AssignmentRow, ConnectorRow, RebalanceLogRow, SparkPoolRow, TaskConfigRow
from connect_core.sdk.errors import ConfigError, NotFoundError

__all__ = ["Plan", "PoolInfo", "PoolStore", "RebalanceResult", "check_pool_name"]

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

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": pool_kind(self.master),
            "master": public_master(self.master),
            "capacity": self.capacity,
            "conf": self.conf,
            "labels": self.labels,
            "probe_url": self.probe_url,
            "alive": self.alive,
            "seconds_since_heartbeat": round(self.seconds_since_heartbeat, 1),
            "probe": self.probe,
        }


@dataclass(frozen=True)
class Plan:
    """What a rebalance would do now, computed without writing anything."""

    generation: int
    previous: dict[Work, str]
    new: dict[Work, str]
    live: tuple[str, ...]

    @property
    def moved(self) -> list[Work]:
        return [w for w in self.new if self.previous.get(w) != self.new[w]]

    @property
    def gone(self) -> list[Work]:
        return [w for w in self.previous if w not in self.new]

    @property
    def changed(self) -> bool:
        return bool(self.moved or self.gone)

    def reason(self) -> str:
        """Why the assignment changes, for the rebalance log: lost and joined pools, new and gone work."""
        moved = self.moved
        lost = sorted({self.previous[w] for w in moved if w in self.previous and self.previous[w] not in self.live})
        used = set(self.previous.values())
        joined = sorted({p for p in self.new.values() if p not in used}) if used else []
        fresh = sum(1 for w in moved if w not in self.previous)
        parts = [f"pool {p} lost" for p in lost] + [f"pool {p} joined" for p in joined]
        if fresh:
            parts.append(f"{fresh} new connector/task item(s)")
        if self.gone:
            parts.append(f"{len(self.gone)} item(s) removed")
        return "; ".join(parts) or ("load rebalanced" if self.changed else "nothing to do")


@dataclass(frozen=True)
class RebalanceResult:
    generation: int
    moved: int
    assignment: dict[Work, str]
    reason: str = ""


class PoolStore:
    def __init__(self, engine: Engine) -> None:
        self._sessions = sessionmaker(engine, expire_on_commit=False)

    def add(
        self,
        name: str,
        master: str,
        *,
        capacity: int = 1,
        conf: Mapping[str, str] | None = None,
        labels: Mapping[str, str] | None = None,
        probe_url: str | None = None,
    ) -> None:
        """Register (or update) a pool; it counts as alive from now."""
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
        if is_connect_master(master):
            ConnectUrl.parse(master)  # a clear error for a malformed sc:// URL
        if probe_url is not None and not probe_url.startswith(("http://", "https://")):
            raise ConfigError(f"pool `{name}`: probe URL must be http(s)://…, not `{probe_url}`")
        values = {
            "master": master,
            "capacity": capacity,
            "conf": {str(k): str(v) for k, v in (conf or {}).items()},
            "labels": dict(labels or {}),
            "probe_url": probe_url,
        }
        stmt = insert(SparkPoolRow).values(name=name, **values)
        with self._sessions.begin() as s:
            s.execute(stmt.on_conflict_do_update(index_elements=["name"], set_={**values, "heartbeat_at": func.now()}))

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
        values: dict[str, Any] = {"probe": {**detail, "ok": ok}}
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

    def plan(self, strategy: str, heartbeat_timeout: float, max_delay: float = 0.0) -> Plan:
        """What `rebalance` would write now (nothing is written)."""
        with self._sessions() as s:
            return _plan(s, strategy, heartbeat_timeout, max_delay)

    def rebalance(
        self, strategy: str, heartbeat_timeout: float, reason: str | None = None, max_delay: float = 0.0
    ) -> RebalanceResult:
        """Allocate every connector and task over the live pools; write it if anything moved.

        With `sticky`, a pool silent for less than `heartbeat_timeout + max_delay`
        keeps its work (Kafka's `scheduled.rebalance.max.delay`): a pool that
        blips does not reshuffle anything.

        A rebalance that loses a lock wait (a long config change, a runner's commit) is run
        again: it recomputes its plan from scratch, so a retry is always safe, and the caller
        (a create that already committed) should not fail for it.
        """
        for attempt in range(1, _REBALANCE_ATTEMPTS + 1):
            try:
                return self._rebalance(strategy, heartbeat_timeout, reason, max_delay)
            except DBAPIError as exc:
                if store_fault(exc) != CONFLICT or attempt == _REBALANCE_ATTEMPTS:
                    raise
        raise AssertionError("unreachable")

    def _rebalance(
        self, strategy: str, heartbeat_timeout: float, reason: str | None, max_delay: float
    ) -> RebalanceResult:
        with self._sessions.begin() as s:
            # One rebalance at a time, whoever runs it (sensors on several schedulers).
            s.execute(text("SELECT pg_advisory_xact_lock(hashtext('connect_core.rebalance'))"))
            # The connectors to place, held FOR KEY SHARE (in name order, as every writer locks a
            # connector row first): none can be deleted before its assignments are written, so
            # their foreign key always holds. Config changes (FOR NO KEY UPDATE) do not wait.
            connectors = set(
                s.scalars(
                    select(ConnectorRow.name).order_by(ConnectorRow.name).with_for_update(read=True, key_share=True)
                )
            )
            plan = _plan(s, strategy, heartbeat_timeout, max_delay, connectors)
            why = reason or plan.reason()
            if not plan.changed:
                return RebalanceResult(plan.generation, 0, plan.new, why)
            generation = plan.generation + 1
            moved = plan.moved
            moved_tasks = sorted((w.connector, w.task) for w in moved if w.task is not None)
            if moved_tasks:  # their rows before any write: a runner locks a task row before the counter
                s.execute(
                    select(TaskConfigRow.task_id)
                    .where(tuple_(TaskConfigRow.connector, TaskConfigRow.task_id).in_(moved_tasks))
                    .order_by(TaskConfigRow.connector, TaskConfigRow.task_id)
                    .with_for_update()
                )
            s.execute(delete(AssignmentRow))
            if plan.new:
                s.execute(
                    insert(AssignmentRow).values(
                        [
                            {"connector": w.connector, "task_id": _task_id(w), "pool": p, "generation": generation}
                            for w, p in plan.new.items()
                        ]
                    )
                )
            if moved_tasks:  # fence runs of the old assignment; one statement: the counter is bumped once
                s.execute(
                    update(TaskConfigRow)
                    .where(tuple_(TaskConfigRow.connector, TaskConfigRow.task_id).in_(moved_tasks))
                    .values(generation=TaskConfigRow.generation + 1)
                )
            s.add(
                RebalanceLogRow(
                    generation=generation,
                    strategy=strategy,
                    reason=why,
                    moved=len(moved),
                    old={_key(w): p for w, p in plan.previous.items()},
                    new={_key(w): p for w, p in plan.new.items()},
                )
            )
            return RebalanceResult(generation, len(moved), plan.new, why)

    def history(self, limit: int = 20) -> builtins.list[dict[str, Any]]:
        """The latest rebalances, newest first."""
        with self._sessions() as s:
            rows = s.scalars(select(RebalanceLogRow).order_by(RebalanceLogRow.id.desc()).limit(limit)).all()
        return [
            {
                "generation": r.generation,
                "strategy": r.strategy,
                "reason": r.reason,
                "moved": r.moved,
                "at": r.created_at.isoformat(),
                "old": r.old,
                "new": r.new,
            }
            for r in rows
        ]


def _plan(
    s: Session, strategy: str, heartbeat_timeout: float, max_delay: float, connectors: set[str] | None = None
) -> Plan:
    """The allocation now; with `connectors`, of those connectors' work only (the ones a rebalance locked)."""
    grace = max_delay if strategy == "sticky" else 0.0
    cutoff = func.now() - timedelta(seconds=heartbeat_timeout + grace)
    live = s.scalars(
        select(SparkPoolRow)
        .where((SparkPoolRow.heartbeat_at >= cutoff) | SparkPoolRow.master.startswith("local"))
        .order_by(SparkPoolRow.name)
    ).all()
    tasks: dict[str, list[dict[str, Any]]] = {}
    for t in s.scalars(select(TaskConfigRow).order_by(TaskConfigRow.connector, TaskConfigRow.task_id)):
        if connectors is None or t.connector in connectors:
            tasks.setdefault(t.connector, []).append(t.config)
    previous_rows = s.scalars(select(AssignmentRow)).all()
    previous = {_work(r.connector, r.task_id): r.pool for r in previous_rows}
    generation = max((r.generation for r in previous_rows), default=0)
    new = allocate(strategy, [Pool(p.name, p.capacity) for p in live], tasks, previous)
    return Plan(generation, previous, new, tuple(p.name for p in live))


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
    )


def _is_local(master: str) -> bool:
    return master.startswith("local")


def _work(connector: str, task_id: int) -> Work:
    return Work(connector, None if task_id == CONNECTOR_ITSELF else task_id)


def _task_id(work: Work) -> int:
    return CONNECTOR_ITSELF if work.task is None else work.task


def _key(work: Work) -> str:
    return work.connector if work.task is None else f"{work.connector}-{work.task}"
