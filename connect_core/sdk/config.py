"""Typed connector configuration, keyed like Kafka Connect and RocketMQ Connect.

A connector declares a pydantic model (a subclass of `ConnectorConfig` or
`SinkConnectorConfig`); the runtime validates the user's JSON against it and
reports every problem at once. Keys keep their dotted Connect spelling
(`connector.class`, `tasks.max`); RocketMQ's and Kafka's spellings of the same
setting are both accepted through alias choices.
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    AliasChoices,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    create_model,
    field_validator,
)

__all__ = [
    "CRON_PRESETS",
    "WHOLE_MAX",
    "ConnectorConfig",
    "ContractMode",
    "ErrorsConfig",
    "Propagation",
    "ProvidedValue",
    "SinkConnectorConfig",
    "SourceConnectorConfig",
    "TopicList",
    "TopicName",
    "TopicNames",
    "WholeNumber",
    "check_schedule",
    "check_topic_name",
    "check_topic_prefix",
    "is_placeholder",
    "schedule_interval",
    "split_list",
    "whole_number",
]

#: Kafka's legal topic names (`Topic.validate`): these characters, 1-249 of them. Anything else
#: would break the topic's Airflow Asset URI and its storage path.
_TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]{1,249}")

#: Airflow's cron presets (plus croniter's aliases), as the 5-field cron they stand for.
CRON_PRESETS = {
    "@hourly": "0 * * * *",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@weekly": "0 0 * * 0",
    "@monthly": "0 0 1 * *",
    "@quarterly": "0 0 1 */3 *",
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
}
#: Schedules that are not a time table a sink can combine with its topics' Assets.
_SOURCE_ONLY = ("@continuous", "@once")
_NONE = ("", "none", "null")
# Linear: digits, blanks, one unit letter; nothing can backtrack.
_INTERVAL = re.compile(r"([0-9]{1,9})[ \t]*([smhd])")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}
#: Longest interval accepted (a longer one is a typo, and `timedelta` overflows on huge ones).
_MAX_INTERVAL = timedelta(days=3660)
_SCHEDULE_HELP = (
    "`none`, an interval (`30s`, `15m`, `2h`, `1d`), a preset (`@hourly`, `@daily`, `@weekly`, `@monthly`, "
    "`@quarterly`, `@yearly`), `@continuous`, `@once`, or a 5-field cron expression (`*/5 * * * *`)"
)


def split_list(value: Any) -> Any:
    """Accept `"a,b"` as well as `["a", "b"]`, as Kafka's LIST type does."""
    if isinstance(value, str):
        return [item.strip() for item in value.split(",") if item.strip()]
    return value


def check_topic_name(value: str) -> str:
    """`value` if it is a legal topic name (Kafka's rule), else ValueError saying what is allowed.

    As Kafka's `Topic.validate`, `.` and `..` are refused too: a topic's name is a directory of its
    storage path, where they would name the topics' parent (or the topic directory itself)."""
    if not isinstance(value, str) or not _TOPIC_NAME.fullmatch(value) or value in (".", ".."):
        shown = value if not isinstance(value, str) or len(value) <= 60 else value[:60] + "…"
        raise ValueError(
            f"invalid topic name {shown!r}: 1-249 characters, only ASCII letters, digits, `.`, `_` and `-`, "
            "and not `.` or `..`"
        )
    return value


def check_topic_prefix(value: str) -> str:
    """`value` if it can begin a legal topic name (a prefix a connector adds a table's name to), else
    ValueError: up to 248 of Kafka's topic characters (empty is allowed)."""
    if (value and not _TOPIC_NAME.fullmatch(value)) or len(value) > 248:
        shown = value if len(value) <= 60 else value[:60] + "…"
        raise ValueError(
            f"invalid topic prefix {shown!r}: at most 248 characters, only ASCII letters, digits, `.`, `_` and `-`"
        )
    return value


#: One topic name, validated as Kafka validates it.
TopicName = Annotated[str, AfterValidator(check_topic_name)]
#: Topic names, validated: a list or a comma-separated string.
TopicNames = Annotated[list[TopicName], BeforeValidator(split_list)]
#: Kafka's LIST type: a list or a comma-separated string, of any strings (connectors use it for
#: table lists too, so its items are not checked as topic names: that is `TopicNames`).
TopicList = Annotated[list[str], BeforeValidator(split_list)]


def _blank_is_none(value: Any) -> Any:
    return None if isinstance(value, str) and not value.strip() else value


