"""Compile every registered connector into an Airflow DAG `connect__<name>`.

The DAGs are spread over `CONNECT_AIRFLOW_DAG_SHARDS` DAG files (`dags/connect_dags.py` is
shard 0, `dags/connect_dags_<ii>.py` shard ii), each DAG in the file its id hashes to
(`shard_of`): the dag-processor parses a few hundred DAGs per file, files in parallel, instead of
all of them in one file, which at 5,000 connectors of 4 tasks takes 37 s of the 50 s Airflow gives
a file (bench/RESULTS.md). A shard's parse reads only its own rows. At one count no DAG is in two files.
A change of the count (every Airflow process restarted with it) moves DAGs between files: Airflow
records a DAG's new file when that file's parse has it, and deactivates a DAG only when its recorded
file has been parsed without it `stale_dag_threshold` (50 s) after its last parse, so a moved DAG
stays active as long as its new file is parsed within that time (every file is, in the first loop
after a restart). When Airflow runs a task it sets the parsing context, and only that connector's
DAG is built.

Sources run on their `schedule` and declare their topics as Asset outlets; sinks are scheduled
by those Assets (plus an optional cron), so a sink runs when new data lands.

A sink with table upkeep (`SinkConnector.upkeep`) and an `upkeep.schedule` gets one task per upkeep
job after its sink tasks, each after the one before, all with `trigger_rule="all_done"` (upkeep runs
whether the sink's run wrote, skipped or failed) and in no Spark pool (`ConnectUpkeepOperator`: no
Spark). Each runs its job only when due, else skips. Without a `schedule` of its own, such a sink's
DAG also runs on its `upkeep.schedule`, so an idle table still gets its upkeep.

One connector that cannot be compiled (a config stored before validation got
stricter, a row edited by hand, a plugin that fails) is logged and left out:
it must never take the DAG file, and so every other connector's DAG, down.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass
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
from sqlalchemy import BigInteger, Engine, cast, func, literal, or_, select
from sqlalchemy.dialects.postgresql import BIT

from connect_core.airflow.operator import TOPIC_ASSET_PREFIX, ConnectTaskOperator
from connect_core.airflow.rebalance import REBALANCE_DAG_ID, rebalance_dag
from connect_core.airflow.upkeep import ConnectUpkeepOperator
from connect_core.runtime.airflow_client import DAG_PREFIX, airflow_pool_for, dag_id_for
from connect_core.runtime.execution.upkeep import UPKEEP_TASK_PREFIX, upkeep_of
from connect_core.runtime.plugins import PluginRegistry
from connect_core.runtime.processing.config import build_chain
from connect_core.runtime.security import mask_config
from connect_core.runtime.settings import Settings
from connect_core.runtime.store.db import database_url, make_engine
from connect_core.runtime.store.models import AssignmentRow, ConnectorRow, TaskConfigRow
from connect_core.runtime.store.states import TargetState
from connect_core.sdk.config import (
    CRON_PRESETS,
    ConnectorConfig,
    SinkConnectorConfig,
    check_schedule,
    check_topic_name,
    schedule_interval,
)
from connect_core.sdk.errors import ConfigError

__all__ = ["DAG_PREFIX", "build_dags", "dag_id_for", "might_contain_dag", "shard_file", "shard_of", "topic_asset"]

log = logging.getLogger(__name__)

START_DATE = datetime(2024, 1, 1, tzinfo=UTC)
#: How long one upkeep job may run before Airflow stops it (it stays due, and runs at the next tick).
UPKEEP_TIMEOUT = timedelta(hours=2)


def topic_asset(topic: str) -> Asset:
    """The Airflow Asset of a topic: source tasks emit it, sink DAGs are scheduled on it."""
    return Asset(name=f"{TOPIC_ASSET_PREFIX}{topic}", uri=f"connect://topics/{topic}", group="connect")


def build_dags(
    settings: Settings | None = None, engine: Engine | None = None, *, shard: int | None = None
) -> dict[str, DAG]:
    """Every connector's DAG by dag id, or only those of DAG file `shard` (0 …
    `settings.airflow_dag_shards` - 1; a file beyond the count gets none). Inside a task, only the
    DAG being run, whatever its shard."""
    settings = settings or Settings()
    context = get_parsing_context()
    wanted = context.dag_id
    if context.task_id is not None:
        # A task parses the one file its DAG version names, which after a change of the shard
        # count can be the DAG's old file: any file builds the DAG it asks for. Everywhere else
        # (the dag-processor; `airflow dags test`, which parses every file) only its own shard does.
        shard = None
    part = None if shard is None else (shard, settings.airflow_dag_shards)
    dags: dict[str, DAG] = {}
    if wanted in (None, REBALANCE_DAG_ID) and shard in (None, 0):
        dags[REBALANCE_DAG_ID] = rebalance_dag()
    if wanted == REBALANCE_DAG_ID or (part is not None and not 0 <= part[0] < part[1]):
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
        rows, placed = _connectors(engine, only=wanted, part=part)
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


def shard_of(dag_id: str, shards: int) -> int:
    """The DAG file (0 … `shards` - 1) that defines `dag_id`: the first 32 bits of its MD5, modulo
    `shards`. Stable across processes, hosts and versions (Python's `hash()` is salted per
    process), and what `_in_shard` computes in Postgres. Hashing the DAG id, not the connector's
    name, keeps names stored before the name rule that map to one id (`a b`, `a#b`) in one file."""
    digest = hashlib.md5(dag_id.encode(), usedforsecurity=False).digest()
    return int.from_bytes(digest[:4], "big") % shards


def shard_file(shard: int) -> str:
    """The name of DAG file `shard` in dags/ (shard 0 keeps the name of the single file it was)."""
    return "connect_dags.py" if shard == 0 else f"connect_dags_{shard:02d}.py"


def might_contain_dag(file_path: str, zip_file: Any = None) -> bool:
    """Airflow's own heuristic, for `[core] might_contain_dag_callable`: the dag-processor then
    imports this module once, and every parse it forks finds the DAG factory imported instead of
    importing it again (bench/RESULTS.md, "DAG parse"). It lists the files beyond
    `CONNECT_AIRFLOW_DAG_SHARDS` too: a file no longer listed counts as deleted, and Airflow would
    deactivate its DAGs at once, before their new file is parsed."""
    from airflow.utils.file import might_contain_dag_via_default_heuristic

    return bool(might_contain_dag_via_default_heuristic(file_path=file_path, zip_file=zip_file))


def _compile(registry: PluginRegistry, row: Any, placed: dict[tuple[str, int], str]) -> DAG:
    """The connector's DAG, validated as Airflow's DagBag will validate it (so its errors are ours)."""
    name, connector_class, type_, config, target_state, task_count = row
    plugin_cls: Any = registry.resolve(connector_class).cls
    model = plugin_cls.config_model.model_validate(config)
    outputs = [check_topic_name(t) for t in plugin_cls().output_topics(model)] if type_ == "source" else []
    outputs = _routed(registry, name, config, outputs)
    moves = _moves(name, type_, _external(plugin_cls, model, name), model, outputs)
    upkeep = _upkeep(plugin_cls, model, name)
    dag = _dag(name, connector_class, type_, config, model, target_state, task_count, outputs, placed, moves, upkeep)
    dag.validate()
    return dag


def _upkeep(plugin_cls: Any, model: Any, name: str) -> list[tuple[str, str]]:
    """The connector's upkeep jobs (name, description), in order: none without `upkeep.schedule`."""
    try:
        return [(u.name, u.description) for u in upkeep_of(plugin_cls, name, model)]
    except Exception:  # its DAG without upkeep rather than no DAG at all
        log.exception("connector `%s`: its upkeep jobs cannot be listed; its DAG has no upkeep tasks", name)
        return []


