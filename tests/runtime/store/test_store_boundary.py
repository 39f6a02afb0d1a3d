"""The stores refuse, naming the key, what Postgres cannot hold, whoever calls them (CLI, runner, REST)."""

from __future__ import annotations

import pytest

from connect_core.runtime.cluster.pools import PoolStore
from connect_core.runtime.context import Runtime
from connect_core.sdk.errors import ConfigError
from connect_core.sdk.records import SourcePosition


def test_the_connector_store_refuses_unstorable_names_and_values(runtime: Runtime) -> None:
    store = runtime.connectors
    with pytest.raises(ConfigError, match="connector name contains a NUL"):
        store.create("a\x00", connector_class="X", type="source", config={}, task_configs=[{}])
    with pytest.raises(ConfigError, match=r"config key `a.b\[0\]` contains a NUL"):
        store.create("a", connector_class="X", type="source", config={"a": {"b": ["\x00"]}}, task_configs=[{}])
    with pytest.raises(ConfigError, match="NaN or Infinity"):
        store.create("a", connector_class="X", type="source", config={"n": float("inf")}, task_configs=[{}])
    store.create("a", connector_class="X", type="source", config={}, task_configs=[{}])
    with pytest.raises(ConfigError, match="task config"):
        store.update_config("a", connector_class="X", type="source", config={}, task_configs=[{"t": "\x00"}])
    with pytest.raises(ConfigError, match="offsets"):
        store.alter_positions("a", set_=[SourcePosition({"f": "\x00"}, {"p": 1})], remove=[])
    assert store.get("a").config == {} and store.get("a").config_version == 1


def test_the_pool_store_refuses_unstorable_values(runtime: Runtime) -> None:
    pools = PoolStore(runtime.engine)
    with pytest.raises(ConfigError, match="pool key `master`"):
        pools.add("p", "local[1]\x00")
    with pytest.raises(ConfigError, match=r"pool key `conf.spark\\u0000x`"):
        pools.add("p", "local[1]", conf={"spark\x00x": "1"})
    assert [p.name for p in pools.list(30) if p.name == "p"] == []
