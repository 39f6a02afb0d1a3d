"""`Management`: what an admin can do (Kafka Connect's `Herder`), as one typed interface.

Two implementations: `LocalManagement` on this process's runtime (the REST API and the CLI
without `--url` use it), and `connect_core.rest.client.RestClient` over a REST API (the CLI with
`--url`). mypy holds both to this interface where the CLI takes one (`cli._app.backend`).

Values are JSON-able, configs masked; errors are the SDK's (`NotFoundError`, `ConfigError`,
`ConnectorExistsError`, `ConflictError`, `RetriableError`).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any, Protocol

from connect_core.runtime.store.states import TargetState

__all__ = ["Management"]


class Management(Protocol):
    # -- connectors: reading ---------------------------------------------------------------

    def names(self) -> list[str]: ...

    def expanded(self, expand: Collection[str]) -> dict[str, Any]:
        """Kafka's `GET /connectors?expand=…`: each connector's `status` and/or `info`, by name."""
        ...

    def info(self, name: str) -> dict[str, Any]: ...

    def config(self, name: str) -> dict[str, Any]: ...

    def status(self, name: str) -> dict[str, Any]: ...

    def task_status(self, name: str, task: int) -> dict[str, Any]: ...

    def tasks(self, name: str) -> list[dict[str, Any]]: ...

    def topics(self, name: str) -> dict[str, Any]:
        """Kafka's active topics (KIP-558): `{name: {"topics": [...]}}`."""
        ...

    def reset_topics(self, name: str) -> None: ...

    def runs(self, name: str, limit: int = 10) -> list[dict[str, Any]]: ...

    # -- connectors: changing --------------------------------------------------------------

    def create(
        self, name: str, config: Mapping[str, Any], initial_state: str = TargetState.RUNNING
    ) -> dict[str, Any]: ...

    def put_config(self, name: str, config: Mapping[str, Any]) -> tuple[bool, dict[str, Any]]:
        """Create or replace: (created, info)."""
        ...

    def apply(
        self, name: str, config: Mapping[str, Any], *, dry_run: bool = False, initial_state: str = TargetState.RUNNING
    ) -> dict[str, Any]:
        """Create, update or leave as it is: `{"name", "action", "changed", "type", "tasks"}`."""
        ...

    def patch_config(self, name: str, patch: Mapping[str, Any]) -> dict[str, Any]: ...

    def delete(self, name: str) -> None: ...

    def set_state(self, name: str, state: str) -> str | None:
        """RUNNING, PAUSED or STOPPED; a warning to show, if any."""
        ...

    def restart(self, name: str, *, include_tasks: bool = False, only_failed: bool = False) -> dict[str, Any]: ...

    def restart_task(self, name: str, task: int) -> None: ...

    def trigger(self, name: str) -> dict[str, Any]:
        """A run of the connector's DAG now: `{"name", "dag_id", "dag_run_id"}`."""
        ...

    # -- schema contracts ------------------------------------------------------------------

    def schemas(self, name: str) -> dict[str, Any]:
        """The shape the connector last let through per topic, and the change it paused on if any:
        `{"name", "topics": {topic: {"fingerprint", "schema", "run_id", "pending"}}}`."""
        ...

    def accept_schema(self, name: str, topics: Sequence[str] | None = None) -> dict[str, Any]:
        """Accept the changes the connector paused on (of `topics`, or all) and resume it:
        `{"name", "accepted": [topic…], "warning"}`; ConflictError when none is pending."""
        ...

    def send_signal(
        self, name: str, signal_id: str | None, signal_type: str, data: Mapping[str, Any]
    ) -> dict[str, Any]:
        """Queue a signal (Debezium's) for the connector's next run: `{"name", "id", "type"}`. ConfigError
        for a signal it cannot take, ConflictError when too many wait already."""
        ...

    def resync(self, name: str, table: str, mode: str = "retain") -> dict[str, Any]:
        """Queue a re-read of one table of a JDBC source (`retain` or `replace`): `{"name", "id", "table",
        "mode"}`. ConfigError for a table or mode it cannot take, ConflictError while one runs or waits."""
        ...

    # -- offsets ---------------------------------------------------------------------------

    def offsets(self, name: str) -> dict[str, Any]: ...

    def alter_offsets(self, name: str, offsets: Sequence[Mapping[str, Any]]) -> dict[str, str]: ...

    def reset_offsets(self, name: str, to_time: str | None = None) -> dict[str, str]: ...

    # -- Spark pools, rebalancing, RocketMQ's cluster views ---------------------------------

    def pools(self) -> list[dict[str, Any]]: ...

    def pool(self, name: str) -> dict[str, Any]: ...

    def put_pool(self, name: str, spec: Mapping[str, Any]) -> tuple[bool, dict[str, Any]]:
        """Register or update: (created, pool)."""
        ...

    def delete_pool(self, name: str) -> None: ...

    def pool_heartbeat(self, name: str) -> None: ...

    def rebalance(self, strategy: str | None = None) -> dict[str, Any]: ...

    def rebalances(self, limit: int = 20) -> list[dict[str, Any]]: ...

    def cluster_info(self) -> list[dict[str, Any]]: ...

    def allocated_connectors(self, pool: str | None = None) -> dict[str, Any]: ...

    def allocated_tasks(self, pool: str | None = None) -> dict[str, Any]: ...

    # -- topics ----------------------------------------------------------------------------

    def list_topics(self) -> list[dict[str, Any]]: ...

    def describe_topic(self, name: str) -> dict[str, Any]: ...

    def topic_schema(self, name: str, version: int | None = None) -> dict[str, Any]:
        """A version of the topic's schema history (None: the latest): `{"topic", "version", "id",
        "fingerprint", "run_id", "connector", "created_at", "schema"}`."""
        ...

    def set_topic_config(self, name: str, config: Mapping[str, Any]) -> dict[str, Any]: ...

    def apply_topic_retention(self, dry_run: bool = False) -> dict[str, Any]: ...

    def delete_topic(self, name: str, force: bool = False) -> dict[str, Any]: ...

    # -- plugins ---------------------------------------------------------------------------

    def plugins(self) -> list[dict[str, Any]]:
        """Connector plugins, transformations and predicates."""
        ...

    def plugin_config(self, plugin: str) -> list[dict[str, Any]]: ...

    def validate(self, plugin: str | None, config: Mapping[str, Any]) -> dict[str, Any]:
        """Kafka's ConfigInfos of `config`; `plugin` (when given) is its `connector.class`."""
        ...

    def reload_plugins(self) -> list[str]: ...
