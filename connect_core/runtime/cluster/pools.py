"""Spark pools (the Connect workers): registered, heartbeating, probed and listed.

A pool is alive while it heartbeats within `heartbeat_timeout` (database time);
a `local[…]` pool is the machine the runner runs on, so it is always alive. A
*standby* pool gets work only while no other pool is up (ADR 0008). Which pool
runs what, and the rebalance that decides it, are `assignments`; `PoolStore`
serves both, so a caller holds one store of the cluster.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Engine, delete, func, select, update
from sqlalchemy.dialects.postgresql import insert

from connect_core.runtime.cluster.assignments import AssignmentStore
from connect_core.runtime.security.urls import mask_url_credentials
from connect_core.runtime.settings import Settings
from connect_core.runtime.spark.conf_policy import SparkConfPolicy, check_master
from connect_core.runtime.spark.connect import ConnectUrl, is_connect_master, pool_kind, public_master
from connect_core.runtime.store.db import check_storable
from connect_core.runtime.store.models import SparkPoolRow
from connect_core.sdk.errors import ConfigError, NotFoundError

__all__ = ["WORKER_PATHS_LABEL", "PoolInfo", "PoolStore", "check_pool_name", "public_probe"]

#: The label a pool's worker records its `file.allowed.paths` under (comma-separated, resolved), so a
#: create elsewhere checks paths against where the tasks run (`connect airflow up` sets it).
WORKER_PATHS_LABEL = "file.allowed.paths"

_POOL_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,100}$")


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


class PoolStore(AssignmentStore):
    def __init__(self, engine: Engine, conf_policy: SparkConfPolicy | None = None) -> None:
        """`conf_policy`: the Spark conf keys a pool may set (default: `CONNECT_POOL_CONF_ALLOWED_KEYS`'s)."""
        super().__init__(engine)
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
        # A re-registration (a PUT of the pool) keeps the directories its running worker recorded
        # (`WORKER_PATHS_LABEL`, set by the worker's side, not by whoever edits the pool) unless it names them.
        kept = func.jsonb_strip_nulls(
            func.jsonb_build_object(WORKER_PATHS_LABEL, SparkPoolRow.labels[WORKER_PATHS_LABEL])
        )
        merged = kept.op("||")(stmt.excluded.labels)
        with self._sessions.begin() as s:
            s.execute(stmt.on_conflict_do_update(index_elements=["name"], set_={**values, **fresh, "labels": merged}))

    def set_standby(self, name: str, standby: bool) -> None:
        """Make the pool a standby (work only while no other pool is up), or a preferred pool again."""
        with self._sessions.begin() as s:
            result = s.execute(update(SparkPoolRow).where(SparkPoolRow.name == name).values(standby=standby))
            if result.rowcount == 0:  # type: ignore[attr-defined]
                raise NotFoundError(f"Spark pool `{name}` not found")

    def set_label(self, name: str, key: str, value: str | None) -> None:
        """Set one label of a pool (None: remove it); a pool that is not registered is left so."""
        with self._sessions.begin() as s:
            row = s.get(SparkPoolRow, name, with_for_update=True)
            if row is None:
                return
            labels = {k: v for k, v in (row.labels or {}).items() if k != key}
            row.labels = labels if value is None else {**labels, key: value}

    def worker_paths(self, heartbeat_timeout: float) -> dict[str, list[str]]:
        """pool → the directories its worker lets file connectors use, for the live pools that recorded
        them: a pool silent past `heartbeat_timeout` gets no work, so its label (maybe left by a
        worker long gone) must not refuse creates."""
        age = func.extract("epoch", func.now() - SparkPoolRow.heartbeat_at)
        with self._sessions() as s:
            rows = s.execute(
                select(SparkPoolRow.name, SparkPoolRow.master, age, SparkPoolRow.labels[WORKER_PATHS_LABEL].astext)
            ).all()
        return {
            name: [d for d in value.split(",") if d]
            for name, master, seconds, value in rows
            if value is not None
            and (_is_local(master) or (seconds is not None and float(seconds) <= heartbeat_timeout))
        }

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
