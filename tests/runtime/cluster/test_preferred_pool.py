"""`pool.preferred`: an operator says which pool a connector's tasks run on. Its work goes there while
that pool is up (whatever the strategy), elsewhere while it is down, and back when it is up again; a
change of the key moves the running work (fenced); an unknown pool is a 400 naming the pools there are."""

from __future__ import annotations

from pathlib import Path

import pytest

from connect_core.runtime.cluster.allocation import Pool, Work, allocate
from connect_core.runtime.cluster.rebalancer import Rebalancer
from connect_core.runtime.context import Runtime
from connect_core.runtime.plugins import PluginRegistry
from connect_core.sdk import ConfigError

PLUGINS = Path(__file__).resolve().parents[3] / "examples" / "plugins"


def _pools_of(runtime: Runtime, connector: str) -> set[str]:
    return {pool for work, (pool, _gen) in runtime.pools.assignment().items() if work.connector == connector}


@pytest.mark.parametrize("strategy", ["default", "consistent-hash", "sticky"])
def test_every_strategy_gives_a_preferring_connector_its_pool(strategy: str) -> None:
    pools = [Pool("a", 4), Pool("b", 1)]
    tasks = {"x": [{}, {}, {}], "y": [{}, {}]}
    placed = allocate(strategy, pools, tasks, None, {"x": "b", "y": "gone"})  # `gone` is not up: no effect
    assert {placed[Work("x")], placed[Work("x", 0)], placed[Work("x", 1)], placed[Work("x", 2)]} == {"b"}
    assert set(placed) == {Work("x"), Work("y")} | {Work("x", t) for t in range(3)} | {Work("y", t) for t in range(2)}


def test_a_connector_runs_on_its_preferred_pool_while_it_is_up(runtime: Runtime) -> None:
    runtime.registry = PluginRegistry([PLUGINS])
    pools, timeout = runtime.pools, runtime.settings.heartbeat_timeout
    pools.add("big", "spark://127.0.0.1:7077", capacity=8)
    pools.add("small", "spark://127.0.0.1:7078", capacity=1)
    config = {"connector.class": "CounterSource", "topic": "counter", "tasks.max": 3}
    runtime.create_connector("other", {**config, "topic": "other"})
    runtime.create_connector("counter", {**config, "pool.preferred": "small"})
    assert _pools_of(runtime, "counter") == {"small"}  # placed there at create, capacity or not

    # The key changed: the running work moves at once (a full allocation; moved tasks are fenced).
    runtime.update_connector("counter", {**config, "pool.preferred": "big"})
    assert _pools_of(runtime, "counter") == {"big"}
    assert runtime.pools.history(1)[0]["reason"] == "a connector's preferred pool changed"

    # Its pool dies: the strategy places the work elsewhere; back up, the work comes back.
    with runtime.engine.begin() as conn:
        conn.exec_driver_sql(
            "UPDATE connect.spark_pools SET heartbeat_at = now() - interval '1 hour' WHERE name = 'big'"
        )
    rebalancer = Rebalancer(pools, "sticky", timeout, max_delay=0.0)
    rebalancer.rebalance()
    assert "big" not in _pools_of(runtime, "counter")
    pools.heartbeat("big")
    rebalancer.rebalance()
    assert _pools_of(runtime, "counter") == {"big"}

    with pytest.raises(ConfigError) as unknown:
        runtime.create_connector("typo", {**config, "topic": "typo", "pool.preferred": "bgi"})
    (problem,) = unknown.value.errors["pool.preferred"]
    assert "no Spark pool `bgi`" in problem and "big, local, small" in problem
    assert "typo" not in runtime.connectors.names()


def test_a_deleted_preferred_pool_does_not_block_other_changes(runtime: Runtime) -> None:
    """The pool a connector prefers is deleted: its other keys can still be changed (PATCH, PUT, apply
    of the same preference), while a new or changed preference must name a pool there is."""
    from connect_core.runtime.management import LocalManagement

    runtime.registry = PluginRegistry([PLUGINS])
    runtime.pools.add("east", "spark://127.0.0.1:7077", capacity=2)
    config = {"connector.class": "CounterSource", "topic": "counter", "pool.preferred": "east"}
    runtime.create_connector("counter", config)
    runtime.pools.remove("east")
    manage = LocalManagement(runtime)
    manage.patch_config("counter", {"tasks.max": 2})
    runtime.update_connector("counter", {**config, "tasks.max": 3})
    assert manage.apply("counter", {**config, "tasks.max": 1})["action"] == "updated"
    assert runtime.connectors.get("counter").config["pool.preferred"] == "east"
    with pytest.raises(ConfigError) as changed:
        manage.patch_config("counter", {"pool.preferred": "west"})
    assert "no Spark pool `west`" in changed.value.errors["pool.preferred"][0]
    runtime.pools.add("west", "spark://127.0.0.1:7078", capacity=2)  # just registered: not yet in the cached names
    manage.patch_config("counter", {"pool.preferred": "west"})
    assert _pools_of(runtime, "counter") == {"west"}


def test_the_field_name_spelling_is_refused(runtime: Runtime) -> None:
    """pydantic accepts a field's name as a key, but placement reads `pool.preferred`: `pool_preferred`
    would be a preference silently unused."""
    runtime.registry = PluginRegistry([PLUGINS])
    with pytest.raises(ConfigError) as refused:
        runtime.create_connector("c", {"connector.class": "CounterSource", "topic": "c", "pool_preferred": "local"})
    assert "write it `pool.preferred`" in refused.value.errors["pool_preferred"][0]