def _external(plugin_cls: Any, model: Any, name: str) -> list[str]:
    """What the connector reads (a source) or writes (a sink) outside: its lineage datasets' names."""
    try:
        return [d.name for d in plugin_cls().lineage(model)]
    except Exception:  # a display name is not worth a missing DAG
        log.warning("connector `%s`: its datasets are unknown; its tasks keep their plain names", name)
        return []


@dataclass(frozen=True)
class _Moves:
    """What a connector's tasks move, for the graph and grid: `read orders → shop-orders`,
    `write fileTopic → /data/out.txt`; a sink's topics as its tasks' inlets (the Assets it reads)."""

    what: str
    inlets: list[Any]

    def label(self, task_id: int, task_count: int) -> str:
        return self.what if task_count == 1 else f"{self.what} ({task_id + 1}/{task_count})"


def _moves(name: str, type_: str, external: list[str], model: Any, outputs: list[str]) -> _Moves:
    topics = outputs if type_ == "source" else list(getattr(model, "topics", []))
    there = _few(external) or name
    if type_ == "source":
        return _Moves(f"read {there} → {_few(topics)}", [])
    return _Moves(f"write {_few(topics)} → {there}", [topic_asset(t) for t in topics])


def _few(names: list[str], shown: int = 2, width: int = 60) -> str:
    """`a, b`, `a, b +3`: a label's worth of names."""
    text = ", ".join(names[:shown]) + (f" +{len(names) - shown}" if len(names) > shown else "")
    return text if len(text) <= width else "…" + text[-(width - 1) :]  # a path's tail is its file


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


#: How long a new connector whose tasks are not placed yet is left out of a parse: its create has
#: committed and its placement (a moment later, in another transaction) has not; compiled now, its
#: tasks would take Airflow's `default_pool` instead of their Spark pool's (the next parse has it).
PLACEMENT_GRACE_SECONDS = 10