#: Kafka's `errors.deadletterqueue.topic.name`: empty means no dead-letter topic.
DeadLetterTopic = Annotated[TopicName | None, BeforeValidator(_blank_is_none)]
#: What a schema change may do where data enters or leaves a topic (dlt's contract modes).
ContractMode = Literal["evolve", "freeze", "discard_row", "discard_value"]
#: What a sink does to its target when a topic's columns change (Airbyte's propagation choices).
Propagation = Literal["ignore", "propagate_columns", "propagate_fully", "pause"]


def schedule_interval(value: str) -> timedelta | None:
    """The interval of `30s` / `15m` / `2h` / `1d`, or None if `value` is not an interval."""
    match = _INTERVAL.fullmatch(value.strip())
    if match is None:
        return None
    return timedelta(**{_UNITS[match.group(2)]: int(match.group(1))})


def check_schedule(value: str | None, *, sink: bool = False) -> str | None:
    """`value` normalised (None for `none`), or ValueError if Airflow could not schedule it.

    Checked when a connector is created, so a bad schedule can never reach the DAG file."""
    if value is None or value.strip().lower() in _NONE:
        return None
    value = value.strip()
    if len(value) > 120:
        raise ValueError(f"schedule is {len(value)} characters long; expected {_SCHEDULE_HELP}")
    interval = schedule_interval(value)
    if interval is not None:
        if not timedelta(seconds=1) <= interval <= _MAX_INTERVAL:
            raise ValueError(f"schedule interval `{value}` must be between 1s and {_MAX_INTERVAL.days}d")
        return value
    if value in _SOURCE_ONLY:
        if sink:
            raise ValueError(f"a sink runs when its topics get data; its extra schedule cannot be `{value}`")
        return value
    if value in CRON_PRESETS:
        return value
    if _valid_cron(value):
        if not _fires(value):
            raise ValueError(
                f"cron `{value}` never fires (a date no month has, as February 31st): expected {_SCHEDULE_HELP}"
            )
        return value
    raise ValueError(f"invalid schedule `{value}`: expected {_SCHEDULE_HELP}")


def _valid_cron(value: str) -> bool:
    from croniter import croniter  # only when a schedule is neither preset nor interval

    return len(value.split()) == 5 and bool(croniter.is_valid(value))


def _fires(value: str) -> bool:
    """Whether a valid cron has a next tick at all (`0 0 31 2 *` has none: nothing could run on it,
    and when a job is next due could not be told)."""
    from datetime import UTC, datetime

    from croniter import CroniterBadDateError, croniter

    try:
        croniter(value, datetime(2000, 1, 1, tzinfo=UTC)).get_next(datetime)
    except CroniterBadDateError:
        return False
    return True


def is_placeholder(value: str) -> bool:
    """Whether `value` is a config provider's placeholder and nothing else (`${airflow:db:jdbc_url}`):
    stored as it is, resolved only where the task runs, so a check of its form waits until then."""
    return value.startswith("${") and value.endswith("}") and value.count("${") == 1


class ProvidedValue(str):
    """A transform's key material as a config provider filled it in where the task runs (the runtime
    hands `HashField`'s `hmac.key` over so). Its form was checked at create, as the placeholder, and
    is not checked now: whoever can create a connector can point the placeholder at any secret a
    provider reads, and a check that fails on it (too short) would tell them about that secret."""


#: The widest whole number a count key holds: Postgres' bigint (where topic settings are stored).
WHOLE_MAX = 2**63 - 1


