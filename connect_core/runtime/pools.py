"""Spark pools (the Connect workers) and rebalancing tasks across them.

A pool is alive while it heartbeats within `heartbeat_timeout` (database time);
a `local[…]` pool is the machine the runner runs on, so it is always alive.
`rebalance` runs an allocation strategy over the live pools and, if anything
moves, writes the new assignments under generation + 1 in one transaction and
bumps the fencing generation of every moved task, so a run still going on a
lost pool can finish but never commit.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from sqlalchemy import Engine, delete, func, select, text, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import sessionmaker

from connect_core.runtime.allocation import Pool, Work, allocate
from connect_core.runtime.models import AssignmentRow, RebalanceLogRow, SparkPoolRow, TaskConfigRow
from connect_core.sdk.errors import ConfigError, NotFoundError

__all__ = ["PoolInfo", "PoolStore", "RebalanceResult"]

_POOL_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,100}$")
CONNECTOR_ITSELF = -1


@dataclass(frozen=True)
class PoolInfo:
    name: str
    master: str
    conf: dict[str, Any]
    capacity: int
    labels: dict[str, Any]
    alive: bool
    seconds_since_heartbeat: float


@dataclass(frozen=True)
class RebalanceResult:
    generation: int
    moved: int
    assignment: dict[Work, str]


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
    ) -> None:
        """Register (or update) a pool; it counts as alive from now."""
        if not _POOL_NAME.match(name):
            raise ConfigError(f"invalid pool name `{name}`: 1-100 letters, digits, '.', '_' or '-'")
        if capacity < 1:
            raise ConfigError(f"pool `{name}`: capacity must be at least 1, not {capacity}")
        values = {"master": master, "capacity": capacity, "conf": dict(conf or {}), "labels": dict(labels or {})}
        stmt = insert(SparkPoolRow).values(name=name, **values)
        with self._sessions.begin() as s:
            s.execute(stmt.on_conflict_do_update(index_elements=["name"], set_={**values, "heartbeat_at": func.now()}))

    def remove(self, name: str) -> None:
        with self._sessions.begin() as s:
            if s.execute(delete(SparkPoolRow).where(SparkPoolRow.name == name)).rowcount == 0:  # type: ignore[attr-defined]
                raise NotFoundError(f"Spark pool `{name}` not found")

    def heartbeat(self, name: str) -> None:
        with self._sessions.begin() as s:
            s.execute(update(SparkPoolRow).where(SparkPoolRow.name == name).values(heartbeat_at=func.now()))

    def list(self, heartbeat_timeout: float) -> list[PoolInfo]:
        with self._sessions() as s:
            age = func.extract("epoch", func.now() - SparkPoolRow.heartbeat_at)
            rows = s.execute(select(SparkPoolRow, age).order_by(SparkPoolRow.name)).all()
        return [
            PoolInfo(
                r.name,
                r.master,
                r.conf,
                r.capacity,
                r.labels,
                _is_local(r.master) or float(a) <= heartbeat_timeout,
                float(a),
            )
            for r, a in rows
        ]

    def assignment(self) -> dict[Work, tuple[str, int]]:
        """Current pool and generation of every connector and task."""
        with self._sessions() as s:
            rows = s.scalars(select(AssignmentRow)).all()
        return {_work(r.connector, r.task_id): (r.pool, r.generation) for r in rows}

    def rebalance(self, strategy: str, heartbeat_timeout: float, reason: str) -> RebalanceResult:
        """Allocate every connector and task over the live pools; write it if anything moved."""
        with self._sessions.begin() as s:
            # One rebalance at a time, whoever runs it (sensors on several schedulers).
            s.execute(text("SELECT pg_advisory_xact_lock(hashtext('connect_core.rebalance'))"))
            cutoff = func.now() - timedelta(seconds=heartbeat_timeout)
            live = s.scalars(
                select(SparkPoolRow).where(
                    (SparkPoolRow.heartbeat_at >= cutoff) | SparkPoolRow.master.startswith("local")
                )
            ).all()
            tasks: dict[str, list[dict[str, Any]]] = {}
            for t in s.scalars(select(TaskConfigRow).order_by(TaskConfigRow.connector, TaskConfigRow.task_id)):
                tasks.setdefault(t.connector, []).append(t.config)
            previous_rows = s.scalars(select(AssignmentRow)).all()
            previous = {_work(r.connector, r.task_id): r.pool for r in previous_rows}
            generation = max((r.generation for r in previous_rows), default=0)
            new = allocate(strategy, [Pool(p.name, p.capacity) for p in live], tasks, previous)
            moved = [w for w in new if previous.get(w) != new[w]]
            gone = [w for w in previous if w not in new]
            if not moved and not gone:
                return RebalanceResult(generation, 0, new)
            generation += 1
            s.execute(delete(AssignmentRow))
            if new:
                s.execute(
                    insert(AssignmentRow).values(
                        [
                            {"connector": w.connector, "task_id": _task_id(w), "pool": p, "generation": generation}
                            for w, p in new.items()
                        ]
                    )
                )
            for w in moved:
                if w.task is not None:  # fence runs of the old assignment
                    s.execute(
                        update(TaskConfigRow)
                        .where(TaskConfigRow.connector == w.connector, TaskConfigRow.task_id == w.task)
                        .values(generation=TaskConfigRow.generation + 1)
                    )
            s.add(
                RebalanceLogRow(
                    generation=generation,
                    strategy=strategy,
                    reason=reason,
                    moved=len(moved),
                    old={_key(w): p for w, p in previous.items()},
                    new={_key(w): p for w, p in new.items()},
                )
            )
            return RebalanceResult(generation, len(moved), new)


def _is_local(master: str) -> bool:
    return master.startswith("local")


def _work(connector: str, task_id: int) -> Work:
    return Work(connector, None if task_id == CONNECTOR_ITSELF else task_id)


def _task_id(work: Work) -> int:
    return CONNECTOR_ITSELF if work.task is None else work.task


def _key(work: Work) -> str:
    return work.connector if work.task is None else f"{work.connector}-{work.task}"
