"""What the rebalance sensor does, without Airflow: probe the pools, decide, rebalance.

`check()` probes every pool (a successful probe is its heartbeat) and asks the
pool store whether a rebalance is due: the live pools differ from those of the
last full allocation (a pool lost, joined or resized), work is unplaced (a
connector created or resized that no rebalance placed yet), or assignments
outlive their work. It returns the reason, or None; a few small queries,
whatever the number of connectors.
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from dataclasses import dataclass

from sqlalchemy import Engine, select

from connect_core.runtime.airflow_client import AIRFLOW_POOL_PREFIX, AirflowClient, airflow_pool_for
from connect_core.runtime.cluster.assignments import RebalanceResult
from connect_core.runtime.cluster.liveness import probe_all, probe_one
from connect_core.runtime.cluster.pools import PoolStore
from connect_core.runtime.settings import Settings
from connect_core.runtime.spark.conf_policy import SparkConfPolicy, check_master
from connect_core.runtime.spark.connect import public_master
from connect_core.runtime.store.models import TaskConfigRow
from connect_core.sdk.errors import NotFoundError, RetriableError

__all__ = ["Placement", "Rebalancer", "place", "sync_airflow_pools"]

log = logging.getLogger(__name__)


@dataclass
class Rebalancer:
    pools: PoolStore
    strategy: str
    heartbeat_timeout: float
    max_delay: float

    @classmethod
    def from_settings(cls, engine: Engine, settings: Settings) -> Rebalancer:
        return cls(
            PoolStore(engine, SparkConfPolicy.from_settings(settings)),
            settings.rebalance_strategy,
            settings.heartbeat_timeout,
            settings.rebalance_max_delay,
        )

    def check(self) -> str | None:
        """Probe the pools; the reason a rebalance is due, or None."""
        probe_all(self.pools, self.heartbeat_timeout)
        return self.pools.pending(self.strategy, self.heartbeat_timeout, self.max_delay)

    def rebalance(self, reason: str | None = None, connectors: Collection[str] | None = None) -> RebalanceResult:
        result = self.pools.rebalance(self.strategy, self.heartbeat_timeout, reason, self.max_delay, connectors)
        if result.moved:
            log.info("rebalance to generation %s (%s): %s item(s) moved", result.generation, reason, result.moved)
        return result


def sync_airflow_pools(pools: PoolStore, client: AirflowClient | None) -> str | None:
    """Give every Spark pool an Airflow pool with `capacity` slots and drop the ones of removed pools.

    Returns a warning when Airflow is not configured or not reachable (nothing else depends on it:
    the slots only keep Airflow from over-committing a cluster).
    """
    if client is None:
        return "Airflow is not configured (CONNECT_AIRFLOW_URL): Airflow pools not updated"
    try:
        existing = client.pools()
        wanted = {airflow_pool_for(p.name): p for p in pools.list(heartbeat_timeout=0)}
        for name, pool in wanted.items():
            if existing.get(name) != pool.capacity:
                client.put_pool(name, pool.capacity, f"Spark pool {pool.name} ({public_master(pool.master)})")
        for name in existing:
            if name.startswith(AIRFLOW_POOL_PREFIX) and name not in wanted:
                client.delete_pool(name)
    except RetriableError as exc:
        log.warning("Airflow pools not updated: %s", exc)
        return str(exc)
    return None


@dataclass(frozen=True)
class Placement:
    """Where a task runs now: its pool's master and Spark conf, as of a rebalance generation."""

    pool: str
    master: str
    conf: dict[str, str]
    generation: int


def place(engine: Engine, settings: Settings, connector: str, task_id: int) -> Placement:
    """The task's current pool; a task without an assignment (a new connector) triggers a rebalance."""
    pools = PoolStore(engine, SparkConfPolicy.from_settings(settings))
    at = pools.placement(connector, task_id)
    if at is None:
        # Only a task that exists is placed (a request naming task 7 of a 1-task connector must not
        # rebalance anything), and over what the pools say now, not over heartbeats gone stale.
        _check_task(engine, connector, task_id)
        probe_all(pools, settings.heartbeat_timeout)
        Rebalancer.from_settings(engine, settings).rebalance(connectors=[connector])
        at = pools.placement(connector, task_id)
        if at is None:
            raise RetriableError("no live Spark pool to run on: add one with `connect pools add`")
    info = pools.get(at[0], settings.heartbeat_timeout)
    if not info.up:  # a stale heartbeat or a failed probe: ask the pool itself before giving up
        probe_one(pools, info)
        info = pools.get(at[0], settings.heartbeat_timeout)
    if not info.up and not info.standby and _standby_up(pools, settings):
        # Its standby takes the work now (the sensor would at its next probe): the rebalance moves
        # it, fencing what still runs on the pool that went down.
        Rebalancer.from_settings(engine, settings).rebalance(f"pool {info.name} down: its standby takes the work")
        at = pools.placement(connector, task_id) or at
        info = pools.get(at[0], settings.heartbeat_timeout)
    if not info.alive:
        raise RetriableError(
            f"task `{connector}-{task_id}` is assigned to Spark pool `{info.name}`, which has not answered for "
            f"{info.seconds_since_heartbeat:.0f} s; the rebalance moves its work once it is "
            f"{settings.heartbeat_timeout + settings.rebalance_max_delay:.0f} s silent"
        )
    # A pool stored before today's rules: a master that is no spark-submit argument fails the run,
    # conf keys now refused are dropped (named in a warning); neither reaches the JVM.
    check_master(info.master, f"Spark pool `{info.name}`")
    conf = SparkConfPolicy.from_settings(settings).sanitized(info.conf, f"Spark pool `{info.name}`")
    return Placement(info.name, info.master, conf, at[1])


def _check_task(engine: Engine, connector: str, task_id: int) -> None:
    with engine.connect() as conn:
        found = conn.execute(
            select(TaskConfigRow.task_id).where(TaskConfigRow.connector == connector, TaskConfigRow.task_id == task_id)
        ).first()
    if found is None:
        raise NotFoundError(f"task `{connector}-{task_id}` not found")


def _standby_up(pools: PoolStore, settings: Settings) -> bool:
    return any(p.standby and p.up for p in pools.list(settings.heartbeat_timeout))