def _connectors(
    engine: Engine, only: str | None, part: tuple[int, int] | None
) -> tuple[list[Any], dict[tuple[str, int], str]]:
    """The connectors to compile (each with its task count), and their tasks' Spark pools."""
    tasks = select(func.count()).where(TaskConfigRow.connector == ConnectorRow.name).scalar_subquery()
    query = select(
        ConnectorRow.name,
        ConnectorRow.connector_class,
        ConnectorRow.type,
        ConnectorRow.config,
        ConnectorRow.target_state,
        tasks,
        (func.now() - ConnectorRow.created_at < timedelta(seconds=PLACEMENT_GRACE_SECONDS)).label("fresh"),
    )
    if part is not None:
        query = query.where(_in_shard(ConnectorRow.name, *part))
    with engine.connect() as conn:
        rows: list[Any] = []
        if only is not None:
            # Inside a task: read just that connector (names with unsafe characters: filter after).
            rows = list(conn.execute(query.where(ConnectorRow.name == only.removeprefix(DAG_PREFIX))).all())
        if not rows:
            rows = list(conn.execute(query.order_by(ConnectorRow.name)).all())
        rows = [r for r in rows if _wanted(dag_id_for(r[0]), only, part)]
        placed = select(AssignmentRow.connector, AssignmentRow.task_id, AssignmentRow.pool)
        if only is not None or part is not None:
            placed = placed.where(AssignmentRow.connector.in_([r[0] for r in rows]))
        placements = {(c, t): p for c, t, p in conn.execute(placed).all()}
    if only is None:  # a parse of every DAG: a connector created this moment waits for its placement
        rows = [r for r in rows if not (r[6] and r[5] and not any((r[0], t) in placements for t in range(r[5])))]
    return [r[:6] for r in rows], placements


def _wanted(dag_id: str, only: str | None, part: tuple[int, int] | None) -> bool:
    return (only is None or dag_id == only) and (part is None or shard_of(dag_id, part[1]) == part[0])


#: Names whose DAG id is `connect__<name>` verbatim (Postgres compares the ranges by code point).
_VERBATIM_NAME = "^[A-Za-z0-9._-]+$"


def _in_shard(name: Any, shard: int, shards: int) -> Any:
    """SQL: connector `name` may be in `shard` — `shard_of` of its DAG id, for names that are their
    DAG id's suffix verbatim; a name stored before the name rule is kept and `_wanted` decides."""
    bits = cast(literal("x") + func.substr(func.md5(literal(DAG_PREFIX) + name), 1, 8), BIT(32))
    return or_(~name.regexp_match(_VERBATIM_NAME), cast(bits, BigInteger) % shards == shard)


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
    moves: _Moves,
    upkeep: list[tuple[str, str]],
) -> DAG:
    dag = DAG(
        dag_id=dag_id_for(name),
        schedule=None if target_state == TargetState.STOPPED else _schedule(type_, model, bool(upkeep)),
        start_date=START_DATE,
        catchup=False,
        max_active_runs=1,
        is_paused_upon_creation=target_state == TargetState.PAUSED,
        tags=["connect", type_, connector_class],
        doc_md=_doc(name, connector_class, type_, config, target_state, task_count, outputs),
        default_args={
            "owner": model.owner,
            "retries": model.retries,
            "retry_delay": timedelta(seconds=model.retry_delay_seconds),
        },
    )
    outlets = [topic_asset(t) for t in outputs]
    tasks = []
    for task_id in range(task_count):
        task = ConnectTaskOperator(
            task_id=f"task_{task_id}",  # what runs, logs and the REST API name; the graph shows the label
            task_display_name=moves.label(task_id, task_count),
            inlets=moves.inlets,
            connector=name,
            connect_task_id=task_id,
            precheck=model.precheck,
            outlets=outlets,
            # A slot of its Spark pool's Airflow pool, as of the last rebalance (the task itself
            # resolves its pool again at run time, and its commit is fenced by generation).
            pool=airflow_pool_for(placed[name, task_id]) if (name, task_id) in placed else None,
            dag=dag,
        )
        tasks.append(task)
    upstream: Any = tasks
    for job, description in upkeep:
        # pyiceberg / delta-rs in the task's own process: Airflow's default pool, no Spark pool's slot
        step = ConnectUpkeepOperator(
            task_id=f"{UPKEEP_TASK_PREFIX}{job}",
            task_display_name=f"upkeep: {description or job}",
            connector=name,
            job=job,
            trigger_rule="all_done",
            # the sink's next run waits for its DAG run (one at a time): a hung job must not hold it for ever
            execution_timeout=UPKEEP_TIMEOUT,
            dag=dag,
        )
        step.set_upstream(upstream)
        upstream = step
    return dag


def _schedule(type_: str, model: ConnectorConfig, upkeep: bool = False) -> Any:
    is_sink = type_ == "sink" and isinstance(model, SinkConnectorConfig)
    schedule = model.schedule
    if is_sink and schedule is None and upkeep:
        assert isinstance(model, SinkConnectorConfig)
        schedule = model.upkeep_schedule  # an idle sink's DAG still runs for its upkeep
    time_schedule = _time_schedule(schedule, sink=is_sink)
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
