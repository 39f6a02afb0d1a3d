"""Connector management as data: what both REST dialects and the CLI do, in Kafka Connect's shapes.

HTTP-agnostic: methods take and return JSON-able values and raise the SDK's
errors (`NotFoundError` → 404, `ConnectorExistsError` → 409, `ConfigError` →
400). Every config that leaves here is masked.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from connect_core import __version__
from connect_core.runtime.airflow_client import AirflowClient, dag_id_for
from connect_core.runtime.cluster.allocation import STRATEGIES
from connect_core.runtime.cluster.pools import PoolStore
from connect_core.runtime.cluster.rebalancer import Rebalancer, sync_airflow_pools
from connect_core.runtime.context import Runtime, check_new_name
from connect_core.runtime.security import mask_config, mask_text
from connect_core.runtime.store.changes import ChangeListener
from connect_core.runtime.store.connectors import (
    TARGET_STATES,
    ConnectorExistsError,
    ConnectorInfo,
    ConnectorOverview,
    ConnectorStatus,
    Listing,
    Page,
)
from connect_core.runtime.store.db import check_storable
from connect_core.runtime.validation import config_infos, transform_definitions
from connect_core.sdk.errors import ConfigError, ConflictError, ConnectError, NotFoundError
from connect_core.sdk.records import SourcePosition, TopicPartition

__all__ = ["ApplyAction", "ConnectService", "NotStoppedError", "expand_kinds", "expanded_dict", "server_info"]

WORKER_ID = "connect-core"
#: Kafka's bounds of a topic partition (int32) and an offset (int64), which the store's columns share.
_MAX_PARTITION = 2**31 - 1
_MAX_OFFSET = 2**63 - 1
#: Rounds of replace-then-create a PUT makes while concurrent creates and deletes of its name race it.
_PUT_ATTEMPTS = 5


def server_info() -> dict[str, Any]:
    """Kafka's `GET /`: needs no database, so it answers while the metadata store is down."""
    return {"version": __version__, "commit": "connect-core", "kafka_cluster_id": "connect-core"}


class NotStoppedError(ConfigError):
    """An operation that needs a STOPPED connector (as Kafka Connect's offset changes do)."""


#: What `apply` did (or, in a dry run, would do) to a connector.
ApplyAction = Literal["created", "updated", "unchanged"]


class _Unchanged(Exception):
    """Raised inside a config change to leave the connector as it is."""


#: Statuses kept as JSON at most (one per connector read since the store last changed).
_MAX_KEPT_STATUSES = 20_000


@dataclass(frozen=True)
class _Kept:
    """JSON as of a change count: current while the listener has heard of no later change."""

    version: int
    body: bytes
    #: when its read began (time.monotonic)
    started: float = 0.0


