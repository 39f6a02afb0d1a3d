"""Allocation strategies: RocketMQ's published cases, and properties of all three."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from connect_core.runtime.cluster.allocation import STRATEGIES, Pool, Work, allocate, work_items

WORKERS = [Pool("workId1"), Pool("workId2"), Pool("workId3")]


def _owned(assignment: dict[Work, str], pool: str) -> tuple[set[str], dict[str, list[int]]]:
    connectors = {w.connector for w, p in assignment.items() if p == pool and w.task is None}
    tasks: dict[str, list[int]] = {}
    for w, p in sorted(assignment.items(), key=lambda kv: (kv[0].connector, kv[0].task or 0)):
        if p == pool and w.task is not None:
            tasks.setdefault(w.connector, []).append(w.task)
    return connectors, tasks


def test_default_matches_rocketmq_test() -> None:
    """DefaultAllocateConnAndTaskStrategyTest: 3 workers, connectors with 1, 2 and 3 (empty) tasks."""
    configs = {"connectorConfig1": [{}], "connectorConfig2": [{}, {}], "connectorConfig3": [{}, {}, {}]}
    result = allocate("default", WORKERS, configs)
    # Asserted upstream for workId3 (kv3 = task 1 of connectorConfig2, kv6 = task 2 of connectorConfig3).
    assert _owned(result, "workId3") == ({"connectorConfig3"}, {"connectorConfig2": [1], "connectorConfig3": [2]})
    # The rest of RocketMQ's round robin: one counter over connectors, then tasks.
    assert _owned(result, "workId1") == ({"connectorConfig1"}, {"connectorConfig1": [0], "connectorConfig3": [0]})
    assert _owned(result, "workId2") == ({"connectorConfig2"}, {"connectorConfig2": [0], "connectorConfig3": [1]})


def test_default_sorts_workers_whatever_their_order() -> None:
    configs = {"b": [{}], "a": [{}]}
    assert allocate("default", [Pool("w2"), Pool("w1")], configs) == allocate(
        "default", [Pool("w1"), Pool("w2")], configs
    )


def test_consistent_hash_matches_rocketmq_test() -> None:
    """AllocateConnAndTaskStrategyByConsistentHashTest's inputs (tasks carry `index` 0..5)."""
    configs = {
        "connectorConfig1": [{"index": 0}],
        "connectorConfig2": [{"index": 1}, {"index": 2}],
        "connectorConfig3": [{"index": 3}, {"index": 4}, {"index": 5}],
    }
    result = allocate("consistent-hash", WORKERS, configs)
    # RocketMQ's assertions: every connector and task exactly once (3 and 6).
    assert Counter(w.task is None for w in result) == {True: 3, False: 6}
    # The MD5 ring (3 virtual nodes per worker) computed from RocketMQ's algorithm.
    assert _owned(result, "workId1") == (set(), {"connectorConfig3": [1, 2]})
    assert _owned(result, "workId2") == ({"connectorConfig2", "connectorConfig3"}, {})
    assert _owned(result, "workId3") == (
        {"connectorConfig1"},
        {"connectorConfig1": [0], "connectorConfig2": [0, 1], "connectorConfig3": [0]},
    )


def test_unknown_strategy_is_named() -> None:
    with pytest.raises(ValueError, match="sticky"):
        allocate("random", WORKERS, {})


pools_st = st.lists(
    st.builds(Pool, st.sampled_from([f"p{i}" for i in range(6)]), st.integers(1, 4)),
    min_size=1,
    max_size=5,
    unique_by=lambda p: p.name,
)
configs_st = st.dictionaries(
    st.sampled_from([f"c{i}" for i in range(8)]), st.lists(st.just({}), min_size=0, max_size=5), max_size=6
)


@settings(max_examples=200, deadline=None)
@given(pools=pools_st, configs=configs_st, strategy=st.sampled_from(sorted(STRATEGIES)))
def test_every_item_assigned_exactly_once_to_a_live_pool(pools: list[Pool], configs: dict, strategy: str) -> None:  # type: ignore[type-arg]
    result = allocate(strategy, pools, configs)
    assert sorted(result, key=repr) == sorted(work_items(configs), key=repr)
    assert set(result.values()) <= {p.name for p in pools}


@settings(max_examples=200, deadline=None)
@given(pools=pools_st, configs=configs_st)
def test_sticky_respects_capacity_shares(pools: list[Pool], configs: dict) -> None:  # type: ignore[type-arg]
    result = allocate("sticky", pools, configs)
    load = Counter(result.values())
    total, capacity = len(result), sum(p.capacity for p in pools)
    for pool in pools:
        assert load[pool.name] <= -(-total * pool.capacity // capacity)  # ceil of its share


@settings(max_examples=200, deadline=None)
@given(pools=pools_st, configs=configs_st)
def test_sticky_moves_nothing_when_nothing_changed(pools: list[Pool], configs: dict) -> None:  # type: ignore[type-arg]
    first = allocate("sticky", pools, configs)
    assert allocate("sticky", pools, configs, first) == first


@settings(max_examples=200, deadline=None)
@given(pools=pools_st, configs=configs_st, data=st.data())
def test_sticky_moves_only_work_of_a_lost_pool(pools: list[Pool], configs: dict, data: st.DataObject) -> None:  # type: ignore[type-arg]
    if len(pools) < 2:
        return
    first = allocate("sticky", pools, configs)
    lost = data.draw(st.sampled_from(pools))
    survivors = [p for p in pools if p != lost]
    second = allocate("sticky", survivors, configs, first)
    moved = {w for w in first if first[w] != second[w]}
    assert moved == {w for w, p in first.items() if p == lost.name}


def test_sticky_new_pool_takes_its_share_and_no_more() -> None:
    configs = {f"c{i}": [{}, {}, {}] for i in range(4)}  # 16 items
    before = allocate("sticky", [Pool("a")], configs)
    after = allocate("sticky", [Pool("a"), Pool("b")], configs, before)
    moved = [w for w in before if before[w] != after[w]]
    assert len(moved) == 8 and all(after[w] == "b" for w in moved)
