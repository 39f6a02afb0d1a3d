"""Spark pools (the Connect workers), rebalancing, and RocketMQ Connect's cluster views."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from connect_core.runtime.airflow_client import AirflowClient
from connect_core.runtime.cluster.allocation import STRATEGIES
from connect_core.runtime.cluster.rebalancer import Rebalancer, sync_airflow_pools
from connect_core.runtime.management._room import Room
from connect_core.runtime.management.shapes import masked_pool
from connect_core.runtime.security import mask_config
from connect_core.sdk.errors import ConfigError, NotFoundError

__all__ = ["Cluster"]


class Cluster(Room):
    def pools(self) -> list[dict[str, Any]]:
        """Every pool with its health and the connectors and tasks assigned to it."""
        running = self.rt.pools.running()
        return [
            {**masked_pool(p.to_dict()), "running": running.get(p.name, [])}
            for p in self.rt.pools.list(self.rt.settings.heartbeat_timeout)
        ]

    def pool(self, name: str) -> dict[str, Any]:
        for p in self.pools():
            if p["name"] == name:
                return p
        raise NotFoundError(f"Spark pool `{name}` not found")

    def put_pool(self, name: str, spec: Mapping[str, Any]) -> tuple[bool, dict[str, Any]]:
        """Register or update a pool (and its Airflow pool's slots when Airflow is configured);
        returns (created, pool)."""
        pools = self.rt.pools
        created = name not in {p.name for p in pools.list(0)}
        pools.add(
            name,
            str(spec.get("master") or ""),
            capacity=int(spec.get("capacity", 1)),
            conf=spec.get("conf") or {},
            labels=spec.get("labels") or {},
            probe_url=spec.get("probe_url"),
        )
        sync_airflow_pools(pools, AirflowClient.from_settings(self.rt.settings))
        return created, self.pool(name)

    def delete_pool(self, name: str) -> None:
        self.rt.pools.remove(name)
        sync_airflow_pools(self.rt.pools, AirflowClient.from_settings(self.rt.settings))

    def pool_heartbeat(self, name: str) -> None:
        self.rt.pools.heartbeat(name)

    def rebalance(self, strategy: str | None = None) -> dict[str, Any]:
        """Rebalance now (the sensor does this on its own when pools or connectors change)."""
        settings = self.rt.settings
        strategy = strategy or settings.rebalance_strategy
        if strategy not in STRATEGIES:
            raise ConfigError(f"unknown strategy `{strategy}`", {"strategy": [f"one of {', '.join(STRATEGIES)}"]})
        rebalancer = Rebalancer(self.rt.pools, strategy, settings.heartbeat_timeout, settings.rebalance_max_delay)
        rebalancer.check()  # probe first: decide on fresh liveness
        result = rebalancer.rebalance()
        return {"generation": result.generation, "moved": result.moved, "reason": result.reason, "strategy": strategy}

    def rebalances(self, limit: int = 20) -> list[dict[str, Any]]:
        return self.rt.pools.history(limit)

    def cluster_info(self) -> list[dict[str, Any]]:
        """RocketMQ's workers: here the Spark pools, with health and what each runs."""
        return [
            {
                "workerId": p["name"],
                "sparkMaster": p["master"],
                "alive": p["alive"],
                "capacity": p["capacity"],
                "lastHeartbeatSeconds": p["seconds_since_heartbeat"],
                "probe": p["probe"],
                "allocated": p["running"],
            }
            for p in self.pools()
        ]

    def allocated_connectors(self, pool: str | None = None) -> dict[str, Any]:
        """Configs of the connectors assigned to `pool` (every pool when None), as RocketMQ's view."""
        names = {
            w.connector for w, (p, _) in self.rt.pools.assignment().items() if w.task is None and pool in (None, p)
        }
        return {
            name: mask_config({**info.config, "name": name})
            for name, info in self.rt.connectors.get_many(sorted(names)).items()
        }

    def allocated_tasks(self, pool: str | None = None) -> dict[str, Any]:
        """Configs of the tasks assigned to `pool` (every pool when None), by connector."""
        assigned = {(w.connector, w.task) for w, (p, _) in self.rt.pools.assignment().items() if pool in (None, p)}
        return {
            name: [mask_config(cfg) for i, cfg in enumerate(info.tasks) if (name, i) in assigned]
            for name, info in self.rt.connectors.get_many(sorted({c for c, _ in assigned})).items()
        }
