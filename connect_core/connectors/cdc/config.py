"""Change-data-capture connector configs, keyed as Debezium's."""

from __future__ import annotations

import re
import zlib
from typing import Literal

from pydantic import Field, field_validator

from connect_core.sdk.config import ConnectorConfig, TopicList

__all__ = ["CdcConfig", "MariaDbCdcConfig", "PostgresCdcConfig", "captured"]

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_$]{0,62}")


class CdcConfig(ConnectorConfig):
    """What every change-data-capture source takes: the server, the tables, the run's bounds."""

    database_hostname: str = Field(alias="database.hostname", min_length=1, description="Database host.")
    database_user: str = Field(alias="database.user", min_length=1, description="The capture user.")
    database_password: str | None = Field(
        default=None,
        alias="database.password",
        description="Password (masked; `${env:VAR}` keeps it out of the store).",
    )
    topic_prefix: str = Field(
        alias="topic.prefix",
        min_length=1,
        max_length=100,
        pattern=r"^[A-Za-z0-9._-]+$",
        description="Topics are <prefix>.<schema>.<table>; also the source partition's name.",
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
    max_batch_size: int = Field(
        default=100_000,
        alias="max.batch.size",
        ge=1,
        description="At most about this many changes per run (whole transactions: a bigger one is taken whole).",
    )
    poll_timeout_ms: int = Field(
        default=10_000,
        alias="poll.timeout.ms",
        ge=100,
        description="How long a run waits for the server to stream the log it had at the run's start.",
    )

    @field_validator(
        "table_include_list", "table_exclude_list", "database_include_list", "database_exclude_list", check_fields=False
    )
    @classmethod
    def _patterns(cls, value: list[str]) -> list[str]:
        for pattern in value:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"`{pattern}` is not a regular expression: {exc}") from None
        return value


class PostgresCdcConfig(CdcConfig):
    database_port: int = Field(default=5432, alias="database.port", ge=1, le=65535, description="PostgreSQL port.")
    database_dbname: str = Field(alias="database.dbname", min_length=1, description="The database to capture.")
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
    snapshot_max_threads: int = Field(
        default=1,
        alias="snapshot.max.threads",
        ge=1,
        le=64,
        description="Connections that read the initial snapshot at once (a big table with an integer key "
        "in as many ranges of it), all in the slot's exported snapshot.",
    )
    slot_drop_on_stop: bool = Field(
        default=False, alias="slot.drop.on.stop", description="Drop the slot when the connector is deleted."
    )
    max_batch_size: int = Field(
        default=1_000_000,
        alias="max.batch.size",
        ge=1,
        description="At most about this many changes per run (whole transactions: a bigger one is taken whole). "
        "Ten times MariaDB's: a run decodes its changes in bulk, and one that stops short of a backlog makes the "
        "server decode the backlog again at the next run.",
    )
    max_batch_bytes: int = Field(
        default=64 << 20,
        alias="max.batch.bytes",
        ge=1 << 16,
        description="And at most about this many bytes of changes as the server sends them: a run's memory peaks at "
        "about 5 times this (the messages, and their events as Arrow).",
    )
    heartbeat_interval_ms: int = Field(
        default=60_000,
        alias="heartbeat.interval.ms",
        ge=0,
        description="A run that finds no change of the captured tables still advances the slot past the WAL "
        "other tables wrote, at most this often (0: never), so the slot does not hold WAL without bound.",
    )

    @field_validator("slot_name", "publication_name")
    @classmethod
    def _identifier(cls, value: str) -> str:
        if not _NAME.fullmatch(value):
            raise ValueError("1-63 letters, digits, `_` or `$`, not starting with a digit")
        return value


class MariaDbCdcConfig(CdcConfig):
    """Debezium's MySQL / MariaDB connector keys. A table's name is `database.table`."""

    database_port: int = Field(default=3306, alias="database.port", ge=1, le=65535, description="Server port.")
    database_server_id: int | None = Field(
        default=None,
        alias="database.server.id",
        ge=1,
        le=2**32 - 1,
        description="The replica id the binlog client registers with, unique among the server's replicas "
        "(default: one derived from topic.prefix, in 5400-6399).",
    )
    database_include_list: TopicList = Field(
        default_factory=list,
        alias="database.include.list",
        description="Regular expressions of databases to capture (default: every one but the system's).",
    )
    database_exclude_list: TopicList = Field(
        default_factory=list, alias="database.exclude.list", description="Regular expressions of databases to leave."
    )

    def server_id(self) -> int:
        if self.database_server_id is not None:
            return self.database_server_id
        return 5400 + zlib.crc32(self.topic_prefix.encode()) % 1000


def captured(name: str, include: list[str], exclude: list[str]) -> bool:
    """Debezium's rule: a table (`schema.table`) is captured when it fully matches an include
    pattern (or there are none) and no exclude pattern."""
    if include and not any(re.fullmatch(p, name) for p in include):
        return False
    return not any(re.fullmatch(p, name) for p in exclude)
