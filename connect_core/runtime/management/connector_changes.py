"""Changing connectors: create, replace (PUT), apply, patch, delete, target states, restarts and
triggering a run. Every config is checked by the runtime's own validation; every answer is masked."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from connect_core.runtime.airflow_client import AirflowClient, dag_id_for
from connect_core.runtime.context import check_new_name
from connect_core.runtime.management.connectors import ConnectorReads
from connect_core.runtime.management.shapes import info_of
from connect_core.runtime.security import mask_text
from connect_core.runtime.store.connectors import ConnectorExistsError, ConnectorInfo
from connect_core.runtime.store.db import check_storable
from connect_core.runtime.store.states import TARGET_STATES, ConnectorState, TargetState
from connect_core.runtime.validation import connector_config_model
from connect_core.sdk import Signal
from connect_core.sdk._keys import shown_key
from connect_core.sdk.errors import ConfigError, ConflictError, ConnectError, NotFoundError, RetriableError
from connect_core.sdk.signals import signal_problems

__all__ = ["ApplyAction", "ConnectorChanges"]

#: What `apply` did (or, in a dry run, would do) to a connector.
ApplyAction = Literal["created", "updated", "unchanged"]

#: Rounds of replace-then-create a PUT makes while concurrent creates and deletes of its name race it.
_PUT_ATTEMPTS = 5
#: How a re-read's rows replace a sink's (`connect resync --mode`), and the longest table name taken.
RESYNC_MODES = ("retain", "replace")
_MAX_TABLE = 300


class _Unchanged(Exception):
    """Raised inside a config change to leave the connector as it is."""


class ConnectorChanges(ConnectorReads):
    def create(self, name: str, config: Mapping[str, Any], initial_state: str = TargetState.RUNNING) -> dict[str, Any]:
        _check_initial_state(initial_state)
        _check_input(name, config)
        created = self.rt.create_connector(name, config, target_state=initial_state)
        self._wrote()
        # The create's own result: a read after it could meet a concurrent delete and say 404.
        return info_of(created)

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
        self, name: str, config: Mapping[str, Any], *, dry_run: bool = False, initial_state: str = TargetState.RUNNING
    ) -> dict[str, Any]:
        """Make the connector's config `config`, as `kubectl apply` does: create it if missing, replace
        its config if it differs, else leave it as it is (no new config version, no fencing, no
        rebalance). The config is validated in every case, also in a dry run, which writes nothing.

        Returns `{"name", "action", "changed", "type", "tasks"}`: `changed` lists the config keys
        that differ (keys only: values can be secrets), `tasks` how many tasks the config makes.
        """
        _check_initial_state(initial_state)
        _check_input(name, config)
        try:
            current: ConnectorInfo | None = self.rt.connectors.get(name)
        except NotFoundError:
            current = None
        validated = self._validated_for_apply(name, config, None if current is None else current.config)
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

    def _validated_for_apply(
        self, name: str, config: Mapping[str, Any], previous: Mapping[str, Any] | None
    ) -> dict[str, Any]:
        """The runtime's validation, and for a new connector (no `previous` config) its name's: every
        problem in one error."""
        problems: list[ConfigError] = []
        if previous is None:  # a stored name may predate the rule (it can still be updated); a new one must follow it
            try:
                check_new_name(name)
            except ConfigError as exc:
                problems.append(exc)
        try:
            validated = self.rt.validated(name, config, previous)
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
                self._wrote()
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
        self._wrote()
        return "updated"

    def _replace(self, name: str, config: Mapping[str, Any]) -> dict[str, Any]:
        replaced = self.rt.update_connector(name, config)
        self._wrote()
        return info_of(replaced)

    def patch_config(self, name: str, patch: Mapping[str, Any]) -> dict[str, Any]:
        """Kafka's PATCH: keys with null values are removed, others set.

        The merge happens under the connector's row lock, on the config as it is then: of
        concurrent PATCHes each sees the previous one's keys, none is lost.
        """
        _check_input(name, patch)

        def patched(current: dict[str, Any]) -> dict[str, Any]:
            previous = dict(current)
            for key, value in patch.items():
                if value is None:
                    current.pop(key, None)
                else:
                    current[key] = value
            # The runtime's own validation (as create and PUT): one definition of a valid config.
            return self.rt.validated(name, current, previous)

        patched_info = self.rt.connectors.modify_config(name, patched)
        self.rt.place_new_work(name)
        self._wrote()
        return info_of(patched_info)

    def delete(self, name: str) -> None:
        self.rt.delete_connector(name)
        self._wrote()

    def set_state(self, name: str, state: str) -> str | None:
        """Set the target state (RUNNING, PAUSED, STOPPED); returns a warning to show, if any."""
        warning = self.rt.set_target_state(name, state)
        self._wrote()
        return warning

    def accept_schema(self, name: str, topics: Sequence[str] | None = None) -> dict[str, Any]:
        """Accept what the connector paused on: its next run lets the change through (propagated to
        the target) and its commit makes the shape the connector's. The failed tasks are cleared and
        a paused connector resumed (with Airflow, a run starts now); a stopped one stays stopped."""
        paused = self.rt.connectors.get(name).target_state == TargetState.PAUSED  # 404 for an unknown one
        if topics is not None:
            if not topics:
                raise ConfigError(
                    "name at least one topic whose change to accept, or none for all", {"topics": ["empty"]}
                )
            check_storable(list(topics), "topics")  # a NUL or a lone surrogate: a 400, not a failed query
        accepted = self.rt.connectors.schemas.accept(name, list(topics) if topics is not None else None)
        if not accepted:
            raise ConflictError(
                f"connector `{name}` has no schema change{' of those topics' if topics else ''} to accept"
            )
        # a connector paused (by the change, or by hand) resumes; one stopped by an operator stays so
        warning = self.rt.set_target_state(name, TargetState.RUNNING) if paused else None
        failed = [t["id"] for t in self.status(name)["tasks"] if t["state"] == ConnectorState.FAILED]
        self.rt.connectors.reset_task_states(name, failed)
        self._wrote()
        self._maybe_trigger(name)
        return {"name": name, "accepted": accepted, "resumed": paused, "warning": warning}

    def send_signal(
        self, name: str, signal_id: str | None, signal_type: str, data: Mapping[str, Any]
    ) -> dict[str, Any]:
        """Queue a signal for the connector's next run (the `rest` channel), checked first: the
        connector must act on signals and have the channel enabled, the signal must be well formed
        and take only the options the connector acts on, and the connector must be able to act on it
        (`check_signal`: a 400 naming the tables it cannot, a 503 when the source did not answer).
        With Airflow, a run starts now."""
        info = self.rt.connectors.get(name)  # 404 for an unknown one
        plugin: Any = self.rt.registry.resolve(info.connector_class).cls
        if not getattr(plugin, "accepts_signals", False):
            raise ConfigError(f"connector `{name}` does not act on signals", {"connector": ["takes no signals"]})
        model = connector_config_model(plugin).model_validate(info.config)  # read as it was validated
        if "rest" not in getattr(model, "signal_enabled_channels", ["rest"]):
            raise ConfigError(
                f"connector `{name}` does not take signals over REST: add `rest` to `signal.enabled.channels`",
                {"signal.enabled.channels": ["`rest` not enabled"]},
            )
        problems = signal_problems(signal_type, data, getattr(plugin, "signal_options", ()))
        if signal_id is not None and (not isinstance(signal_id, str) or not 0 < len(signal_id) <= 200):
            problems["id"] = ["at most 200 characters"]
        if problems:
            raise ConfigError(
                "the signal is invalid: " + "; ".join(f"`{k}` {v[0]}" for k, v in problems.items()), problems
            )
        check_storable([signal_id or "", dict(data)], "signal")
        shown_id = signal_id or uuid.uuid4().hex
        # against the source itself (its tables, their keys, a filter's columns), bounded by the connector
        plugin().check_signal(model, Signal(shown_id, signal_type, data))
        parts = _parts_by_task(plugin(), model, info.tasks, Signal(shown_id, signal_type, data))
        queued = self.rt.connectors.signals.send(name, shown_id, signal_type, data, parts=parts)
        if queued is None:
            raise ConflictError(f"connector `{name}` has too many signals waiting for a run: let it run first")
        self._wrote()
        self._maybe_trigger(name)
        return {"name": name, "id": shown_id, "type": signal_type}

    def resync(self, name: str, table: str, mode: str = "retain") -> dict[str, Any]:
        """Queue a re-read of one of the source's tables (`connect resync`; Airbyte's refresh): its rows
        are read again from the beginning while the other tables keep their positions; under `replace`
        the sinks swap the re-read copy in at its end. Stored as a signal (`execute-snapshot` with a
        `resync-mode`) for the task reading the table, consumed by the commit of the run that begins
        the re-read. ConfigError for a table or mode it cannot take; ConflictError while one of the
        table runs or waits. With Airflow, a run starts now."""
        info = self.rt.connectors.get(name)  # 404 for an unknown one
        problems: dict[str, list[str]] = {}
        if mode not in RESYNC_MODES:
            problems["mode"] = [f"must be one of {', '.join(RESYNC_MODES)}"]
        if not isinstance(table, str) or not 0 < len(table) <= _MAX_TABLE or not table.isprintable():
            problems["table"] = [f"a table name of 1 to {_MAX_TABLE} printable characters"]
        if problems:
            raise ConfigError(
                "the re-read is invalid: " + "; ".join(f"`{k}` {v[0]}" for k, v in problems.items()), problems
            )
        plugin: Any = self.rt.registry.resolve(info.connector_class).cls
        if info.type != "source" or not getattr(plugin, "accepts_signals", False):
            raise ConfigError(
                f"connector `{name}` does not re-read tables (`connect resync` is for JDBC sources)",
                {"connector": ["re-reads no tables"]},
            )
        model = connector_config_model(plugin).model_validate(info.config)
        try:
            found = plugin().check_resync(model, table, self.rt.connectors.positions(name))
        except ConfigError as exc:
            raise ConfigError(f"connector `{name}`: {exc}", exc.errors or {"table": [str(exc)]}) from exc
        self._check_sinks(name, plugin().resync_topic(model, found), mode)
        data = {"data-collections": [found], "type": "incremental", "resync-mode": mode}
        shown_id = uuid.uuid4().hex
        if self.rt.connectors.signals.send(name, shown_id, "execute-snapshot", data, once_for=found) is None:
            raise ConflictError(f"connector `{name}` has too many signals waiting for a run: let it run first")
        self._wrote()
        self._maybe_trigger(name)
        return {"name": name, "id": shown_id, "table": found, "mode": mode}

    def _check_sinks(self, name: str, topic: str | None, mode: str) -> None:
        """Every sink reading `topic` can take its re-read in `mode` (`SinkConnector.resync_problem`), or
        a ConfigError naming each that cannot and why: a `replace` into a table other topics write
        too would drop their rows, a `retain` into an insert-only table would fail on every row."""
        if topic is None:
            return
        problems = []
        for sink in self.rt.topics.users(topic).readers:
            try:
                info = self.rt.connectors.get(sink)
                plugin: Any = self.rt.registry.resolve(info.connector_class).cls
                model = connector_config_model(plugin).model_validate(info.config)
            except (ConfigError, NotFoundError):  # deleted meanwhile, or its plugin gone: its own status says
                continue
            try:
                why = plugin().resync_problem(model, topic, mode)
            except ConnectError:
                raise
            except Exception as exc:  # its target did not answer: nothing is queued, ask again
                raise RetriableError(
                    f"sink `{sink}` could not be asked whether it can take the re-read: {mask_text(str(exc))[:300]}"
                ) from exc
            if why:
                problems.append(f"sink `{sink}`: {why}")
        if problems:
            raise ConfigError(
                f"connector `{name}`: a {mode} re-read of topic `{topic}` cannot be taken by " + "; ".join(problems),
                {"mode": problems},
            )

    def restart(self, name: str, *, include_tasks: bool = False, only_failed: bool = False) -> dict[str, Any]:
        """There is no long-lived connector process to restart: a restart clears FAILED task states
        (so they run again at the next trigger or schedule) and, with Airflow, triggers a run now."""
        status = self.status(name)
        restarted = [
            t["id"]
            for t in status["tasks"]
            if include_tasks and (not only_failed or t["state"] == ConnectorState.FAILED)
        ]
        self.rt.connectors.reset_task_states(name, restarted)
        self._wrote()
        run_id = self._maybe_trigger(name)
        return {**self.status(name), "dag_run_id": run_id}

    def restart_task(self, name: str, task: int) -> None:
        self.task_status(name, task)  # 404 for an unknown task
        self.rt.connectors.reset_task_states(name, [task])
        self._wrote()
        self._maybe_trigger(name)

    def trigger(self, name: str) -> dict[str, Any]:
        """Start a run of the connector's DAG now, through Airflow's REST API."""
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


def _check_initial_state(initial_state: str) -> None:
    if initial_state not in TARGET_STATES:
        raise ConfigError(
            f"`initial_state` must be one of {', '.join(TARGET_STATES)}, not `{initial_state}`",
            {"initial_state": [f"must be one of {', '.join(TARGET_STATES)}"]},
        )


def _check_input(name: str, config: Mapping[str, Any]) -> None:
    """What the store could not hold answers 400 naming the key, before validation sees it."""
    check_storable(name, "connector name")
    check_storable(dict(config), "config")


def _changed_keys(current: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """Keys whose values differ between two configs, as they may be shown (`shown_key`: a key that
    holds a secret in its name, Debezium's `column.mask.hash.<alg>.with.salt.<salt>`, with it masked;
    two that differ only there are listed once); `name` is not config (it is the connector's)."""
    keys = (set(current) | set(new)) - {"name"}
    return sorted({shown_key(k) for k in keys if k not in current or k not in new or current[k] != new[k]})


def _parts_by_task(plugin: Any, model: Any, tasks: Sequence[Mapping[str, Any]], signal: Signal) -> list[dict[str, Any]]:
    """A signal whose tables different tasks read, as one part per task (each naming that task's
    tables; `SourceConnector.signal_task` routes it): a task acts on the tables it reads, and its
    commit consumes only its part. Empty: the signal goes whole to one task."""
    tables = [str(t) for t in signal.data.get("data-collections") or []]
    if len(tables) < 2 or len(tasks) < 2:
        return []
    by_task: dict[int, list[str]] = {}
    for table in tables:
        one = Signal(signal.id, signal.type, {**signal.data, "data-collections": [table]})
        by_task.setdefault(plugin.signal_task(model, tasks, one), []).append(table)
    if len(by_task) < 2:
        return []
    return [{**signal.data, "data-collections": names} for names in by_task.values()]
