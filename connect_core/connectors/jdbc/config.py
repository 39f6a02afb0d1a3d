"""JDBC connector configs, keyed as Confluent's JDBC source and sink connectors."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

from connect_core.connectors._masks import ColumnMaskConfig
from connect_core.connectors.jdbc.dialects import dialect_for, parse_identifier
from connect_core.sdk._paths import DriverJar
from connect_core.sdk.config import (
    ConnectorConfig,
    SinkConnectorConfig,
    SourceConnectorConfig,
    TopicList,
    WholeNumber,
    check_topic_name,
    check_topic_prefix,
    is_placeholder,
)
from connect_core.sdk.errors import ConfigError

__all__ = ["JdbcConnectionConfig", "JdbcSinkConfig", "JdbcSourceConfig"]


def _name(value: str, what: str) -> tuple[str, ...]:
    try:
        return parse_identifier(value, what)
    except ConfigError as exc:  # pydantic reports ValueErrors by key
        raise ValueError(str(exc)) from None


#: A config provider's placeholder (`${provider:argument}`), as the runtime's providers find them.
_PLACEHOLDER = re.compile(r"\$\{[A-Za-z0-9_.-]+:[^}]*\}")

SourceMode = Literal["bulk", "incrementing", "timestamp", "timestamp+incrementing"]


class JdbcConnectionConfig(ConnectorConfig):
    connection_url: str = Field(
        alias="connection.url",
        min_length=6,
        description=(
            "JDBC URL: jdbc:postgresql://h:5432/db, jdbc:mariadb://h/db; one host, and only harmless "
            "parameters (no class, file or SQL options: see connectors/jdbc/_url.py)."
        ),
    )
    connection_user: str | None = Field(default=None, alias="connection.user", description="Database user.")
    connection_password: str | None = Field(
        default=None,
        alias="connection.password",
        description="Password (masked; `${env:VAR}` keeps it out of the store).",
    )
    connection_jar: DriverJar | None = Field(
        default=None,
        alias="connection.jar",
        description=(
            "Path of the JDBC driver jar, one file under the worker setting `jdbc_driver_paths` (default "
            "/usr/share/java) and outside `file.allowed.paths`; default: Debian's "
            "/usr/share/java/{postgresql,mariadb-java-client}.jar."
        ),
    )
    fetch_size: int = Field(default=10_000, alias="fetch.size", ge=1, description="Rows per JDBC round trip.")

    @field_validator("connection_url")
    @classmethod
    def _jdbc_url(cls, value: str) -> str:
        if is_placeholder(value):  # `${airflow:conn:jdbc_url}`: checked once resolved, where the task runs
            return value
        try:
            # placeholders inside (`?password=${env:PW}`) are checked as a plain word here, and
            # the URL again once they are resolved, where the task runs
            dialect_for(_PLACEHOLDER.sub("placeholder", value))
        except ConfigError as exc:
            raise ValueError(str(exc)) from None
        return value


class JdbcSourceConfig(SourceConnectorConfig, JdbcConnectionConfig, ColumnMaskConfig):
    """Also Debezium's column masks (`column.mask.hash.<algorithm>.with.salt.<salt>`,
    `column.mask.with.<n>.chars`, `column.truncate.to.<n>.chars`): a column is named
    `<schema>.<table>.<column>` (MariaDB: `<database>.<table>.<column>`), or by its table as
    `table.whitelist` writes it; a query's columns by the topic's name (`<topic>.<column>`)."""

    mode: SourceMode = Field(
        default="bulk",
        description="bulk (whole table each run), incrementing, timestamp, or timestamp+incrementing (Kafka's modes).",
    )
    incrementing_column_name: str | None = Field(
        default=None, alias="incrementing.column.name", description="Strictly increasing numeric column (e.g. id)."
    )
    timestamp_column_name: str | None = Field(
        default=None, alias="timestamp.column.name", description="Column with the row's last-modified time."
    )
    timestamp_delay_interval_ms: int = Field(
        default=0,
        alias="timestamp.delay.interval.ms",
        ge=0,
        description="Read rows only once their timestamp is this old, so transactions committing late are not missed.",
    )
    table_whitelist: TopicList = Field(
        default_factory=list, alias="table.whitelist", description="Tables to copy (`schema.table` or `table`)."
    )
    query: str | None = Field(default=None, description="A SELECT to copy instead of tables (one task, one topic).")
    topic_prefix: str = Field(
        alias="topic.prefix", description="Topic of table T is <prefix>T (may be empty); of a query, <prefix>."
    )
    key_fields: TopicList = Field(
        default_factory=list,
        alias="key.fields",
        description="Columns that make each record's key; by default a table's primary key (a query's rows: none).",
    )
    batch_max_rows: WholeNumber | None = Field(  # by the one rule of count keys: `true` is no 1
        default=None,
        alias="batch.max.rows",
        ge=1,
        description="Most rows per table per micro-batch (default: all new).",
    )
    snapshot_partitions: int = Field(
        default=4,
        alias="snapshot.partitions",
        ge=1,
        le=1024,
        description="Parallel JDBC reads of a large window, split on the incrementing column (bounds found by query).",
    )

    @field_validator("table_whitelist")
    @classmethod
    def _tables(cls, tables: list[str]) -> list[str]:
        for table in tables:
            _name(table, "table")
        return tables

    @field_validator("incrementing_column_name", "timestamp_column_name")
    @classmethod
    def _column(cls, value: str | None) -> str | None:
        if value is not None and len(_name(value, "column")) != 1:
            raise ValueError(f"column `{value}` must not be qualified")
        return value

    @model_validator(mode="after")
    def _mode_columns(self) -> JdbcSourceConfig:
        if bool(self.table_whitelist) == bool(self.query):
            raise ValueError("set exactly one of `table.whitelist` and `query`")
        if self.query and not self.topic_prefix:
            raise ValueError("with `query`, `topic.prefix` is the topic's name: it cannot be empty")
        # with `query` the prefix is the whole topic name; otherwise a table's name follows it
        (check_topic_name if self.query else check_topic_prefix)(self.topic_prefix)
        if "incrementing" in self.mode and not self.incrementing_column_name:
            raise ValueError(f"mode `{self.mode}` needs `incrementing.column.name`")
        if "timestamp" in self.mode and not self.timestamp_column_name:
            raise ValueError(f"mode `{self.mode}` needs `timestamp.column.name`")
        return self


class JdbcSinkConfig(SinkConnectorConfig, JdbcConnectionConfig):
    insert_mode: Literal["insert", "upsert", "update"] = Field(
        default="insert", alias="insert.mode", description="insert, upsert (insert or update by key) or update."
    )
    pk_mode: Literal["none", "record_value", "record_key", "kafka"] = Field(
        default="none",
        alias="pk.mode",
        description=(
            "none; record_value (pk.fields of the row); record_key (the record's key: its fields, or those of "
            "pk.fields); kafka (topic, partition, offset coordinates)."
        ),
    )
    pk_fields: TopicList = Field(
        default_factory=list,
        alias="pk.fields",
        description="Key columns: of the value (record_value), or of the key's fields (record_key; default all).",
    )
    delete_enabled: bool = Field(
        default=False,
        alias="delete.enabled",
        description=(
            "Delete the row of a tombstone's key (a record whose value is null: a CDC source's delete). "
            "Needs pk.mode record_key. Off, a tombstone fails the task."
        ),
    )
    auto_create: bool = Field(default=False, alias="auto.create", description="Create a missing target table.")
    auto_evolve: bool = Field(default=False, alias="auto.evolve", description="Add columns the table lacks.")
    table_name_format: str = Field(
        default="${topic}", alias="table.name.format", description="Target table; `${topic}` is the topic's name."
    )

    @model_validator(mode="after")
    def _keys(self) -> JdbcSinkConfig:
        if self.insert_mode in ("upsert", "update") and self.pk_mode == "none":
            raise ValueError(f"insert.mode `{self.insert_mode}` needs a key: set `pk.mode`")
        if self.delete_enabled and self.pk_mode != "record_key":
            raise ValueError("delete.enabled needs pk.mode `record_key`: a tombstone carries only its key")
        if self.delete_enabled and self.errors_tolerance == "all":
            raise ValueError("delete.enabled does not work with errors.tolerance `all` yet: set one of them")
        if self.pk_mode == "record_value" and not self.pk_fields:
            raise ValueError("pk.mode `record_value` needs `pk.fields`")
        for column in self.pk_fields:
            _name(column, "pk field")
        if not self.transforms:  # a router renames the topics first: their tables are checked at run time
            for topic in self.topics:
                _name(self.table_name_format.replace("${topic}", topic), "table")
        return self