class ConnectService:
    """Connector management.

    A single connector's info, config, status or tasks is one query for that connector, whatever
    the number of connectors. A whole list (Kafka's `GET /connectors`, RocketMQ's list) is one
    query per kind of data it shows. The JSON of whole lists and of single statuses is kept until
    the store's change counter moves: the counter is followed by LISTEN/NOTIFY, so a hot read of
    a store that did not change costs no query. Pages are read, never kept.
    """

    def __init__(self, runtime: Runtime) -> None:
        self.rt = runtime
        self._lists: dict[str, _Kept] = {}
        self._statuses: dict[str, _Kept] = {}
        self._building: dict[str, threading.Lock] = {}
        self._start = threading.Lock()
        #: Bumped by every write of this service: what was read before a write is not kept after it.
        self._writes = 0
        self._changes: ChangeListener | None = None

    def close(self) -> None:
        if self._changes is not None:
            self._changes.close()

    # -- reading --------------------------------------------------------------

    def server_info(self) -> dict[str, Any]:
        return server_info()

    def check_store(self) -> str | None:
        """One round trip to the metadata store (for /health): why this server cannot serve yet (the
        schema is not at this code's migrations), or None; raises what the driver raised."""
        from connect_core.runtime.store import migrate

        with self.rt.engine.connect() as conn:
            at = migrate.current(conn)
        if at != migrate.head():
            return (
                f"the metadata schema is at revision {at or 'none'}, this server needs {migrate.head()}: "
                "run `connect db upgrade` (servers also upgrade it when they start)"
            )
        return None

    def _changed(self) -> None:
        """This service wrote: drop what it keeps, so that its next read sees the write."""
        self._writes += 1
        self._lists, self._statuses = {}, {}

    def _current(self, kept: _Kept | None) -> bytes | None:
        """`kept`'s JSON if no later change was heard, without any I/O (for async endpoints). The
        first call starts the listener that follows the change counter (only servers need it)."""
        if self._changes is None:
            with self._start:
                if self._changes is None:
                    self._changes = ChangeListener(self.rt.engine)
            return None
        # While the listener is disconnected it hears no NOTIFY, so nothing kept is served: when
        # the store is down, reads answer 503 rather than a state nobody can vouch for.
        if kept is None or not self._changes.connected or kept.version < self._changes.version():
            return None
        return kept.body

    def _vouched_version(self) -> int | None:
        """The change count the listener has heard, read before a query: what the query reads is
        at least that new. None while the listener cannot vouch for it."""
        changes = self._changes
        return changes.version() if changes is not None and changes.connected and changes.version() >= 0 else None

    def cached_list(self, view: str) -> bytes | None:
        """The whole list's JSON in `view` if it is current (no I/O); else None."""
        return self._current(self._lists.get(view))

    def cached_status(self, name: str) -> bytes | None:
        """The connector's status JSON if it is current (no I/O); else None."""
        return self._current(self._statuses.get(name))

    def status_json(self, name: str) -> bytes:
        """The connector's status as JSON: one query for that connector, kept until the store changes."""
        vouched, writes = self._vouched_version(), self._writes
        body = json.dumps(self.status(name)).encode()
        if vouched is not None and writes == self._writes:  # no write of ours since the read began
            if len(self._statuses) >= _MAX_KEPT_STATUSES:
                self._statuses = {}
            self._statuses[name] = _Kept(vouched, body)
        return body

    def list_json(self, view: str, expand: Collection[str], render: Callable[[Listing], Any]) -> bytes:
        """The whole list's JSON in `view`: `render` of every connector with `expand` (`info`,
        `status`), kept until the store changes. One rebuild at a time per view: the requests
        that waited for it take its result, as it was read after they arrived."""
        arrived = time.monotonic()
        with self._building.setdefault(view, threading.Lock()):
            kept = self._lists.get(view)
            if kept is not None and kept.started >= arrived:
                return kept.body
            version = self.rt.connectors.change_count()
            if kept is not None and kept.version >= version:
                return kept.body
            writes, started = self._writes, time.monotonic()
            listing = self.listing(expand, Page())
            body = json.dumps(render(listing)).encode()
            if writes == self._writes:  # no write of ours since the read began: it is current
                self._lists[view] = _Kept(listing.version, body, started)
            return body

    def listing(self, expand: Collection[str], page: Page) -> Listing:
        """A page of connectors with what `expand` asks (`info`, `status`): one query per kind."""
        shown = expand_kinds(expand)
        return self.rt.connectors.listing(page, info="info" in shown, status="status" in shown)

    def names(self, page: Page | None = None) -> list[str]:
        return self.rt.connectors.names(page)

    def expanded(self, expand: Collection[str], page: Page | None = None) -> dict[str, Any]:
        """Kafka's `GET /connectors?expand=…`: each connector's status and/or info, by name."""
        return expanded_dict(self.listing(expand, page or Page()), expand)

    def info(self, name: str) -> dict[str, Any]:
        return _info_dict(self.rt.connectors.overview(name))

    def config(self, name: str) -> dict[str, Any]:
        return mask_config({**self.rt.connectors.overview(name).config, "name": name})

    def status(self, name: str) -> dict[str, Any]:
        return _status_dict(self.rt.connectors.status(name))

    def task_status(self, name: str, task: int) -> dict[str, Any]:
        for t in self.status(name)["tasks"]:
            if t["id"] == task:
                return dict(t)
        raise NotFoundError(f"task {task} of connector `{name}` not found")

    def tasks(self, name: str) -> list[dict[str, Any]]:
        info = self.rt.connectors.get(name)
        return [{"id": {"connector": name, "task": i}, "config": mask_config(cfg)} for i, cfg in enumerate(info.tasks)]

    def topics(self, name: str) -> dict[str, Any]:
        """Kafka's active topics (KIP-558): those the connector wrote or read since its creation or the
        last reset, as its runs committed them (not its config: a CDC source names its topics as it finds
        tables, a sink's configured topic may never have had data)."""
        return {name: {"topics": self.rt.connectors.active_topics(name)}}

    def reset_topics(self, name: str) -> None:
        self.rt.connectors.reset_topics(name)

    def runs(self, name: str, limit: int = 10) -> list[dict[str, Any]]:
        """The last task runs (an extension of Kafka's API: micro-batch runs have no Kafka equivalent)."""
        self.rt.connectors.get(name)
        return [
            {**r, "error": mask_text(r["error"]) if r["error"] else None}
            for r in self.rt.connectors.last_runs(name, limit=limit)
        ]

    # -- Spark pools (the workers) and RocketMQ's cluster views ----------------

    def _pools(self) -> PoolStore:
        return self.rt.pools

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
        return {
            name: mask_config({**info.config, "name": name})
            for name, info in self.rt.connectors.get_many(sorted(names)).items()
        }

    def allocated_tasks(self, pool: str | None = None) -> dict[str, Any]:
        """Configs of the tasks assigned to `pool` (every pool when None), by connector."""
        assigned = {(w.connector, w.task) for w, (p, _) in self._pools().assignment().items() if pool in (None, p)}
        return {
            name: [mask_config(cfg) for i, cfg in enumerate(info.tasks) if (name, i) in assigned]
            for name, info in self.rt.connectors.get_many(sorted({c for c, _ in assigned})).items()
        }

    # -- changing -------------------------------------------------------------

    def create(self, name: str, config: Mapping[str, Any], initial_state: str = "RUNNING") -> dict[str, Any]:
        if initial_state not in TARGET_STATES:
            raise ConfigError(
                f"`initial_state` must be one of {', '.join(TARGET_STATES)}, not `{initial_state}`",
                {"initial_state": [f"must be one of {', '.join(TARGET_STATES)}"]},
            )
        _check_input(name, config)
        created = self.rt.create_connector(name, config, target_state=initial_state)
        self._changed()
        # The create's own result: a read after it could meet a concurrent delete and say 404.
        return _info_of(created)

    def put_config(self, name: str, config: Mapping[str, Any]) -> tuple[bool, dict[str, Any]]:
        """Create or replace; returns (created, info).

        Tried as a replace first, then as a create; a create that loses to a concurrent one
        replaces what that one created, as a PUT does: concurrent PUTs never answer 409.
        """
        _check_input(name, config)
        # Each answer comes from its own write: a replace that finds none creates, a create that
        # finds one replaces. Racing deletes and creates can turn each into the other a few times.
        for _attempt in range(_PUT_ATTEMPTS):
            try:
                return False, self._replace(name, config)
            except NotFoundError:
                pass
            try:
                return True, self.create(name, config)
            except ConnectorExistsError:
                continue
        raise ConflictError(
            f"connector `{name}` was created and deleted concurrently {_PUT_ATTEMPTS} times while this PUT "
            "ran: read its current state and retry"
        )

    def apply(
        self, name: str, config: Mapping[str, Any], *, dry_run: bool = False, initial_state: str = "RUNNING"
    ) -> dict[str, Any]:
        """Make the connector's config `config`, as `kubectl apply` does: create it if missing, replace
        its config if it differs, else leave it as it is (no new config version, no fencing, no
        rebalance). The config is validated in every case, also in a dry run, which writes nothing.

        Returns `{"name", "action", "changed", "type", "tasks"}`: `changed` lists the config keys
        that differ (keys only: values can be secrets), `tasks` how many tasks the config makes.
        """
        if initial_state not in TARGET_STATES:
            raise ConfigError(
                f"`initial_state` must be one of {', '.join(TARGET_STATES)}, not `{initial_state}`",
                {"initial_state": [f"must be one of {', '.join(TARGET_STATES)}"]},
            )
        _check_input(name, config)
        try:
            current: ConnectorInfo | None = self.rt.connectors.get(name)
        except NotFoundError:
            current = None
        validated = self._validated_for_apply(name, config, new=current is None)
        changed = _changed_keys(current.config if current else {}, validated["config"])
        action: ApplyAction = "created" if current is None else "updated" if changed else "unchanged"
        if not dry_run and action != "unchanged":
            action = self._apply(name, config, validated, initial_state, create=current is None)
        return {
            "name": name,
            "action": action,
            "changed": changed,
            "type": validated["type"],
            "tasks": len(validated["task_configs"]),
        }

    def _validated_for_apply(self, name: str, config: Mapping[str, Any], *, new: bool) -> dict[str, Any]:
        """The runtime's validation, and for a new connector its name's: every problem in one error."""
        problems: list[ConfigError] = []
        if new:  # a stored name may predate the rule (it can still be updated); a new one must follow it
            try:
                check_new_name(name)
            except ConfigError as exc:
                problems.append(exc)
        try:
            validated = self.rt.validated(name, config)
        except ConfigError as exc:
            problems.append(exc)
        if len(problems) == 1:
            raise problems[0]
        if problems:
            errors: dict[str, list[str]] = {}
            for problem in problems:
                for key, found in problem.errors.items():
                    errors.setdefault(key, []).extend(found)
            raise ConfigError("\n".join(str(p) for p in problems), errors)
        return validated

    def _apply(
        self, name: str, config: Mapping[str, Any], validated: dict[str, Any], initial_state: str, *, create: bool
    ) -> ApplyAction:
        """Create, or replace the config unless it is (now, under the connector's row lock) the same."""
        if create:
            try:
                self.rt.create_connector(name, config, target_state=initial_state)
                self._changed()
                return "created"
            except ConnectorExistsError:
                pass  # created meanwhile (a concurrent apply or create): compare with that one

        def replace(current: dict[str, Any]) -> dict[str, Any]:
            if not _changed_keys(current, validated["config"]):
                raise _Unchanged  # rolls the transaction back: nothing written
            return validated

        try:
            self.rt.connectors.modify_config(name, replace)
        except _Unchanged:
            return "unchanged"
        self.rt.place_new_work(name)
        self._changed()
        return "updated"

    def _replace(self, name: str, config: Mapping[str, Any]) -> dict[str, Any]:
        replaced = self.rt.update_connector(name, config)
        self._changed()
        return _info_of(replaced)

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

        patched_info = self.rt.connectors.modify_config(name, patched)
        self.rt.place_new_work(name)
        self._changed()
        return _info_of(patched_info)

    def delete(self, name: str) -> None:
        self.rt.delete_connector(name)
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

    # -- topics ------------------------------------------------------------------------------

    def list_topics(self) -> list[dict[str, Any]]:
        """Every topic: partitions, segments and rows kept, end offsets, retention, its sinks' lag."""
        return self.rt.topics.describe(self.rt.settings.topic_retention_ms)

    def describe_topic(self, name: str) -> dict[str, Any]:
        found = self.rt.topics.describe(self.rt.settings.topic_retention_ms, only=name)
        if not found:
            raise NotFoundError(f"topic `{name}` not found")
        return found[0]

    def set_topic_config(self, name: str, config: dict[str, Any]) -> dict[str, Any]:
        """Merge `config` (`runtime.topics.config`'s keys; null: back to the default) into the topic's."""
        from connect_core.runtime.topics.config import TopicConfigError

        try:
            self.rt.topics.set_config(name, config)
        except KeyError:
            raise NotFoundError(f"topic `{name}` not found") from None
        except TopicConfigError as exc:
            raise ConfigError(str(exc), {key: [problem] for key, problem in exc.problems.items()}) from None
        return self.describe_topic(name)

    def apply_topic_retention(self, dry_run: bool = False) -> dict[str, Any]:
        """Clean the topics now (or with `dry_run` list what would happen): delete the segments past
        retention that every sink has committed, compact, merge small segments."""
        from connect_core.runtime.topics.cleaner import clean_topics

        return clean_topics(self.rt.engine, self.rt.settings.topic_retention_ms, dry_run=dry_run)

    def delete_topic(self, name: str, force: bool = False) -> dict[str, Any]:
        """Delete a topic (Kafka's admin delete): its rows, then its files. Refused (409) while a
        connector reads or writes it, unless `force`."""
        from connect_core.sdk.errors import ConflictError

        if not self.rt.topics.partitions(name):
            raise NotFoundError(f"topic `{name}` not found")
        users = self.rt.topics.users(name)
        writers = sorted({*users.writers, *self._sources_writing(name)})
        if (users.readers or writers) and not force:
            used = [f"read by {', '.join(f'`{c}`' for c in users.readers)}"] if users.readers else []
            used += [f"written by {', '.join(f'`{c}`' for c in writers)}"] if writers else []
            raise ConflictError(
                f"topic `{name}` is in use ({'; '.join(used)}): delete or reconfigure those connectors first, "
                "or delete it anyway with force (a source recreates it on its next run)"
            )
        try:
            deleted = self.rt.topics.delete_topic(name)
        except KeyError:
            raise NotFoundError(f"topic `{name}` not found") from None
        return {"topic": name, "segments": len(deleted), "rows": sum(s.row_count for s in deleted)}

    def _sources_writing(self, topic: str) -> list[str]:
        """The source connectors whose config names `topic` as an output (a stored config that no
        longer validates names none)."""
        found = []
        for info in self.rt.connectors.get_many(self.rt.connectors.names()).values():
            if info.type != "source":
                continue
            try:
                if topic in self.topics(info.name)[info.name]["topics"]:
                    found.append(info.name)
            except Exception:  # a plugin that cannot tell its topics: its committed segments still count
                continue
        return found

    def reset_offsets(self, name: str, to_time: str | None = None) -> dict[str, str]:
        """Forget the offsets; with `to_time` (ISO 8601), move a sink's to the first records
        committed at or after it, to replay from there."""
        info = self._stopped(name)
        if to_time is None:
            self.rt.reset_offsets(name)
            return {"message": "The offsets for this connector have been reset successfully"}
        if info.type != "sink":
            raise ConfigError("only a sink's offsets can be reset to a time (a source's positions are its own)")
        try:
            when = datetime.fromisoformat(to_time.replace("Z", "+00:00"))
        except ValueError:
            raise ConfigError(f"`{to_time}` is not an ISO 8601 time (2026-11-25T10:00:00Z)") from None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        config = self.rt.registry.resolve(info.connector_class).cls.config_model.model_validate(info.config)
        topics = list(getattr(config, "topics", []))
        offsets = self.rt.topics.offsets_at(topics, when)
        self.rt.alter_sink_offsets(name, dict(offsets))
        moved = ", ".join(f"{tp.topic}[{tp.partition}] → {o}" for tp, o in sorted(offsets.items())) or "no partitions"
        return {"message": f"The offsets for this connector have been reset to {when.isoformat()}: {moved}"}

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


