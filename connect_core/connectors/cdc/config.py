"""Change-data-capture connector configs, keyed as Debezium's."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator

from connect_core.sdk.config import ConnectorConfig, TopicList

__all__ = ["PostgresCdcConfig", "captured"]

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_$]{0,62}")


class PostgresCdcConfig(ConnectorConfig):
    database_hostname: str = Field(alias="database.hostname", min_length=1, description="PostgreSQL host.")
    database_port: int = Field(default=5432, alias="database.port", ge=1, le=65535, description="PostgreSQL port.")
    database_user: str = Field(alias="database.user", min_length=1, description="A user with REPLICATION.")
    database_password: str | None = Field(
        default=None,
        alias="database.password",
        description="Password (masked; `${env:VAR}` keeps it out of the store).",
    )
    database_dbname: str = Field(alias="database.dbname", min_length=1, description="The database to capture.")
    topic_prefix: str = Field(
        alias="topic.prefix",
        min_length=1,
        max_length=100,
        pattern=r"^[A-Za-z0-9._-]+$",
        description="Topics are <prefix>.<schema>.<table>; also the source partition's name.",
    )
    plugin_name: Literal["pgoutput"] = Field(
        default="pgoutput", alias="plugin.name", description="Logical decoding plugin: pgoutput (built in)."
    )
    slot_name: str = Field(default="debezium", alias="slot.name", description="The connector's replication slot.")
    publication_name: str = Field(
        default="dbz_publication", alias="publication.name", description="The publication the slot streams."
    )
    publication_autocreate_mode: Literal["all_tables", "filtered", "disabled"] = Field(
        default="filtered",
        alias="publication.autocreate.mode",
        description="Create the publication when missing: for all tables, for the included tables, or not.",
    )
    table_include_list: TopicList = Field(
        default_factory=list,
        alias="table.include.list",
        description="Regular expressions of `schema.table` to capture (default: every table but the system's).",
    )
    table_exclude_list: TopicList = Field(
        default_factory=list, alias="table.exclude.list", description="Regular expressions of `schema.table` to leave."
    )
    snapshot_mode: Literal["initial", "never", "no_data", "initial_only"] = Field(
        default="initial",
        alias="snapshot.mode",
        description="initial: copy the tables, then stream; never/no_data: stream only; initial_only: copy only.",
    )
    slot_drop_on_stop: bool = Field(
        default=False, alias="slot.drop.on.stop", description="Drop the slot when the connector is deleted."
    )
    max_batch_size: int = Field(
        default=100_000,
        alias="max.batch.size",
        ge=1,
        description="At most about this many changes per run (whole transactions: a bigger one is taken whole).",
    )
    heartbeat_interval_ms: int = Field(
        default=60_000,
        alias="heartbeat.interval.ms",
        ge=0,
        description="A run that finds no change of the captured tables still advances the slot past the WAL "
        "other tables wrote, at most this often (0: never), so the slot does not hold WAL without bound.",
    )
    poll_timeout_ms: int = Field(
        default=10_000,
        alias="poll.timeout.ms",
        ge=100,
        description="How long a run waits for the server to stream the WAL it had at the run's start.",
    )

    @field_validator("slot_name", "publication_name")
    @classmethod
    def _identifier(cls, value: str) -> str:
        if not _NAME.fullmatch(value):
            raise ValueError("1-63 letters, digits, `_` or `$`, not starting with a digit")
        return value

    @field_validator("table_include_list", "table_exclude_list")
    @classmethod
    def _patterns(cls, value: list[str]) -> list[str]:
        for pattern in value:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"`{pattern}` is not a regular expression: {exc}") from None
        return value


def captured(name: str, include: list[str], exclude: list[str]) -> bool:
    """Debezium's rule: a table (`schema.table`) is captured when it fully matches an include
    pattern (or there are none) and no exclude pattern."""
    if include and not any(re.fullmatch(p, name) for p in include):
        return False
    return not any(re.fullmatch(p, name) for p in exclude)
