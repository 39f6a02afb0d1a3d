"""Standby pools (ADR 0008): `local` stands by for the platform's warm pool. It gets work only while
no preferred pool is up; a preferred pool failing its probe hands its work over at once (no
`sticky` grace), and gets it back with its first good probe; a task placed on a pool whose probe
failed is placed again on the standby when it starts, before the sensor's rebalance."""

from __future__ import annotations

import socket
from pathlib import Path

from connect_core.runtime.cluster.rebalancer import Rebalancer, place
from connect_core.runtime.context import Runtime
from connect_core.runtime.plugins import PluginRegistry

PLUGINS = Path(__file__).resolve().parents[3] / "examples" / "plugins"


def _dead_connect_url() -> str:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        return f"sc://127.0.0.1:{s.getsockname()[1]}/;token=t0ken"


def _pools_of(runtime: Runtime) -> set[str]:
    return {pool for pool, _generation in runtime.pools.assignment().values()}


def test_a_standby_pool_takes_the_work_only_while_the_preferred_pool_is_down(runtime: Runtime) -> None:
    runtime.registry = PluginRegistry([PLUGINS])
    pools, timeout = runtime.pools, runtime.settings.heartbeat_timeout
    pools.add("warm", _dead_connect_url(), capacity=2)
    pools.set_standby("local", True)
    assert {p.name: p.standby for p in pools.list(timeout)} == {"local": True, "warm": False}
    assert next(p for p in pools.list(timeout) if p.name == "local").to_dict()["standby"] is True
    runtime.create_connector("counter", {"connector.class": "CounterSource", "topic": "counter", "tasks.max": 3})
    assert _pools_of(runtime) == {"warm"}  # placed on the preferred pool only

    # Its probe fails: its work goes to the standby now, whatever `sticky`'s grace, and is fenced.
    pools.record_probe("warm", False, {"error": "no Spark Connect server answered"})
    rebalancer = Rebalancer(pools, "sticky", timeout, max_delay=600.0)
    assert rebalancer.pools.pending("sticky", timeout, 600.0) == "pool warm lost; pool local joined"
    moved = rebalancer.rebalance()
    assert moved.moved == 4 and moved.full and _pools_of(runtime) == {"local"}

    # Back (a good probe, or `connect pools start` registering it again): the work returns to it.
    pools.record_probe("warm", True, {})
    assert rebalancer.rebalance().moved == 4 and _pools_of(runtime) == {"warm"}

    # Without a standby, a pool failing its probe keeps its work for the grace, as before.
    pools.set_standby("local", False)
    pools.record_probe("warm", False, {"error": "down"})
    rebalancer.rebalance()
    assert _pools_of(runtime) == {"warm", "local"}  # `local` joined and takes its share; warm keeps the rest


def test_a_task_placed_on_a_pool_that_went_down_is_placed_on_the_standby_when_it_starts(runtime: Runtime) -> None:
    runtime.registry = PluginRegistry([PLUGINS])
    runtime.pools.add("warm", _dead_connect_url(), capacity=2)
    runtime.pools.set_standby("local", True)
    runtime.create_connector("counter", {"connector.class": "CounterSource", "topic": "counter", "tasks.max": 1})
    assert runtime.pools.placement("counter", 0) is not None
    assert runtime.pools.placement("counter", 0)[0] == "warm"  # type: ignore[index]
    # The sensor's probe saw it down, its rebalance has not run yet: the task's own start re-probes
    # the pool, finds it down and has the work moved.
    runtime.pools.record_probe("warm", False, {"error": "no Spark Connect server answered"})
    placement = place(runtime.engine, runtime.settings, "counter", 0)
    assert placement.pool == "local" and placement.master.startswith("local")
    assert runtime.pools.history(1)[0]["reason"] == "pool warm down: its standby takes the work"
    # Registered again (`connect pools start`): a failed probe before is forgotten.
    runtime.pools.add("warm", _dead_connect_url(), capacity=2)
    assert next(p for p in runtime.pools.list(60.0) if p.name == "warm").up
