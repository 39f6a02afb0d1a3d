"""The runtime's object graph: settings -> engine -> stores, plugins; and connector management."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine
from sqlalchemy.exc import OperationalError

from connect_core.runtime.airflow_client import AirflowClient
from connect_core.runtime.cluster.allocation import PREFERRED_POOL_KEY
from connect_core.runtime.cluster.pools import PoolStore
from connect_core.runtime.cluster.runs import RunStore
from connect_core.runtime.plugins import PluginRegistry
from connect_core.runtime.security import ConfigProviders
from connect_core.runtime.security.limits import ShapeError, check_json_shape
from connect_core.runtime.security.paths import AllowedPaths
from connect_core.runtime.settings import Settings
from connect_core.runtime.spark.conf_policy import SparkConfPolicy
from connect_core.runtime.store import migrate
from connect_core.runtime.store.connectors import ConnectorInfo, ConnectorStore, Page
from connect_core.runtime.store.db import database_url, make_engine, masked_url
from connect_core.runtime.store.states import TargetState
from connect_core.runtime.topics.store import TopicStore
from connect_core.runtime.validation import claim_conflicts, validate_connector
from connect_core.sdk.errors import ConfigError, RetriableError
from connect_core.sdk.records import TopicPartition

__all__ = ["Runtime"]

#: `pool.preferred`'s field name, which pydantic also accepts as a key.
_PREFERRED_POOL_FIELD = "pool_preferred"

log = logging.getLogger(__name__)

#: How stale the pools' recorded worker directories may be at create (the platform records them at start).
WORKER_PATHS_MAX_AGE = 10.0


@dataclass
class Runtime:
    settings: Settings
    database_url: str
    engine: Engine
    connectors: ConnectorStore
    runs: RunStore
    topics: TopicStore
    registry: PluginRegistry
    providers: ConfigProviders
    _worker_paths: tuple[float, dict[str, list[str]]] | None = None
    _pool_names: tuple[float, list[str]] | None = None

    @classmethod
    def open(cls, settings: Settings | None = None, *, upgrade: bool = True) -> Runtime:
        """Connect to the metadata store (starting the embedded one if needed) and migrate it."""
        settings = settings or Settings()
        url = database_url(settings)
        engine = make_engine(
            url,
            pool_size=settings.db_pool_size,
            max_overflow=settings.db_pool_size,
            connect_timeout=settings.db_connect_timeout,
            statement_timeout=settings.db_statement_timeout,
        )
        if upgrade:
            try:
                migrate.upgrade(engine)
            except OperationalError as exc:
                raise RetriableError(
                    f"cannot reach the metadata database at `{masked_url(url)}`: {exc.orig}. "
                    "Is it running, and is CONNECT_DATABASE_URL right?"
                ) from exc
        connectors = ConnectorStore(engine)
        topics = TopicStore(engine, settings.topics_base)
        return cls(
            settings=settings,
            database_url=url,
            engine=engine,
            connectors=connectors,
            runs=RunStore(engine, connectors, topics, settings.worker_id),
            topics=topics,
            registry=PluginRegistry(settings.plugin_dirs()),
            providers=ConfigProviders.from_settings(settings),
        )

    @property
    def pools(self) -> PoolStore:
        return PoolStore(self.engine, SparkConfPolicy.from_settings(self.settings))

    def create_connector(
        self, name: str, config: Mapping[str, Any], target_state: str = TargetState.RUNNING
    ) -> ConnectorInfo:
        """Validate `config`, split it into tasks and store it (all or nothing); place its tasks on pools."""
        check_new_name(name)  # only new names: one stored before the rule can still be updated
        info = self.connectors.create(name, target_state=target_state, **self.validated(name, config))
        self.place_new_work(name)
        return info

    def update_connector(self, name: str, config: Mapping[str, Any]) -> ConnectorInfo:
        """Validate and replace the config; its tasks get new configs and a new generation."""
        info = self.connectors.update_config(name, **self.validated(name, config, self.connectors.get(name).config))
        self.place_new_work(name)
        return info

    def delete_connector(self, name: str) -> None:
        """Delete the connector (positions and offsets stay, as in Kafka Connect), then let its plugin
        release what it holds outside (`Connector.deleted`): best effort, the delete stands."""
        info = self.connectors.get(name)
        self.connectors.delete(name)
        try:
            plugin: Any = self.registry.resolve(info.connector_class).cls
            plugin().deleted(name, plugin.config_model.model_validate(self.providers.resolve(info.config)))
        except Exception as exc:
            log.warning("connector %s deleted, but its plugin could not release what it holds: %s", name, exc)

    def spark_conf_for(self, name: str) -> dict[str, str]:
        """The Spark settings the connector's plugin asks for (e.g. its JDBC driver's jar)."""
        info = self.connectors.get(name)
        plugin: Any = self.registry.resolve(info.connector_class).cls
        # Its driver jars checked again here, right before Spark: the stored config may predate the rule
        # or the settings, and a symlink may have been swapped since create. The plugin gets real paths.
        config = AllowedPaths.from_settings(self.settings).jars.confine(plugin.config_model, info.config)
        return dict(plugin().spark_conf(plugin.config_model.model_validate(config)))

    def alter_sink_offsets(self, name: str, changes: Mapping[TopicPartition, int | None]) -> None:
        """Alter a sink's committed offsets (STOPPED connector) and tell its plugin."""
        self._tell_sink(name, dict(changes))
        self.connectors.alter_sink_offsets(name, changes)

    def reset_offsets(self, name: str) -> None:
        """Forget a connector's positions or offsets (STOPPED connector); a sink's plugin is told."""
        self._tell_sink(name, None)
        self.connectors.reset_offsets(name)

    def _tell_sink(self, name: str, offsets: dict[TopicPartition, int | None] | None) -> None:
        """A stopped sink's plugin told of an offset change before the store makes it: a change the
        plugin cannot make in its target refuses the whole change (its target's offsets and the
        store's would disagree). It gets its config as a run does: resolved, its paths confined to
        the directories this process may use (real paths, so a link swapped since create is refused).
        A connector that is not stopped is left to the store, which refuses the change."""
        info = self.connectors.get(name)
        if info.type != "sink" or info.target_state != TargetState.STOPPED:
            return
        plugin, config = self.run_config(info)
        plugin().alter_offsets(name, config, offsets)

    def run_config(self, info: ConnectorInfo) -> tuple[Any, Any]:
        """The connector's plugin class and its config model as a run of its tasks gets it: resolved
        by the config providers, its paths confined to the directories this process may use (real
        paths, so a link swapped since create is refused). For what calls the plugin outside a run
        (an offset change, table upkeep)."""
        plugin: Any = self.registry.resolve(info.connector_class).cls
        config = AllowedPaths.from_settings(self.settings).confine(
            plugin.config_model, self.providers.resolve(info.config)
        )
        return plugin, plugin.config_model.model_validate(config)

    def place_new_work(self, name: str | None = None) -> None:
        """Rebalance on a config change, as Kafka and RocketMQ do (on recorded liveness: no probes
        here): with `name`, only that connector's work is placed (while the pools are unchanged)."""
        s = self.settings
        self.pools.rebalance(
            s.rebalance_strategy,
            s.heartbeat_timeout,
            max_delay=s.rebalance_max_delay,
            connectors=None if name is None else [name],
        )

    def validated(
        self, name: str, config: Mapping[str, Any], previous: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        """`config` checked (shape, plugin, fields, providers, paths) and split into task configs: the
        store's arguments for a create or an update. ConfigError lists every problem.

        `previous`: the stored config it replaces, if known: what it already said and still says is
        not judged by today's pools (a preferred pool deleted since must not block other changes)."""
        _check_config_name(name, config)
        try:  # every entrance (REST body or query, CLI file) passes here: too deep or too big stays out
            check_json_shape(
                config,
                max_depth=self.settings.rest_max_depth,
                max_value_bytes=self.settings.rest_max_value_bytes,
                root="config",
            )
        except ShapeError as exc:
            raise ConfigError(
                f"Connector configuration for `{name}` is refused: {exc}", {"config": [str(exc)]}
            ) from None
        # this runtime's settings, not a fresh read of the environment (a pydantic Settings: 12 ms)
        # Paths are judged by this process's directories and by those of the pools' workers that recorded theirs.
        paths = AllowedPaths.from_settings(self.settings).where_tasks_run(self.worker_paths())
        validated = validate_connector(name, config, self.registry, self.providers, paths)
        conflicts = claim_conflicts(validated, self._stored_configs, self.registry)
        conflicts.update(self._unknown_pool(validated.config, previous))
        if conflicts:
            lines = [f"{key}: {problem}" for key, problems in sorted(conflicts.items()) for problem in problems]
            raise ConfigError(f"Connector configuration for `{name}` is invalid: " + "; ".join(lines), conflicts)
        return {
            "connector_class": validated.plugin.name,
            "type": validated.plugin.type,
            "config": validated.config,
            "task_configs": validated.task_configs,
        }

    def pool_names(self, max_age: float = WORKER_PATHS_MAX_AGE) -> list[str]:
        """The registered pools' names, read at most every `max_age` seconds (as `worker_paths`, for
        validations under a row lock)."""
        now = time.monotonic()
        if self._pool_names is None or now - self._pool_names[0] > max_age:
            self._pool_names = (now, [p.name for p in self.pools.list(self.settings.heartbeat_timeout)])
        return self._pool_names[1]

    def worker_paths(self, max_age: float = WORKER_PATHS_MAX_AGE) -> dict[str, list[str]]:
        """The pools' recorded worker directories, read at most every `max_age` seconds. A change or
        patch validates under its connector's row lock: a read there would take a second pooled
        connection while every other writer holds one (50 parallel patches exhausted the pool)."""
        now = time.monotonic()
        if self._worker_paths is None or now - self._worker_paths[0] > max_age:
            self._worker_paths = (now, self.pools.worker_paths(self.settings.heartbeat_timeout))
        return self._worker_paths[1]

    def _unknown_pool(self, config: Mapping[str, Any], previous: Mapping[str, Any] | None) -> dict[str, list[str]]:
        """`pool.preferred` names a registered pool (a typo would silently leave the preference unused),
        when it is new or changed; and it is written so, the key placement reads."""
        if _PREFERRED_POOL_FIELD in config:  # pydantic takes the field's name too; placement reads the key
            return {_PREFERRED_POOL_FIELD: [f"write it `{PREFERRED_POOL_KEY}`: the key placement reads"]}
        wanted = config.get(PREFERRED_POOL_KEY)
        if not wanted or (previous is not None and previous.get(PREFERRED_POOL_KEY) == wanted):
            return {}
        known = self.pool_names()
        if wanted in known:
            return {}
        known = self.pool_names(max_age=0)  # registered since the last reading?
        if wanted in known:
            return {}
        return {
            PREFERRED_POOL_KEY: [f"no Spark pool `{wanted}` is registered; the pools are: {', '.join(known) or 'none'}"]
        }

    def _stored_configs(self) -> list[tuple[str, Mapping[str, Any]]]:
        """Every stored connector's name and config, read in one query (for `claim_conflicts`)."""
        return [(o.name, o.config) for o in self.connectors.listing(Page(), info=True).overviews.values()]

    def set_target_state(self, name: str, state: str) -> str | None:
        """Pause, resume or stop a connector; its DAG follows when Airflow is reachable.

        Returns a warning when the DAG could not be updated (the connector's state
        is changed regardless: its tasks check it before running).
        """
        self.connectors.set_target_state(name, state)
        client = AirflowClient.from_settings(self.settings)
        if client is None or state == TargetState.STOPPED:  # STOPPED: the DAG loses its schedule at the next parse
            return None
        try:
            client.set_paused(name, state == TargetState.PAUSED)
        except RetriableError as exc:
            log.warning("connector `%s` is %s, but its DAG was not updated: %s", name, state, exc)
            return str(exc)
        return None

    def close(self) -> None:
        self.engine.dispose()


def check_new_name(name: str) -> None:
    """A ConfigError unless `name` may name a new connector."""
    # A connector's name is its DAG id's suffix, verbatim: only characters Airflow allows in a
    # dag id, so `a b`, `a#b` and `a?b` can never share one DAG. An allow-list also keeps NUL and
    # control characters out of SQL, logs and paths; ASCII only, so no look-alike letters either.
    # (dag_id_for still maps names stored before this check, which keep working.)
    from connect_core.runtime.airflow_client import DAG_ID_CHARS, DAG_ID_MAX, DAG_PREFIX

    longest = DAG_ID_MAX - len(DAG_PREFIX)
    # `.` and `..` are path segments: `/connectors/..` is normalised away by clients (the CLI, curl),
    # so such a connector could never be read or deleted again.
    dots_only = isinstance(name, str) and name.strip(".") == ""
    if not isinstance(name, str) or not name or dots_only or len(name) > longest or not set(name) <= DAG_ID_CHARS:
        shown = repr(name[:60] + ("…" if len(name) > 60 else "")) if isinstance(name, str) else type(name).__name__
        raise ConfigError(
            f"invalid connector name {shown}: a name becomes its Airflow DAG id `{DAG_PREFIX}<name>`, so it "
            f"must be 1-{longest} characters, each an ASCII letter, digit, `.`, `_` or `-`, not only dots",
            {"name": [f"1-{longest} characters from [A-Za-z0-9._-], not only dots"]},
        )


def _check_config_name(name: str, config: Mapping[str, Any]) -> None:
    if config.get("name") not in (None, name):
        raise ConfigError(
            f"config `name` ({str(config['name'])[:60]!r}) differs from the connector name `{name}`",
            {"name": [f"must be `{name}` or absent"]},
        )
