"""Compile every registered connector into an Airflow DAG `connect__<name>`.

One metadata query per parse (every connector with its task count); when
Airflow runs a task it sets the parsing context, and only that connector's
DAG is built. Sources run on their `schedule` and declare their topics as
Asset outlets; sinks are scheduled by those Assets (plus an optional cron), so
a sink runs when new data lands.

One connector that cannot be compiled (a config stored before validation got
stricter, a row edited by hand, a plugin that fails) is logged and left out:
it must never take the DAG file, and so every other connector's DAG, down.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime, timedelta
from typing import Any

from airflow.sdk import (
    DAG,
    Asset,
    AssetAny,
    AssetOrTimeSchedule,
    CronTriggerTimetable,
    DeltaTriggerTimetable,
    get_parsing_context,
)
from sqlalchemy import Engine, func, select

from connect_core.airflow.operator import ConnectTaskOperator
from connect_core.airflow.rebalance import REBALANCE_DAG_ID, rebalance_dag
from connect_core.runtime.airflow_client import DAG_PREFIX, airflow_pool_for, dag_id_for
from connect_core.runtime.plugins import PluginRegistry
from connect_core.runtime.processing.config import build_chain
from connect_core.runtime.security import mask_config
from connect_core.runtime.settings import Settings
from connect_core.runtime.store.db import database_url, make_engine
from connect_core.runtime.store.models import AssignmentRow, ConnectorRow, TaskConfigRow
from connect_core.sdk.config import (
    CRON_PRESETS,
    ConnectorConfig,
    SinkConnectorConfig,
    check_schedule,
    check_topic_name,
    schedule_interval,
)
from connect_core.sdk.errors import ConfigError

__all__ = ["DAG_PREFIX", "build_dags", "dag_id_for", "topic_asset"]

log = logging.getLogger(__name__)

START_DATE = datetime(2024, 1, 1, tzinfo=UTC)


def topic_asset(topic: str) -> Asset:
    """The Airflow Asset of a topic: source tasks emit it, sink DAGs are scheduled on it."""
    return Asset(name=f"connect.topic.{topic}", uri=f"connect://topics/{topic}", group="connect")


def build_dags(settings: Settings | None = None, engine: Engine | None = None) -> dict[str, DAG]:
    """Every connector's DAG by dag id (only the one being run, inside a task)."""
    settings = settings or Settings()
    wanted = get_parsing_context().dag_id
    dags: dict[str, DAG] = {}
    if wanted in (None, REBALANCE_DAG_ID):
        dags[REBALANCE_DAG_ID] = rebalance_dag()
        if wanted is not None:
            return dags
    own_engine = engine is None
    if engine is None and settings.embedded and not (settings.pgdata / "PG_VERSION").exists():
        # Do not let every Airflow process start an empty embedded Postgres of its own.
        raise ConfigError(
            "set CONNECT_DATABASE_URL for Airflow (or start it with `connect airflow up`): "
            f"no Connect metadata store at `{settings.pgdata}`"
        )
    engine = engine or make_engine(database_url(settings))
    try:
        rows = _connectors(engine, only=wanted)
        placed = _placements(engine)
    finally:
        if own_engine:
            engine.dispose()
    registry = PluginRegistry(settings.plugin_dirs())
    for row in rows:
        try:
            dag = _compile(registry, row, placed)
        except Exception:  # one broken connector must not hide the others
            log.exception("connector `%s` could not be compiled to a DAG; its DAG is left out", row[0])
            continue
        if dag.dag_id in dags:
            # Names stored before they had to map one-to-one (`a b`, `a#b`): never let one replace the other.
            log.error("connector `%s` maps to DAG `%s`, which another connector has; left out", row[0], dag.dag_id)
            continue
        dags[dag.dag_id] = dag
    return dags


def _compile(registry: PluginRegistry, row: Any, placed: dict[tuple[str, int], str]) -> DAG:
    """The connector's DAG, validated as Airflow's DagBag will validate it (so its errors are ours)."""
    name, connector_class, type_, config, target_state, task_count = row
    plugin_cls: Any = registry.resolve(connector_class).cls
    model = plugin_cls.config_model.model_validate(config)
    outputs = [check_topic_name(t) for t in plugin_cls().output_topics(model)] if type_ == "source" else []
    outputs = _routed(registry, name, config, outputs)
    dag = _dag(name, connector_class, type_, config, model, target_state, task_count, outputs, placed)
    dag.validate()
    return dag


def _routed(registry: PluginRegistry, name: str, config: Any, outputs: list[str]) -> list[str]:
    """A source's outputs after its routers (RegexRouter renames by topic name): the Assets its sinks
    wait for are the topics it really writes. Routing that depends on records keeps the declared ones."""
    if not outputs or not config.get("transforms"):
        return outputs
    try:
        routed = build_chain(config, registry).routed_topics(outputs)
    except Exception:  # checked at create; a plugin gone since then fails the run, not the DAG file
        log.warning("the transforms of connector `%s` do not build; its outlets are its declared topics", name)
        return outputs
    return [check_topic_name(t) for t in routed] if routed else outputs