def _changed_keys(current: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """Keys whose values differ between two configs; `name` is not config (it is the connector's)."""
    keys = (set(current) | set(new)) - {"name"}
    return sorted(k for k in keys if k not in current or k not in new or current[k] != new[k])


def _masked_pool(pool: dict[str, Any]) -> dict[str, Any]:
    """A pool's Spark conf can hold credentials (e.g. `spark.hadoop.fs.s3a.secret.key`)."""
    return {**pool, "conf": mask_config(pool["conf"])}


def expand_kinds(expand: Collection[str]) -> frozenset[str]:
    """Kafka's `expand` values, checked: `status` and/or `info`."""
    shown = frozenset(expand)
    unknown = shown - {"status", "info"}
    if unknown:
        raise ConfigError(f"unknown `expand` value(s) {sorted(unknown)}: use status and/or info")
    return shown


def expanded_dict(listing: Listing, expand: Collection[str]) -> dict[str, Any]:
    """Kafka's `GET /connectors?expand=…` body for `listing`: by name, `status` and/or `info`."""

    def entry(name: str) -> dict[str, Any]:
        shown: dict[str, Any] = {}
        if "status" in expand:
            shown["status"] = _status_dict(listing.statuses[name])
        if "info" in expand:
            shown["info"] = _info_dict(listing.overviews[name])
        return shown

    return {name: entry(name) for name in listing.names}


def _info_dict(info: ConnectorOverview) -> dict[str, Any]:
    return {
        "name": info.name,
        "config": mask_config({**info.config, "name": info.name}),
        "tasks": [{"connector": info.name, "task": i} for i in range(info.task_count)],
        "type": info.type,
    }


def _info_of(info: ConnectorInfo) -> dict[str, Any]:
    """Kafka's connector info of a connector as a write of it returned it."""
    return _info_dict(ConnectorOverview(info.name, info.type, info.config, len(info.tasks)))


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
