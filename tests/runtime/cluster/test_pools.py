"""Spark pools in the metadata store, and rebalancing with generations and fencing."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import func, select, text

from connect_core.runtime.cluster.allocation import Work
from connect_core.runtime.cluster.pools import PoolStore
from connect_core.runtime.cluster.runs import CommitRequest
from connect_core.runtime.context import Runtime
from connect_core.runtime.store.models import RebalanceLogRow
from connect_core.sdk import FencedError, SourcePosition
from connect_core.sdk.errors import ConfigError


@pytest.fixture
def pools(runtime: Runtime) -> PoolStore:
    return PoolStore(runtime.engine)


def _counters(runtime: Runtime, tmp_path: Path, n: int = 2, tasks: int = 2) -> None:
    from connect_core.runtime.plugins import PluginRegistry

    runtime.registry = PluginRegistry([Path(__file__).resolve().parents[3] / "examples" / "plugins"])
    for i in range(n):
        runtime.create_connector(f"c{i}", {"connector.class": "CounterSource", "topic": f"t{i}", "tasks.max": tasks})


def _expire(runtime: Runtime, pool: str) -> None:
    with runtime.engine.begin() as conn:
        conn.execute(
            text("UPDATE connect.spark_pools SET heartbeat_at = now() - interval '1 hour' WHERE name = :n"), {"n": pool}
        )


def test_a_local_pool_exists_out_of_the_box(pools: PoolStore) -> None:
    (local,) = pools.list(heartbeat_timeout=3600 * 24 * 365)
    assert (local.name, local.master, local.capacity) == ("local", "local[*]", 2)


def test_pool_names_and_capacity_are_checked(pools: PoolStore) -> None:
    with pytest.raises(ConfigError, match="invalid pool name"):
        pools.add("a b", "local[1]")
    with pytest.raises(ConfigError, match="capacity"):
        pools.add("a", "local[1]", capacity=0)


def test_rebalance_spreads_then_moves_only_lost_work(runtime: Runtime, pools: PoolStore, tmp_path: Path) -> None:
    pools.add("a", "spark://127.0.0.1:7077", capacity=2)
    pools.remove("local")
    _counters(runtime, tmp_path)  # 2 connectors + 4 tasks, placed as they are created
    first = pools.assignment()
    assert {p for p, _ in first.values()} == {"a"} and {g for _, g in first.values()} == {
        1,
        2,
    }  # each placed by its create

    pools.add("b", "spark://127.0.0.1:7078", capacity=2)
    assert pools.pending("sticky", heartbeat_timeout=60) == "pool b joined"
    second = pools.rebalance("sticky", heartbeat_timeout=60)
    assert second.generation == 3 and second.moved == 3 and second.full  # b takes its half of 6 items
    assert set(second.changes.values()) == {"b"}
    assert pools.rebalance("sticky", heartbeat_timeout=60, reason="no change").moved == 0
    assert pools.pending("sticky", heartbeat_timeout=60) is None

    _expire(runtime, "b")
    assert pools.pending("sticky", heartbeat_timeout=60, max_delay=7200) is None  # still in grace
    assert pools.pending("sticky", heartbeat_timeout=60) == "pool b lost"
    third = pools.rebalance("sticky", heartbeat_timeout=60)
    assert third.moved == 3 and {p for p, _ in pools.assignment().values()} == {"a"}
    with runtime.engine.connect() as conn:
        log = conn.execute(
            select(RebalanceLogRow.generation, RebalanceLogRow.reason).order_by(RebalanceLogRow.id)
        ).all()
    assert [tuple(r) for r in log] == [
        (1, "3 new connector/task item(s)"),
        (2, "3 new connector/task item(s)"),
        (3, "pool b joined"),
        (4, "pool b lost"),
    ]


def test_a_task_moved_off_its_pool_cannot_commit(runtime: Runtime, pools: PoolStore, tmp_path: Path) -> None:
    pools.add("a", "spark://127.0.0.1:7077")
    pools.add("b", "spark://127.0.0.1:7078")
    pools.remove("local")
    _counters(runtime, tmp_path, n=1, tasks=1)
    owner = pools.assignment()[Work("c0", 0)][0]
    lease = runtime.runs.acquire("c0", 0, lease_seconds=60)  # a run on the current owner
    _expire(runtime, owner)  # its pool dies mid-run
    result = pools.rebalance("sticky", heartbeat_timeout=60, reason=f"{owner} lost")
    assert result.changes[Work("c0", 0)] != owner
    with pytest.raises(FencedError):
        runtime.runs.commit(lease, CommitRequest(positions=[SourcePosition({"counter": 0}, {"next": 5})]))


def test_a_local_pool_needs_no_heartbeat(runtime: Runtime, pools: PoolStore, tmp_path: Path) -> None:
    _counters(runtime, tmp_path, n=1, tasks=1)
    _expire(runtime, "local")
    assert pools.list(heartbeat_timeout=60)[0].alive
    pools.rebalance("sticky", 60, reason="initial")
    assert {p for p, _ in pools.assignment().values()} == {"local"}


def test_a_run_moved_mid_run_is_fenced_and_leaves_nothing(
    runtime: Runtime, pools: PoolStore, tmp_path: Path, spark
) -> None:  # type: ignore[no-untyped-def]
    """The must-show fenced commit: superseded mid-run → FENCED, no segment, no files, position untouched."""
    from connect_core.runtime.execution.runner import TaskRunner
    from connect_core.runtime.store.models import TopicSegmentRow
    from tests.conftest import make_runner

    pools.add("a", "spark://127.0.0.1:7077")
    pools.add("b", "spark://127.0.0.1:7078")
    pools.remove("local")
    _counters(runtime, tmp_path, n=1, tasks=1)
    owner = pools.assignment()[Work("c0", 0)][0]
    other = ({"a", "b"} - {owner}).pop()

    def runner(pool: str, spark_factory) -> TaskRunner:  # type: ignore[no-untyped-def]
        return make_runner(runtime, spark, pool=pool, spark_factory=spark_factory)

    def owner_dies_once_the_run_started():  # type: ignore[no-untyped-def]
        _expire(runtime, owner)
        assert pools.rebalance("sticky", heartbeat_timeout=60).changes[Work("c0", 0)] == other
        return spark

    fenced = runner(owner, owner_dies_once_the_run_started).run("c0", 0)
    assert fenced.state == "FENCED", fenced.message
    with runtime.engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(TopicSegmentRow)).scalar() == 0
    assert runtime.connectors.positions("c0") == {}
    topic_dir = Path(runtime.settings.topics_base) / "t0"
    assert not any(topic_dir.rglob("*.parquet")), "the fenced run's staged files are gone"
    assert runtime.connectors.last_runs("c0", limit=1)[0]["state"] == "FENCED"

    # A run still started on the old pool is refused before it reads anything.
    refused = runner(owner, lambda: spark).run("c0", 0)
    assert refused.state == "FENCED" and f"assigned to pool `{other}`" in refused.message

    done = runner(other, lambda: spark).run("c0", 0)
    assert done.state == "SUCCEEDED" and done.rows == 10
    with runtime.engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(TopicSegmentRow)).scalar() == 1
