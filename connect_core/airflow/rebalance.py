"""The rebalance sensor: waits in the triggerer until pools or connectors change, then rebalances.

DAG `connect_rebalance` (continuous, one run at a time):

    wait_for_change (RebalanceSensor, deferrable) >> rebalance

The sensor checks once on a worker; if nothing would move, it defers to
`PoolChangeTrigger`, which probes every pool each `CONNECT_PROBE_INTERVAL`
seconds inside the triggerer (a probe that answers is the pool's heartbeat)
and fires as soon as a rebalance would change the assignment: a pool lost
(silent for `CONNECT_HEARTBEAT_TIMEOUT`, plus `CONNECT_REBALANCE_MAX_DELAY`
for `sticky`), a pool joined, a connector created, resized or deleted. The
`rebalance` task then writes generation + 1 and gives every Spark pool an
Airflow pool with its capacity as slots. Then the next run starts waiting.
While waiting, the trigger also cleans the topics (retention, compaction and
merging of small segments: `runtime.topics.cleaner`) and prunes the metadata's
history (finished task runs and rebalance log rows older than
`CONNECT_HISTORY_RETENTION_DAYS`) once an hour.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any, cast

from airflow.sdk import DAG, BaseSensorOperator, PokeReturnValue, task
from airflow.triggers.base import BaseTrigger, TriggerEvent
from sqlalchemy import Engine

from connect_core.runtime.airflow_client import AirflowClient
from connect_core.runtime.cluster.rebalancer import Rebalancer, sync_airflow_pools
from connect_core.runtime.settings import Settings
from connect_core.runtime.store.db import database_url, make_engine
from connect_core.runtime.store.retention import prune
from connect_core.runtime.topics.cleaner import clean_topics

__all__ = ["REBALANCE_DAG_ID", "PoolChangeTrigger", "RebalanceSensor", "rebalance_dag"]

REBALANCE_DAG_ID = "connect_rebalance"

log = logging.getLogger(__name__)


def _engine(settings: Settings) -> Engine:
    return make_engine(database_url(settings), pool_size=1, max_overflow=1)


def check_once(settings: Settings | None = None) -> str | None:
    """Probe the pools; why a rebalance is due, or None."""
    settings = settings or Settings()
    engine = _engine(settings)
    try:
        return Rebalancer.from_settings(engine, settings).check()
    finally:
        engine.dispose()


#: How often the waiting sensor prunes the metadata's history (`runtime.store.retention`).
PRUNE_EVERY = 3600.0


def _prune(engine: Engine, settings: Settings) -> None:
    try:
        # first the topics (retention, compaction, merging: bounded work per pass): it frees the runs
        # their segments held
        clean_topics(engine, settings.topic_retention_ms)
    except Exception as exc:  # retried next hour; the history is pruned all the same
        log.warning("cleaning the topics failed: %s", exc)
    try:
        prune(engine, settings.history_retention_days)
    except Exception as exc:  # a prune that fails is retried next hour; the sensor keeps watching
        log.warning("pruning the metadata's history failed: %s", exc)


class PoolChangeTrigger(BaseTrigger):
    """Probes the pools every `poll_interval` seconds; fires with the reason once a rebalance is due."""

    def __init__(self, poll_interval: float = 5.0) -> None:
        super().__init__()
        self.poll_interval = poll_interval

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return f"{__name__}.PoolChangeTrigger", {"poll_interval": self.poll_interval}

    async def run(self) -> AsyncIterator[TriggerEvent]:
        settings = Settings()
        engine = await asyncio.to_thread(_engine, settings)
        try:
            rebalancer = Rebalancer.from_settings(engine, settings)
            pruned_at = -PRUNE_EVERY
            while True:
                if time.monotonic() - pruned_at >= PRUNE_EVERY:
                    pruned_at = time.monotonic()
                    await asyncio.to_thread(_prune, engine, settings)
                reason = await asyncio.to_thread(rebalancer.check)
                if reason:
                    yield TriggerEvent({"reason": reason})
                    return
                await asyncio.sleep(self.poll_interval)
        finally:
            engine.dispose()


class RebalanceSensor(BaseSensorOperator):
    """Done when a rebalance is due (its XCom is the reason). Deferrable: waits in the triggerer."""

    ui_color = "#fdf2e8"

    def __init__(self, *, poll_interval: float | None = None, deferrable: bool = True, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.poll_interval = poll_interval
        self.deferrable = deferrable

    def poke(self, context: Any) -> PokeReturnValue:
        reason = check_once()
        return PokeReturnValue(is_done=reason is not None, xcom_value=reason)

    def execute(self, context: Any) -> Any:
        if not self.deferrable:
            return super().execute(context)
        reason = check_once()
        if reason is not None:
            return reason
        self.defer(
            trigger=PoolChangeTrigger(self.poll_interval or Settings().probe_interval),
            method_name="execute_complete",
            timeout=timedelta(seconds=self.timeout),
        )

    def execute_complete(self, context: Any, event: dict[str, Any]) -> str:
        return str(event["reason"])


def _rebalance(reason: str | None) -> dict[str, Any]:
    settings = Settings()
    engine = _engine(settings)
    try:
        rebalancer = Rebalancer.from_settings(engine, settings)
        result = rebalancer.rebalance(reason)
        warning = sync_airflow_pools(rebalancer.pools, AirflowClient.from_settings(settings))
    finally:
        engine.dispose()
    return {
        "generation": result.generation,
        "moved": result.moved,
        "reason": result.reason,
        "strategy": settings.rebalance_strategy,
        "airflow_pools": warning or "in sync",
    }


def rebalance_dag() -> DAG:
    with DAG(
        dag_id=REBALANCE_DAG_ID,
        schedule="@continuous",
        start_date=datetime(2024, 1, 1, tzinfo=UTC),
        catchup=False,
        max_active_runs=1,
        is_paused_upon_creation=False,
        tags=["connect", "rebalance"],
        doc_md=__doc__,
        default_args={"owner": "connect", "retries": 1, "retry_delay": timedelta(seconds=10)},
    ) as dag:
        # An hour without a change: the run ends (skipped) and the next one starts waiting.
        waited = RebalanceSensor(task_id="wait_for_change", timeout=3600, soft_fail=True)
        task(task_id="rebalance")(_rebalance)(cast(Any, waited.output))
    return dag
