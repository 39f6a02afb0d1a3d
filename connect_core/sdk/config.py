"""Typed connector configuration, keyed like Kafka Connect and RocketMQ Connect.

A connector declares a pydantic model (a subclass of `ConnectorConfig` or
`SinkConnectorConfig`); the runtime validates the user's JSON against it and
reports every problem at once. Keys keep their dotted Connect spelling
(`connector.class`, `tasks.max`); RocketMQ's and Kafka's spellings of the same
setting are both accepted through alias choices.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AliasChoices, BaseModel, BeforeValidator, ConfigDict, Field

__all__ = ["ConnectorConfig", "SinkConnectorConfig", "TopicList", "split_list"]


def split_list(value: Any) -> Any:
    """Accept `"a,b"` as well as `["a", "b"]`, as Kafka's LIST type does."""
    if isinstance(value, str):
        return [item.strip() for item in value.split(",") if item.strip()]
    return value


TopicList = Annotated[list[str], BeforeValidator(split_list)]


class ConnectorConfig(BaseModel):
    """Settings every connector has. Unknown keys are kept (as in Kafka Connect)."""

    model_config = ConfigDict(extra="allow", populate_by_name=True, frozen=True)

    name: str | None = Field(
        default=None,
        description="Unique name of the connector; taken from the URL or CLI argument when absent.",
    )
    connector_class: str = Field(
        alias="connector.class",
        description=(
            "The connector plugin: an entry-point name, a fully qualified class name, "
            "or a RocketMQ/Kafka class name that is an alias of a built-in connector."
        ),
    )
    tasks_max: int = Field(
        default=1,
        alias="tasks.max",
        ge=1,
        le=1024,
        description="Upper bound on the number of tasks the connector is split into.",
    )
    schedule: str | None = Field(
        default="@hourly",
        description=(
            "When the connector's DAG runs: a cron expression, an Airflow preset (`@hourly`), an interval "
            "(`30s`, `15m`, `2h`, `1d`), `@continuous`, or `none` for runs triggered only by hand or REST. For a sink this is an "
            "extra schedule on top of running whenever its topics get new data (default: none for sinks)."
        ),
    )
    retries: int = Field(default=1, ge=0, le=100, description="Retries of a failed task run (Airflow task retries).")
    retry_delay_seconds: int = Field(
        default=60, alias="retry.delay.seconds", ge=0, description="Wait before retrying a failed task run."
    )
    owner: str = Field(default="connect", min_length=1, description="Owner shown on the connector's DAG.")
    precheck: bool = Field(
        default=True,
        description="Before a run, ask the connector (without Spark) whether anything is new; skip the run if not.",
    )


class SinkConnectorConfig(ConnectorConfig):
    """Settings every sink connector has: the topics it consumes."""

    schedule: str | None = Field(
        default=None,
        description="Extra cron/preset schedule of the sink's DAG; it also runs whenever its topics get new data.",
    )
    topics: TopicList = Field(
        validation_alias=AliasChoices("connect.topicnames", "topics"),
        min_length=1,
        description="Topics to copy from: a list or a comma-separated string (`connect.topicnames` or `topics`).",
    )
