"""Connector management as data: what both REST dialects and the CLI do, in Kafka Connect's shapes.

HTTP-agnostic: methods take and return JSON-able values and raise the SDK's
errors (`NotFoundError` → 404, `ConnectorExistsError` → 409, `ConfigError` →
400). Every config that leaves here is masked.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from connect_core import __version__
from connect_core.runtime.airflow_client import AirflowClient, dag_id_for
from connect_core.runtime.cluster.allocation import STRATEGIES
from connect_core.runtime.cluster.pools import PoolStore
from connect_core.runtime.cluster.rebalancer import Rebalancer, sync_airflow_pools
from connect_core.runtime.context import Runtime
from connect_core.runtime.security import mask_config, mask_text
from connect_core.runtime.store.changes import ChangeListener
from connect_core.runtime.store.connectors import TARGET_STATES, ConnectorExistsError, ConnectorInfo, ConnectorStatus
from connect_core.runtime.store.db import check_storable
from connect_core.runtime.validation import config_infos, transform_definitions
from connect_core.sdk.config import SinkConnectorConfig
from connect_core.sdk.errors import ConfigError, ConnectError, NotFoundError
from connect_core.sdk.records import SourcePosition, TopicPartition

__all__ = ["ConnectService", "NotStoppedError", "server_info"]

WORKER_ID = "connect-core"
#: Kafka's bounds of a topic partition (int32) and an offset (int64), which the store's columns share.
_MAX_PARTITION = 2**31 - 1
_MAX_OFFSET = 2**63 - 1


def server_info() -> dict[str, Any]:
    """Kafka's `GET /`: needs no database, so it answers while the metadata store is down."""
    return {"version": __version__, "commit": "connect-core", "kafka_cluster_id": "connect-core"}


class NotStoppedError(ConfigError):
    """An operation that needs a STOPPED connector (as Kafka Connect's offset changes do)."""


class _Snapshot:
    """Every connector's info and status as API dicts (and their JSON), as of one change count."""

    def __init__(self, version: int, infos: dict[str, ConnectorInfo], statuses: dict[str, ConnectorStatus]) -> None:
        self.version = version
        self.names = sorted(infos)
        self.info = {name: _info_dict(i) for name, i in infos.items()}
        self.status = {name: _status_dict(s) for name, s in statuses.items()}
        self.status_json = {name: json.dumps(s).encode() for name, s in self.status.items()}
        self.names_json = json.dumps(self.names).encode()
        self._memo: dict[Any, bytes] = {}

    def memo(self, key: Any, build: Callable[[], Any]) -> bytes:
        """JSON of `build()`, computed once per snapshot (for the hot list endpoints)."""
        if key not in self._memo:
            self._memo[key] = json.dumps(build()).encode()
        return self._memo[key]

    def expanded(self, expand: Sequence[str]) -> dict[str, Any]:
        return {
            name: {k: (self.status if k == "status" else self.info)[name] for k in ("status", "info") if k in expand}
            for name in self.names
        }

    def expanded_json(self, expand: Sequence[str]) -> bytes:
        key = tuple(sorted(set(expand)))
        return self.memo(("expanded", key), lambda: self.expanded(key))


