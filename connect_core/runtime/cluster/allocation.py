"""Allocation strategies: which Spark pool runs which connector and task.

Pure functions over plain data, so they are tested exhaustively and the
rebalance sensor only decides *when* to call them.

* `default`: RocketMQ Connect's `DefaultAllocateConnAndTaskStrategy`: pools
  sorted by name; connectors (sorted by name) first, then every connector's
  tasks in order, one running counter, round robin.
* `consistent-hash`: RocketMQ's `AllocateConnAndTaskStrategyByConsistentHash`:
  an MD5 ring (first 4 digest bytes, big-endian) with `virtual_nodes` per pool
  (0: as many as there are pools); a connector is routed by its name, a task by
  its config's RocketMQ string form.
* `sticky` (default for new installs): keeps every item where it is while its
  pool is alive, gives lost and new items to the least-loaded pools by capacity,
  and moves only what a new pool should take to reach its share, like Kafka's
  incremental cooperative assignor.

See docs/research/rocketmq-allocation.md for RocketMQ's algorithms and tests.
"""

from __future__ import annotations

import bisect
import hashlib
import heapq
import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "PREFERRED_POOL_KEY",
    "STRATEGIES",
    "Pool",
    "Work",
    "allocate",
    "consistent_hash",
    "default",
    "least_loaded",
    "pinned_connectors",
    "sticky",
    "work_items",
]


@dataclass(frozen=True)
class Work:
    """A unit of allocation: a connector (`task` None) or one of its tasks."""

    connector: str
    task: int | None = None


@dataclass(frozen=True)
class Pool:
    name: str
    capacity: int = 1


Assignment = dict[Work, str]
#: The connector config key naming the Spark pool its work runs on while that pool is up.
PREFERRED_POOL_KEY = "pool.preferred"
TaskConfigs = Mapping[str, Sequence[Mapping[str, Any]]]


def work_items(task_configs: TaskConfigs) -> list[Work]:
    """Connectors first (by name), then each connector's tasks in order: RocketMQ's order."""
    names = sorted(task_configs)
    return [Work(n) for n in names] + [Work(n, i) for n in names for i in range(len(task_configs[n]))]


def default(pools: Sequence[Pool], task_configs: TaskConfigs, previous: Assignment | None = None) -> Assignment:
    names = sorted(p.name for p in pools)
    if not names:
        return {}
    return {item: names[i % len(names)] for i, item in enumerate(work_items(task_configs))}


def _md5(key: str) -> int:
    return int.from_bytes(hashlib.md5(key.encode()).digest()[:4], "big")


def rocketmq_task_key(config: Mapping[str, Any]) -> str:
    """`ConnectKeyValue.toString()` of a task config (entry order as given; Java's differs for 2+ keys)."""
    return "ConnectKeyValue{properties={" + ", ".join(f"{k}={v}" for k, v in config.items()) + "}}"


def consistent_hash(
    pools: Sequence[Pool], task_configs: TaskConfigs, previous: Assignment | None = None, virtual_nodes: int = 0
) -> Assignment:
    if not pools:
        return {}
    per_pool = virtual_nodes or len(pools)
    ring: dict[int, str] = {}
    for pool in pools:  # in the given order; a colliding hash overwrites, as in RocketMQ
        for i in range(per_pool):
            ring[_md5(f"{pool.name}-{i}")] = pool.name
    keys = sorted(ring)

    def route(key: str) -> str:
        at = bisect.bisect_left(keys, _md5(key))
        return ring[keys[at % len(keys)]]

    result: Assignment = {}
    for item in work_items(task_configs):
        key = item.connector if item.task is None else rocketmq_task_key(task_configs[item.connector][item.task])
        result[item] = route(key)
    return result


def sticky(pools: Sequence[Pool], task_configs: TaskConfigs, previous: Assignment | None = None) -> Assignment:
    """Least movement: only lost, new, and over-share items move, towards capacity-weighted shares."""
    if not pools:
        return {}
    capacity = {p.name: max(1, p.capacity) for p in pools}
    items = work_items(task_configs)
    total_capacity = sum(capacity.values())
    share = {name: len(items) * cap / total_capacity for name, cap in capacity.items()}
    limit = {name: math.ceil(s) for name, s in share.items()}
    result: Assignment = {}
    load = dict.fromkeys(capacity, 0)
    homeless: list[Work] = []
    for item in items:  # keep what may stay
        pool = (previous or {}).get(item)
        if pool in capacity and load[pool] < limit[pool]:
            result[item] = pool
            load[pool] += 1
        else:
            homeless.append(item)
    # A new (or under-loaded) pool takes from pools above their share, newest items first.
    held: dict[str, list[Work]] = {name: [] for name in capacity}  # each pool's items, newest last
    for item, pool in result.items():
        held[pool].append(item)
    for items_of_pool in held.values():
        items_of_pool.sort(key=_newest)
    for pool in sorted(capacity, key=lambda n: (load[n] / capacity[n], n)):
        while load[pool] < math.floor(share[pool]):
            donor = max(capacity, key=lambda n: (load[n] - share[n], n))
            if load[donor] - share[donor] < 1:
                break
            moved = held[donor].pop()
            result[moved] = pool
            load[donor] -= 1
            load[pool] += 1
    result.update(least_loaded(homeless, capacity, load))
    return result


def least_loaded(items: Sequence[Work], capacity: Mapping[str, int], load: Mapping[str, int]) -> Assignment:
    """Each item to the pool least loaded by capacity (ties: by name), one at a time, counting what
    it placed: a heap, O(n log pools). `capacity` and `load` by pool name; no pools, no placement."""
    placed: Assignment = {}
    current = {n: load.get(n, 0) for n in capacity}
    by_load = [(current[n] / max(1, capacity[n]), n) for n in capacity]
    heapq.heapify(by_load)
    for item in items if by_load else ():
        _, pool = heapq.heappop(by_load)
        placed[item] = pool
        current[pool] += 1
        heapq.heappush(by_load, (current[pool] / max(1, capacity[pool]), pool))
    return placed


def _newest(item: Work) -> tuple[bool, str, int]:
    """Order of `work_items`: the last items (tasks, by connector and number) move first."""
    return (item.task is not None, item.connector, -1 if item.task is None else item.task)


STRATEGIES = {"default": default, "consistent-hash": consistent_hash, "sticky": sticky}


def allocate(
    strategy: str,
    pools: Sequence[Pool],
    task_configs: TaskConfigs,
    previous: Assignment | None = None,
    preferred: Mapping[str, str] | None = None,
) -> Assignment:
    """The strategy's assignment, except that the work of a connector whose preferred pool
    (`pool.preferred`, in `preferred` by connector) is among `pools` goes to that pool, all of it."""
    try:
        fn = STRATEGIES[strategy]
    except KeyError:
        raise ValueError(f"unknown allocation strategy `{strategy}`: use one of {', '.join(STRATEGIES)}") from None
    pinned = pinned_connectors(pools, task_configs, preferred)
    rest = {name: tasks for name, tasks in task_configs.items() if name not in pinned}
    result = fn(pools, rest, previous)
    for item in work_items({name: task_configs[name] for name in pinned}):
        result[item] = pinned[item.connector]
    return result


def pinned_connectors(
    pools: Sequence[Pool] | Mapping[str, int], connectors: Collection[str], preferred: Mapping[str, str] | None
) -> dict[str, str]:
    """connector → its preferred pool, for the connectors of `connectors` whose preferred pool is up."""
    up = {p.name for p in pools} if isinstance(pools, Sequence) else set(pools)
    return {c: p for c, p in (preferred or {}).items() if c in connectors and p in up}
