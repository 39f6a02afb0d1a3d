"""Incremental rebalance (issue 19): a create, resize or delete touches only its own rows; a pool
change reallocates and writes only what moves; concurrent creates and a pool death stay consistent."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from sqlalchemy import select, text

from connect_core.runtime.cluster.allocation import Work
from connect_core.runtime.cluster.pools import PoolStore
from connect_core.runtime.context import Runtime
from connect_core.runtime.plugins import PluginRegistry
from connect_core.runtime.store.models import RebalanceLogRow, RebalanceStateRow, TaskConfigRow

PLUGINS = Path(__file__).resolve().parents[3] / "examples" / "plugins"


def _counter(runtime: Runtime, name: str, tasks: int = 2) -> None:
    runtime.create_connector(name, {"connector.class": "CounterSource", "topic": name, "tasks.max": tasks})


def _setup(runtime: Runtime, pools: list[str]) -> PoolStore:
    runtime.registry = PluginRegistry([PLUGINS])
    store = runtime.pools
    for i, name in enumerate(pools):
        store.add(name, f"spark://127.0.0.1:{7077 + i}", capacity=2)
    store.remove("local")
    return store


def _task_generations(runtime: Runtime) -> dict[tuple[str, int], int]:
    with runtime.engine.connect() as conn:
        rows = conn.execute(select(TaskConfigRow.connector, TaskConfigRow.task_id, TaskConfigRow.generation))
        return {(c, t): g for c, t, g in rows}


def _expire(runtime: Runtime, pool: str) -> None:
    with runtime.engine.begin() as conn:
        conn.execute(
            text("UPDATE connect.spark_pools SET heartbeat_at = now() - interval '1 hour' WHERE name = :n"), {"n": pool}
        )


def _writes(runtime: Runtime, action: Any) -> list[str]:
    """The SQL statements `action` sends that change assignments."""
    from sqlalchemy import event

    seen: list[str] = []

    def record(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if "assignments" in statement and statement.lstrip().upper().startswith(("INSERT", "UPDATE", "DELETE")):
            seen.append(statement)

    event.listen(runtime.engine, "before_cursor_execute", record)
    try:
        action()
    finally:
        event.remove(runtime.engine, "before_cursor_execute", record)
    return seen


def test_a_create_places_only_its_own_work_and_fences_nothing(runtime: Runtime) -> None:
    pools = _setup(runtime, ["a", "b", "c"])
    for i in range(6):
        _counter(runtime, f"c{i}", tasks=3)
    before, generations = pools.assignment(), _task_generations(runtime)

    writes = _writes(runtime, lambda: _counter(runtime, "new", tasks=3))

    after = pools.assignment()
    assert {w: v for w, v in after.items() if w.connector != "new"} == before  # pool and generation kept
    assert _task_generations(runtime) == {**generations, **{("new", t): 0 for t in range(3)}}  # nothing fenced
    assert {w for w in after if w.connector == "new"} == {Work("new"), *(Work("new", t) for t in range(3))}
    assert len(writes) == 1 and writes[0].lstrip().upper().startswith("INSERT")  # one insert of 4 rows
    (latest, *_) = pools.history(1)
    assert latest["placed"] == latest["moved"] == 4 and latest["removed"] == 0
    assert {m["item"] for m in latest["moves"]} == {"new", "new-0", "new-1", "new-2"}
    assert {m["from"] for m in latest["moves"]} == {None}
    # new work goes to the least loaded pools: 28 items over 3 equal pools
    loads = [sum(1 for p, _ in after.values() if p == name) for name in ("a", "b", "c")]
    assert max(loads) - min(loads) <= 1, loads


def test_a_resize_down_removes_only_its_rows_and_a_delete_leaves_the_rest(runtime: Runtime) -> None:
    pools = _setup(runtime, ["a", "b"])
    _counter(runtime, "x", tasks=4)
    _counter(runtime, "y", tasks=2)
    y_rows = {w: v for w, v in pools.assignment().items() if w.connector == "y"}
    runtime.update_connector("x", {"connector.class": "CounterSource", "topic": "x", "tasks.max": 1})
    assert {w for w in pools.assignment() if w.connector == "x"} == {Work("x"), Work("x", 0)}
    (latest, *_) = pools.history(1)
    assert latest["removed"] == 3 and "3 item(s) removed" in latest["reason"]
    runtime.connectors.delete("x")
    assert {w: v for w, v in pools.assignment().items()} == y_rows
    assert pools.pending("sticky", heartbeat_timeout=60) is None


def test_the_sensor_finds_and_places_work_no_create_placed(runtime: Runtime) -> None:
    pools = _setup(runtime, ["a"])
    _counter(runtime, "placed", tasks=1)
    # stored without placing (as a create whose rebalance was cut off by a crash)
    runtime.connectors.create(
        "orphan", connector_class="CounterSource", type="source", config={"topic": "o"}, task_configs=[{}, {}]
    )
    assert pools.pending("sticky", heartbeat_timeout=60) == "connectors created, resized or deleted"
    result = pools.rebalance("sticky", heartbeat_timeout=60)
    assert not result.full and set(result.changes) == {Work("orphan"), Work("orphan", 0), Work("orphan", 1)}
    assert pools.pending("sticky", heartbeat_timeout=60) is None


def test_a_pool_death_moves_only_its_work_and_fences_only_that(runtime: Runtime) -> None:
    pools = _setup(runtime, ["a", "b", "c"])
    for i in range(5):
        _counter(runtime, f"c{i}", tasks=3)
    before, generations = pools.assignment(), _task_generations(runtime)
    _expire(runtime, "b")
    result = pools.rebalance("sticky", heartbeat_timeout=60)
    assert result.full and result.reason == "pool b lost"
    after = pools.assignment()
    lost = {w for w, (p, _) in before.items() if p == "b"}
    assert set(result.changes) == lost and {p for p, _ in after.values()} == {"a", "c"}
    assert {w: v for w, v in after.items() if w not in lost} == {w: v for w, v in before.items() if w not in lost}
    fenced = {k for k, g in _task_generations(runtime).items() if g != generations[k]}
    assert fenced == {(w.connector, w.task) for w in lost if w.task is not None}


def test_concurrent_creates_and_a_pool_death_stay_consistent(runtime: Runtime, settings: Any) -> None:
    pools = _setup(runtime, ["a", "b", "c"])
    for i in range(3):
        _counter(runtime, f"seed{i}", tasks=2)
    errors: list[BaseException] = []

    def create(k: int) -> None:
        rt = Runtime.open(settings, upgrade=False)
        rt.registry = runtime.registry
        try:
            for i in range(5):
                _counter(rt, f"w{k}-{i}", tasks=2)
        except BaseException as exc:
            errors.append(exc)
        finally:
            rt.close()

    def kill_b() -> None:
        try:
            _expire(runtime, "b")
            pools.rebalance("sticky", heartbeat_timeout=60)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=create, args=(k,)) for k in range(3)] + [threading.Thread(target=kill_b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    pools.rebalance("sticky", heartbeat_timeout=60)  # the sensor's next pass, if one is due

    assignment = pools.assignment()
    expected = {Work(c) for c in runtime.connectors.names()} | {
        Work(c, t) for c in runtime.connectors.names() for t in range(2)
    }
    assert set(assignment) == expected  # every connector and task placed exactly once (primary key)
    assert {p for p, _ in assignment.values()} <= {"a", "c"}  # none left on the dead pool
    with runtime.engine.connect() as conn:
        logged = list(conn.scalars(select(RebalanceLogRow.generation).order_by(RebalanceLogRow.id)))
        state = conn.scalar(select(RebalanceStateRow.generation))
    assert logged == sorted(set(logged)) and logged[-1] == state  # strictly increasing, the counter is the last
    assert max(g for _, g in assignment.values()) <= state
    assert pools.pending("sticky", heartbeat_timeout=60) is None