class ConnectService:
    """Connector management. Lists and statuses come from a snapshot of all connectors that is
    rebuilt only when the store's change counter moved; the counter is followed by LISTEN/NOTIFY,
    so a hot read costs no query and the same for 1 or 1000 connectors."""

    def __init__(self, runtime: Runtime) -> None:
        self.rt = runtime
        self._snapshot: _Snapshot | None = None
        self._refresh = threading.Lock()
        self._changes: ChangeListener | None = None

    def close(self) -> None:
        if self._changes is not None:
            self._changes.close()

    def snapshot(self) -> _Snapshot:
        """The snapshot as of the store's change counter, read now (rebuilt if the store moved on).

        The hot async endpoints use `fresh_snapshot()` instead, which trusts the counter
        the listener last heard (NOTIFY arrives within milliseconds of a commit).
        """
        version = self.rt.connectors.change_count()
        snap = self._snapshot
        if snap is None or snap.version < version:
            with self._refresh:  # one rebuild at a time; the others reuse it
                snap = self._snapshot
                if snap is None or snap.version < version:
                    snap = self._snapshot = _Snapshot(*self.rt.connectors.snapshot())
        return snap

    # -- reading --------------------------------------------------------------

    def server_info(self) -> dict[str, Any]:
        return server_info()

    def check_store(self) -> None:
        """One round trip to the metadata store (for /health); raises what the driver raised."""
        self.rt.connectors.change_count()

    def _changed(self) -> None:
        """This service wrote: drop the snapshot so its next read sees the write."""
        self._snapshot = None

    def fresh_snapshot(self) -> _Snapshot | None:
        """The cached snapshot if it is current, without any I/O (for async endpoints); else None.

        The first call starts the listener that follows the change counter (only servers need it).
        """
        if self._changes is None:
            with self._refresh:
                if self._changes is None:
                    self._changes = ChangeListener(self.rt.engine)
            return None
        snap = self._snapshot
        # While the listener is disconnected it hears no NOTIFY, so the snapshot is served only
        # after a read of the store itself (`snapshot()`): when the store is down, reads answer
        # 503 rather than a state nobody can vouch for (a task may have failed meanwhile).
        if snap is None or not self._changes.connected or snap.version < self._changes.version():
            return None
        return snap

    def names(self) -> list[str]:
        return list(self.snapshot().names)

    def info(self, name: str) -> dict[str, Any]:
        found = self.snapshot().info.get(name)
        return found if found is not None else _info_dict(self.rt.connectors.get(name))

    def config(self, name: str) -> dict[str, Any]:
        return mask_config({**self.rt.connectors.get(name).config, "name": name})

    def status(self, name: str) -> dict[str, Any]:
        found = self.snapshot().status.get(name)
        return found if found is not None else _status_dict(self.rt.connectors.status(name))

    def task_status(self, name: str, task: int) -> dict[str, Any]:
        for t in self.status(name)["tasks"]:
            if t["id"] == task:
                return dict(t)
        raise NotFoundError(f"task {task} of connector `{name}` not found")

    def tasks(self, name: str) -> list[dict[str, Any]]:
        info = self.rt.connectors.get(name)
        return [{"id": {"connector": name, "task": i}, "config": mask_config(cfg)} for i, cfg in enumerate(info.tasks)]

    def topics(self, name: str) -> dict[str, Any]:
        info = self.rt.connectors.get(name)
        plugin_cls: Any = self.rt.registry.resolve(info.connector_class).cls
        try:
            model = plugin_cls.config_model.model_validate(info.config)
        except ValidationError as exc:  # its text quotes the values (secrets): only the count is told
            raise ConfigError(
                f"the stored config of `{name}` no longer validates ({exc.error_count()} error(s), e.g. after a "
                f"change of `file.allowed.paths`); fix it with PUT /connectors/{name}/config"
            ) from exc
        topics = list(model.topics) if isinstance(model, SinkConnectorConfig) else plugin_cls().output_topics(model)
        return {name: {"topics": sorted(topics)}}

    def expanded(self, expand: list[str]) -> dict[str, Any]:
        return self.snapshot().expanded(expand)

    def runs(self, name: str, limit: int = 10) -> list[dict[str, Any]]:
        """The last task runs (an extension of Kafka's API: micro-batch runs have no Kafka equivalent)."""
        self.rt.connectors.get(name)
        return [
            {**r, "error": mask_text(r["error"]) if r["error"] else None}
            for r in self.rt.connectors.last_runs(name, limit=limit)
        ]

    # -- Spark pools (the workers) and RocketMQ's cluster views ----------------

    def _pools(self) -> PoolStore:
        return PoolStore(self.rt.engine)

    def pools(self) -> list[dict[str, Any]]:
        """Every pool with its health and the connectors and tasks assigned to it."""
        running = self._pools().running()
        return [
            {**_masked_pool(p.to_dict()), "running": running.get(p.name, [])}
            for p in self._pools().list(self.rt.settings.heartbeat_timeout)
        ]

    def pool(self, name: str) -> dict[str, Any]:
        for p in self.pools():
            if p["name"] == name:
                return p
        raise NotFoundError(f"Spark pool `{name}` not found")

    def put_pool(self, name: str, spec: Mapping[str, Any]) -> tuple[bool, dict[str, Any]]:
        """Register or update a pool (and its Airflow pool's slots when Airflow is configured)."""
        created = name not in {p.name for p in self._pools().list(0)}
        self._pools().add(
            name,
            str(spec.get("master") or ""),
            capacity=int(spec.get("capacity", 1)),
            conf=spec.get("conf") or {},
            labels=spec.get("labels") or {},
            probe_url=spec.get("probe_url"),
        )
        sync_airflow_pools(self._pools(), AirflowClient.from_settings(self.rt.settings))
        return created, self.pool(name)

    def delete_pool(self, name: str) -> None:
        self._pools().remove(name)
        sync_airflow_pools(self._pools(), AirflowClient.from_settings(self.rt.settings))

    def pool_heartbeat(self, name: str) -> None:
        self._pools().heartbeat(name)

    def rebalance(self, strategy: str | None = None) -> dict[str, Any]:
        """Rebalance now (the sensor does this on its own when pools or connectors change)."""
        settings = self.rt.settings
        strategy = strategy or settings.rebalance_strategy
        if strategy not in STRATEGIES:
            raise ConfigError(f"unknown strategy `{strategy}`", {"strategy": [f"one of {', '.join(STRATEGIES)}"]})
        rebalancer = Rebalancer(self._pools(), strategy, settings.heartbeat_timeout, settings.rebalance_max_delay)
        rebalancer.check()  # probe first: decide on fresh liveness
        result = rebalancer.rebalance()
        return {"generation": result.generation, "moved": result.moved, "reason": result.reason, "strategy": strategy}

    def rebalances(self, limit: int = 20) -> list[dict[str, Any]]:
        return self._pools().history(limit)

    def cluster_info(self) -> list[dict[str, Any]]:
        """RocketMQ's workers: here the Spark pools, with health and what each runs."""
        return [
            {
                "workerId": p["name"],
                "sparkMaster": p["master"],
                "alive": p["alive"],
                "capacity": p["capacity"],
                "lastHeartbeatSeconds": p["seconds_since_heartbeat"],
                "probe": p["probe"],
                "allocated": p["running"],
            }
            for p in self.pools()
        ]

    def allocated_connectors(self, pool: str | None = None) -> dict[str, Any]:
        """Configs of the connectors assigned to `pool` (every pool when None), as RocketMQ's view."""
        names = {
            w.connector for w, (p, _) in self._pools().assignment().items() if w.task is None and pool in (None, p)
        }
        return {name: self.config(name) for name in self.names() if name in names}

    def allocated_tasks(self, pool: str | None = None) -> dict[str, Any]:
        """Configs of the tasks assigned to `pool` (every pool when None), by connector."""
        assigned = {(w.connector, w.task) for w, (p, _) in self._pools().assignment().items() if pool in (None, p)}
        return {
            name: [t["config"] for t in self.tasks(name) if (name, t["id"]["task"]) in assigned]
            for name in self.names()
            if any(c == name for c, _ in assigned)
        }

    # -- changing -------------------------------------------------------------

    def create(self, name: str, config: Mapping[str, Any], initial_state: str = "RUNNING") -> dict[str, Any]:
        if initial_state not in TARGET_STATES:
            raise ConfigError(
                f"`initial_state` must be one of {', '.join(TARGET_STATES)}, not `{initial_state}`",
                {"initial_state": [f"must be one of {', '.join(TARGET_STATES)}"]},
            )
        _check_input(name, config)
        self.rt.create_connector(name, config, target_state=initial_state)
        self._changed()
        return self.info(name)

    def put_config(self, name: str, config: Mapping[str, Any]) -> tuple[bool, dict[str, Any]]:
        """Create or replace; returns (created, info).

        Tried as a replace first, then as a create; a create that loses to a concurrent one
        replaces what that one created, as a PUT does: concurrent PUTs never answer 409.
        """
        _check_input(name, config)
        try:
            return False, self._replace(name, config)
        except NotFoundError:
            pass
        try:
            return True, self.create(name, config)
        except ConnectorExistsError:
            return False, self._replace(name, config)

    def _replace(self, name: str, config: Mapping[str, Any]) -> dict[str, Any]:
        self.rt.update_connector(name, config)
        self._changed()
        return self.info(name)

    def patch_config(self, name: str, patch: Mapping[str, Any]) -> dict[str, Any]:
        """Kafka's PATCH: keys with null values are removed, others set.

        The merge happens under the connector's row lock, on the config as it is then: of
        concurrent PATCHes each sees the previous one's keys, none is lost.
        """
        _check_input(name, patch)

        def patched(current: dict[str, Any]) -> dict[str, Any]:
            for key, value in patch.items():
                if value is None:
                    current.pop(key, None)
                else:
                    current[key] = value
            # The runtime's own validation (as create and PUT): one definition of a valid config.
            return self.rt.validated(name, current)

        self.rt.connectors.modify_config(name, patched)
        self.rt.place_new_work()
        self._changed()
        return self.info(name)

    def delete(self, name: str) -> None:
        self.rt.connectors.delete(name)
        self._changed()

    def set_state(self, name: str, state: str) -> str | None:
        warning = self.rt.set_target_state(name, state)
        self._changed()
        return warning

    def restart(self, name: str, *, include_tasks: bool = False, only_failed: bool = False) -> dict[str, Any]:
        """There is no long-lived connector process to restart: a restart clears FAILED task states
        (so they run again at the next trigger or schedule) and, with Airflow, triggers a run now."""
        status = self.status(name)
        restarted = [t["id"] for t in status["tasks"] if include_tasks and (not only_failed or t["state"] == "FAILED")]
        self.rt.connectors.reset_task_states(name, restarted)
        self._changed()
        run_id = self._maybe_trigger(name)
        return {**self.status(name), "dag_run_id": run_id}

    def restart_task(self, name: str, task: int) -> None:
        self.task_status(name, task)  # 404 for an unknown task
        self.rt.connectors.reset_task_states(name, [task])
        self._changed()
        self._maybe_trigger(name)

    def trigger(self, name: str) -> dict[str, Any]:
        self.rt.connectors.get(name)
        client = AirflowClient.from_settings(self.rt.settings)
        if client is None:
            raise ConnectError(
                "no Airflow configured to trigger runs: run `connect airflow up` or set CONNECT_AIRFLOW_URL"
            )
        return {"name": name, "dag_id": dag_id_for(name), "dag_run_id": client.trigger(name)}

    def _maybe_trigger(self, name: str) -> str | None:
        client = AirflowClient.from_settings(self.rt.settings)
        if client is None:
            return None
        try:
            return client.trigger(name)
        except ConnectError:
            return None

    # -- offsets (Kafka Connect 3.6 shapes) -------------------------------------

    def offsets(self, name: str) -> dict[str, Any]:
        info = self.rt.connectors.get(name)
        if info.type == "source":
            entries = [
                {"partition": dict(p.partition), "offset": dict(p.offset)}
                for p in self.rt.connectors.positions(name).values()
            ]
        else:
            entries = [
                {
                    "partition": {"kafka_topic": tp.topic, "kafka_partition": tp.partition},
                    "offset": {"kafka_offset": c.offset},
                }
                for tp, c in sorted(self.rt.connectors.sink_offsets(name).items())
            ]
        return {"offsets": entries}

    def alter_offsets(self, name: str, offsets: Sequence[Mapping[str, Any]]) -> dict[str, str]:
        check_storable(list(offsets), "offsets")
        info = self._stopped(name)
        if info.type == "source":
            set_: list[SourcePosition] = []
            remove: list[Mapping[str, Any]] = []
            for entry in offsets:
                partition, offset = entry.get("partition"), entry.get("offset")
                if not isinstance(partition, Mapping) or not (offset is None or isinstance(offset, Mapping)):
                    raise ConfigError("each offset needs a `partition` object and an `offset` object or null")
                if offset is None:
                    remove.append(partition)
                else:
                    set_.append(SourcePosition(partition, offset))
            self.rt.connectors.alter_positions(name, set_=set_, remove=remove)
        else:
            changes: dict[TopicPartition, int | None] = {}
            for entry in offsets:
                partition, offset = entry.get("partition") or {}, entry.get("offset")
                try:
                    tp = TopicPartition(str(partition["kafka_topic"]), int(partition["kafka_partition"]))
                    value = None if offset is None else int(offset["kafka_offset"])
                except (KeyError, TypeError, ValueError) as exc:
                    raise ConfigError(
                        'sink offsets look like {"partition": {"kafka_topic": …, "kafka_partition": …}, '
                        '"offset": {"kafka_offset": …}}'
                    ) from exc
                if not 0 <= tp.partition <= _MAX_PARTITION:
                    raise ConfigError(f"`kafka_partition` of `{tp.topic}` must be 0 to {_MAX_PARTITION}")
                if value is not None and not 0 <= value <= _MAX_OFFSET:
                    raise ConfigError(f"offset of `{tp.topic}-{tp.partition}` must be 0 to {_MAX_OFFSET}")
                changes[tp] = value
            self.rt.alter_sink_offsets(name, changes)
        return {"message": "The offsets for this connector have been altered successfully"}

    def reset_offsets(self, name: str) -> dict[str, str]:
        self._stopped(name)
        self.rt.reset_offsets(name)
        return {"message": "The offsets for this connector have been reset successfully"}

    def _stopped(self, name: str) -> Any:
        info = self.rt.connectors.get(name)
        if info.target_state != "STOPPED":
            raise NotStoppedError(
                f"Connectors must be in the STOPPED state before their offsets can be modified; "
                f"`{name}` is {info.target_state}: stop it first (PUT /connectors/{name}/stop)"
            )
        return info

    # -- plugins ----------------------------------------------------------------

    def plugins(self, connectors_only: bool = False) -> list[dict[str, Any]]:
        """Connector plugins, then (unless `connectors_only`) transformations and predicates."""
        registry = self.rt.registry
        found: list[Any] = sorted(registry.plugins().values(), key=lambda p: p.name)
        if not connectors_only:
            found += sorted(registry.transforms().values(), key=lambda p: p.name)
            found += sorted(registry.predicates().values(), key=lambda p: p.name)
        return [
            {"class": p.class_path, "type": p.type, "version": p.version, "name": p.name, "aliases": p.aliases}
            for p in found
        ]

    def plugin_config(self, plugin: str) -> list[dict[str, Any]]:
        registry = self.rt.registry
        for predicate in (False, True):
            try:
                return transform_definitions(registry.resolve_transform(plugin, predicate=predicate))
            except ConfigError:
                continue
        infos = config_infos({"connector.class": plugin}, registry)
        if infos["configs"] and any("not found" in e for c in infos["configs"] for e in c["value"]["errors"]):
            raise NotFoundError(f"plugin `{plugin}` not found")
        return [c["definition"] for c in infos["configs"] if c["definition"]]

    def validate(self, plugin: str | None, config: Mapping[str, Any]) -> dict[str, Any]:
        config = dict(config)
        if plugin is not None:
            given = config.get("connector.class")
            if given is not None and self.rt.registry.resolve(given).cls is not self.rt.registry.resolve(plugin).cls:
                raise ConfigError(f"`connector.class` ({given}) does not match the plugin in the URL (`{plugin}`)")
            config.setdefault("connector.class", plugin)
        return config_infos(config, self.rt.registry, self.rt.providers)

    def reload_plugins(self) -> list[str]:
        return sorted(self.rt.registry.reload())