def whole_number(value: Any) -> int:
    """`value` as a whole number, by the one rule of the count keys (`topic.partitions`,
    `batch.max.rows`, `topic.creation.default.retention.ms` …), at create and where they are read:
    a JSON integer, or a string of plain ASCII digits (`"3"`, `"-1"`) within a bigint; ValueError
    for anything else: a boolean, a fraction or float (`3.0`, `1e3`), a sign (`+3`), blanks (` 3 `),
    underscores (`1_000`), non-ASCII digits. Linear in `value` and bounded: no huge int parse."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        kind = "a boolean" if isinstance(value, bool) else f"a JSON {type(value).__name__}"
        raise ValueError(f"must be a whole number (a JSON integer or a string of plain digits), not {kind}")
    if isinstance(value, str):
        digits = value[1:] if value.startswith("-") else value
        if not (0 < len(digits) <= 19 and digits.isascii() and digits.isdigit()):
            raise ValueError(
                "must be a whole number in plain digits (a leading `-` only: no `+`, blanks, `_`, `.`, exponent)"
            )
        value = int(value)
    if not -WHOLE_MAX <= value <= WHOLE_MAX:
        raise ValueError(f"must be a whole number within ±{WHOLE_MAX} (a bigint)")
    return value


#: A whole number by `whole_number`'s rule: what a count or size key takes (bounds per field).
WholeNumber = Annotated[int, BeforeValidator(whole_number)]
_Whole = WholeNumber


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
    pool_preferred: str | None = Field(
        default=None,
        alias="pool.preferred",
        pattern=r"^[A-Za-z0-9_.-]{1,100}$",  # a pool name
        description="The Spark pool this connector's tasks run on while that pool is up and given work; "
        "otherwise the rebalance strategy places them, and they come back when it is up again. A registered "
        "pool's name (`connect pools list`).",
    )
    topic_creation_default_retention_ms: _Whole | None = Field(
        default=None,
        alias="topic.creation.default.retention.ms",
        ge=-1,
        description="A source's topics, when it creates them: their `retention.ms` (Kafka's KIP-158 key; "
        "-1: kept for ever; default: the runtime's `topic_retention_ms`).",
    )
    topic_creation_default_retention_bytes: _Whole | None = Field(
        default=None,
        alias="topic.creation.default.retention.bytes",
        ge=-1,
        description="A source's topics, when it creates them: their `retention.bytes`, the most bytes a partition "
        "keeps (-1, the default: no limit).",
    )
    topic_creation_default_cleanup_policy: Literal["delete", "compact", "compact,delete", "delete,compact"] | None = (
        Field(
            default=None,
            alias="topic.creation.default.cleanup.policy",
            description="A source's topics, when it creates them: their `cleanup.policy`: `delete` (the default: "
            "retention applies), `compact` (the latest record per key is kept) or `compact,delete`.",
        )
    )
    topic_creation_default_delete_retention_ms: _Whole | None = Field(
        default=None,
        alias="topic.creation.default.delete.retention.ms",
        ge=0,
        description="A source's topics, when it creates them: how long compaction keeps a tombstone "
        "(`delete.retention.ms`; default a day).",
    )
    topic_creation_default_segment_bytes: _Whole | None = Field(
        default=None,
        alias="topic.creation.default.segment.bytes",
        ge=1,
        description="A source's topics, when it creates them: consecutive small segments are merged while "
        "together under this many bytes (`segment.bytes`; default 128 MiB).",
    )
    precheck: bool = Field(
        default=True,
        description="Before a run, ask the connector (without Spark) whether anything is new; skip the run if not.",
    )
    transforms: TopicList = Field(
        default_factory=list,
        description=(
            "Aliases of the transformations to apply, in order (Kafka's `transforms`): each configured by "
            "`transforms.<alias>.type` and its options. A source applies them before the topic, a sink after it."
        ),
    )
    predicates: TopicList = Field(
        default_factory=list,
        description="Aliases of the predicates transforms may name in `transforms.<alias>.predicate` (Kafka's).",
    )
    errors_tolerance: Literal["none", "all"] = Field(
        default="none",
        alias="errors.tolerance",
        description=(
            "`none`: a record that fails conversion, a transform or the write fails the run (nothing past the "
            "last commit is committed). `all`: such records are skipped (and sent to the dead-letter topic if "
            "one is set); the rest of the batch lands."
        ),
    )
    errors_retry_timeout: int = Field(
        default=0,
        alias="errors.retry.timeout",
        ge=-1,
        description="Milliseconds to keep retrying a transient failure within a run (0: no retries, -1: forever).",
    )
    errors_retry_delay_max_ms: int = Field(
        default=60_000,
        alias="errors.retry.delay.max.ms",
        ge=1,
        description="Longest wait between two retries (waits double from 300 ms).",
    )
    errors_log_enable: bool = Field(
        default=False, alias="errors.log.enable", description="Log every failed record's error context."
    )
    errors_log_include_messages: bool = Field(
        default=False,
        alias="errors.log.include.messages",
        description="Include the failed record itself in that log (secrets in it are masked like any log line).",
    )
    errors_deadletterqueue_topic_name: DeadLetterTopic = Field(
        default=None,
        alias="errors.deadletterqueue.topic.name",
        description="Topic that records skipped under `errors.tolerance=all` go to (empty: none).",
    )
    errors_deadletterqueue_context_headers_enable: bool = Field(
        default=False,
        alias="errors.deadletterqueue.context.headers.enable",
        description="Add the error context to dead-letter records as `__connect.errors.*` headers.",
    )

    schema_contract: ContractMode | None = Field(
        default=None,
        alias="schema.contract",
        description="Shorthand for `schema.contract.tables`, `.columns` and `.data_type` at once (each key "
        "given on its own wins).",
    )
    schema_contract_tables: ContractMode | None = Field(
        default=None,
        alias="schema.contract.tables",
        description="What a topic this connector has not carried before may do after its first load: `evolve` "
        "(default) lets it through; `freeze` fails the run (`DataError`); `discard_row`/`discard_value` drop "
        "its records (to the dead-letter topic under `discard_row`).",
    )
    schema_contract_columns: ContractMode | None = Field(
        default=None,
        alias="schema.contract.columns",
        description="What a column added or dropped (or a changed key) may do: `evolve` (default) lets the new "
        "shape through; `freeze` fails the run (`DataError` naming the change); `discard_row` sends the records "
        "holding a new column's value (every record, for a dropped column or a changed key) to the dead-letter "
        "topic; `discard_value` removes a new column's values (a dropped column comes back as null) and counts them.",
    )
    schema_contract_data_type: ContractMode | None = Field(
        default=None,
        alias="schema.contract.data_type",
        description="What a column whose type changed may do: `evolve` (default) lets the new type through; "
        "`freeze` fails the run; `discard_row`/`discard_value` keep the column's former type: a value that "
        "survives the cast there and back is kept, any other record goes to the dead-letter topic "
        "(`discard_row`) or loses that value to null (`discard_value`, counted).",
    )

    @field_validator("schedule")
    @classmethod
    def _schedule(cls, value: str | None) -> str | None:
        return check_schedule(value, sink=issubclass(cls, SinkConnectorConfig))

    def contract_mode(self, kind: Literal["tables", "columns", "data_type"]) -> ContractMode:
        """The effective mode of `schema.contract.<kind>`: its own key, else the shorthand, else `evolve`."""
        own: ContractMode | None = getattr(self, f"schema_contract_{kind}")
        return own or self.schema_contract or "evolve"


#: The `errors.*` keys alone, with `ConnectorConfig`'s own fields (the same types, defaults and
#: aliases): how the runtime reads them from a config it holds as a dict, by the rules that validated it.
ErrorsConfig: type[BaseModel] = create_model(
    "ErrorsConfig",
    __config__=ConfigDict(extra="ignore", populate_by_name=True, frozen=True),
    __module__=__name__,
    **{
        name: (info.annotation, info)
        for name, info in ConnectorConfig.model_fields.items()
        if name.startswith("errors_")
    },  # type: ignore[call-overload]
)


class SourceConnectorConfig(ConnectorConfig):
    """Settings every source connector has: how the topics it creates are laid out."""

    topic_partitions: _Whole = Field(
        default=1,
        validation_alias=AliasChoices("topic.partitions", "topic.creation.default.partitions"),
        ge=1,
        le=1024,
        description="Partitions of a topic the source creates (Kafka's `topic.creation.default.partitions`); task "
        "N writes partition N modulo this. A topic that exists keeps its own partition count.",
    )


class SinkConnectorConfig(ConnectorConfig):
    """Settings every sink connector has: the topics it consumes."""

    schedule: str | None = Field(
        default=None,
        description="Extra cron/preset schedule of the sink's DAG; it also runs whenever its topics get new data.",
    )
    topics: TopicNames = Field(
        validation_alias=AliasChoices("connect.topicnames", "topics"),
        min_length=1,
        description="Topics to copy from: a list or a comma-separated string (`connect.topicnames` or `topics`).",
    )
    batch_max_rows: _Whole | None = Field(
        default=None,
        alias="batch.max.rows",
        ge=1,
        description="Most records one run reads from its topics' segments, whole segments at a time (at least one "
        "segment is read however large; default: everything new).",
    )
    schema_propagation: Propagation | None = Field(
        default=None,
        alias="schema.propagation",
        description="What a change of a topic's columns does to the target: `ignore` (the target keeps its columns; "
        "new ones are not written), `propagate_columns` (columns added, types widened, dropped columns kept as "
        "nullable), `propagate_fully` (dropped columns dropped too) or `pause` (any change pauses the connector). "
        "A breaking change (a key column changed, a type narrowed) pauses it under every mode but `ignore`. Unset: "
        "the sink's own settings (`auto.evolve`, `*.evolve-schema-enabled`).",
    )
    upkeep_schedule: str | None = Field(
        default=None,
        alias="upkeep.schedule",
        description="How often the sink's table upkeep runs (compaction, snapshot expiry, orphan files; a sink "
        "that declares upkeep jobs): an interval (`6h`, `1d`), a preset (`@daily`) or a 5-field cron. Each job is "
        "a task of the connector's DAG that runs when its last success is older than this; unset: no upkeep.",
    )

    @field_validator("upkeep_schedule")
    @classmethod
    def _upkeep_schedule(cls, value: str | None) -> str | None:
        if value is not None and value.strip() in _SOURCE_ONLY:
            raise ValueError(f"table upkeep runs on an interval, a preset or a cron, not `{value.strip()}`")
        return check_schedule(value, sink=True)