def _connectors(engine: Engine, only: str | None) -> list[Any]:
    tasks = select(TaskConfigRow.connector, func.count().label("n")).group_by(TaskConfigRow.connector).subquery()
    query = select(
        ConnectorRow.name,
        ConnectorRow.connector_class,
        ConnectorRow.type,
        ConnectorRow.config,
        ConnectorRow.target_state,
        func.coalesce(tasks.c.n, 0),
    ).outerjoin(tasks, tasks.c.connector == ConnectorRow.name)
    with engine.connect() as conn:
        if only is not None:
            # Inside a task: read just that connector (names with unsafe characters: filter after).
            exact = conn.execute(query.where(ConnectorRow.name == only.removeprefix(DAG_PREFIX))).all()
            if exact:
                return list(exact)
        rows = list(conn.execute(query.order_by(ConnectorRow.name)).all())
    return [r for r in rows if only is None or dag_id_for(r[0]) == only]


def _placements(engine: Engine) -> dict[tuple[str, int], str]:
    """The Spark pool of every assigned task, for its Airflow pool."""
    with engine.connect() as conn:
        rows = conn.execute(select(AssignmentRow.connector, AssignmentRow.task_id, AssignmentRow.pool)).all()
    return {(c, t): p for c, t, p in rows}


def _dag(
    name: str,
    connector_class: str,
    type_: str,
    config: dict[str, Any],
    model: ConnectorConfig,
    target_state: str,
    task_count: int,
    outputs: list[str],
    placed: dict[tuple[str, int], str],
) -> DAG:
    dag = DAG(
        dag_id=dag_id_for(name),
        schedule=None if target_state == "STOPPED" else _schedule(type_, model),
        start_date=START_DATE,
        catchup=False,
        max_active_runs=1,
        is_paused_upon_creation=target_state == "PAUSED",
        tags=["connect", type_, connector_class],
        doc_md=_doc(name, connector_class, type_, config, target_state, task_count, outputs),
        default_args={
            "owner": model.owner,
            "retries": model.retries,
            "retry_delay": timedelta(seconds=model.retry_delay_seconds),
        },
    )
    outlets = [topic_asset(t) for t in outputs]
    for task_id in range(task_count):
        ConnectTaskOperator(
            task_id=f"task_{task_id}",
            connector=name,
            connect_task_id=task_id,
            precheck=model.precheck,
            outlets=outlets,
            # A slot of its Spark pool's Airflow pool, as of the last rebalance (the task itself
            # resolves its pool again at run time, and its commit is fenced by generation).
            pool=airflow_pool_for(placed[name, task_id]) if (name, task_id) in placed else None,
            dag=dag,
        )
    return dag


def _schedule(type_: str, model: ConnectorConfig) -> Any:
    is_sink = type_ == "sink" and isinstance(model, SinkConnectorConfig)
    time_schedule = _time_schedule(model.schedule, sink=is_sink)
    if not is_sink:
        return time_schedule
    assert isinstance(model, SinkConnectorConfig)
    assets = AssetAny(*[topic_asset(t) for t in model.topics])
    if time_schedule is None:
        return assets
    if isinstance(time_schedule, timedelta):
        return AssetOrTimeSchedule(timetable=DeltaTriggerTimetable(time_schedule), assets=assets)
    return AssetOrTimeSchedule(timetable=CronTriggerTimetable(time_schedule, timezone="UTC"), assets=assets)


def _time_schedule(value: str | None, *, sink: bool) -> str | timedelta | None:
    """`none` → trigger-only; `30m`/`2h`/`90s`/`1d` → an interval; a preset → its cron; else cron or
    `@continuous`/`@once`. Checked again here: a stored config may predate the check at create."""
    value = check_schedule(value, sink=sink)
    if value is None:
        return None
    interval = schedule_interval(value)
    if interval is not None:
        return interval
    return CRON_PRESETS.get(value, value)


def _doc(
    name: str,
    connector_class: str,
    type_: str,
    config: dict[str, Any],
    target_state: str,
    task_count: int,
    outputs: list[str],
) -> str:
    shown = json.dumps(mask_config(config), indent=2, sort_keys=True)
    lines = [
        f"### Connect {type_} connector `{name}`",
        "",
        f"* plugin: `{connector_class}`",
        f"* target state: **{target_state}**",
        f"* tasks: {task_count} (one spark-submit run each)",
    ]
    if outputs:
        lines.append("* writes topics: " + ", ".join(f"`{t}`" for t in outputs))
    lines += ["", "Config (secrets masked):", "", "```json", shown, "```"]
    return "\n".join(lines)