def _check_input(name: str, config: Mapping[str, Any]) -> None:
    """What the store could not hold answers 400 naming the key, before validation sees it."""
    check_storable(name, "connector name")
    check_storable(dict(config), "config")


def _masked_pool(pool: dict[str, Any]) -> dict[str, Any]:
    """A pool's Spark conf can hold credentials (e.g. `spark.hadoop.fs.s3a.secret.key`)."""
    return {**pool, "conf": mask_config(pool["conf"])}


def _info_dict(info: ConnectorInfo) -> dict[str, Any]:
    return {
        "name": info.name,
        "config": mask_config({**info.config, "name": info.name}),
        "tasks": [{"connector": info.name, "task": i} for i in range(len(info.tasks))],
        "type": info.type,
    }


def _status_dict(st: ConnectorStatus) -> dict[str, Any]:
    connector: dict[str, Any] = {"state": st.state, "worker_id": st.worker_id or WORKER_ID}
    if st.trace:
        connector["trace"] = mask_text(st.trace)
    tasks = []
    for t in st.tasks:
        task: dict[str, Any] = {"id": t.id, "state": t.state, "worker_id": t.worker_id or WORKER_ID}
        if t.trace:
            task["trace"] = mask_text(t.trace)
        if t.errors:  # Kafka's task-error-metrics, as totals over the task's runs (an extension)
            task["errors"] = dict(t.errors)
        tasks.append(task)
    return {"name": st.name, "connector": connector, "tasks": tasks, "type": st.type}
