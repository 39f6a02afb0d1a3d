"""Change-data-capture connector configs, keyed as Debezium's."""

from __future__ import annotations

import functools
import hashlib
import ipaddress
import re
import socket
import threading
import time
import zlib
from typing import Any, Literal

from pydantic import Field, ValidationInfo, field_validator

from connect_core.connectors._masks import ColumnMaskConfig
from connect_core.sdk import compile_user_regex
from connect_core.sdk._regex import linear_regex
from connect_core.sdk.config import SourceConnectorConfig, TopicList

__all__ = ["CdcConfig", "MariaDbCdcConfig", "PostgresCdcConfig", "captured", "server_identity"]

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_$]{0,62}")
#: PostgreSQL's rule for a replication slot's name (`ReplicationSlotValidateName`): lower case only,
#: so `Slot` and `slot` cannot name one slot two ways (the replication protocol folds an unquoted name).
_SLOT = re.compile(r"[a-z_][a-z0-9_]{0,62}")
#: Before slot and publication names were derived from the connector's name, these were the defaults:
#: a position committed then (without the names it refers to) still refers to them.
LEGACY_SLOT, LEGACY_PUBLICATION = "debezium", "dbz_publication"


class CdcConfig(SourceConnectorConfig, ColumnMaskConfig):
    """What every change-data-capture source takes: the server, the tables, the run's bounds; and
    Debezium's column masks (`column.mask.hash.<algorithm>.with.salt.<salt>`,
    `column.mask.with.<n>.chars`, `column.truncate.to.<n>.chars`) on `<schema>.<table>.<column>`
    (MariaDB: `<database>.<table>.<column>`), in `before`, `after` and the key."""

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
    probe_timeout_ms: int = Field(
        default=10_000,
        alias="probe.timeout.ms",
        ge=100,
        le=15_000,
        description="The whole time the check of the server at create / update may take (connect and "
        "queries); a server that has not answered by then makes the config invalid. At most 15 s: a "
        "REST request waits on it.",
    )
    incremental_snapshot_chunk_size: int = Field(
        default=10_000,
        alias="incremental.snapshot.chunk.size",
        ge=1,
        le=1_000_000,
        description="Rows of an incremental snapshot's chunk (one query by primary key); a run reads chunks up to "
        "`incremental.snapshot.max.rows.per.run` rows.",
    )
    incremental_snapshot_max_rows_per_run: int = Field(
        default=100_000,
        alias="incremental.snapshot.max.rows.per.run",
        ge=1,
        description="Rows of an incremental snapshot one run reads at most (with its streamed changes), so that the "
        "stream keeps its latency while a table is re-read (measured: 100,000 keeps a change's p99 latency within "
        "1.4x of idle on a warm pool, 200,000 doubles it, at the same snapshot throughput).",
    )
    signal_enabled_channels: TopicList = Field(
        default_factory=lambda: ["rest"],
        alias="signal.enabled.channels",
        description="Where signals (Debezium's: execute-snapshot, stop-snapshot, pause-snapshot, resume-snapshot) "
        "come from: `rest` (`POST /connectors/{name}/signals`, `connect snapshot`) and `source` (rows inserted "
        "into the `signal.data.collection` table, read from the log).",
    )
    signal_data_collection: str | None = Field(
        default=None,
        alias="signal.data.collection",
        validate_default=True,
        description="The signal table of the `source` channel, `schema.table` (PostgreSQL) or `database.table` "
        "(MariaDB), with Debezium's columns `id`, `type`, `data`: a row inserted there is a signal, acted on by "
        "the run that streams it. It must be captured (in `table.include.list`); its changes go to no topic.",
    )

    @field_validator("signal_enabled_channels")
    @classmethod
    def _channels(cls, value: list[str]) -> list[str]:
        unknown = sorted(set(value) - {"rest", "source"})
        if unknown:
            raise ValueError(f"unknown channel(s) {', '.join(unknown)}: the channels are `rest` and `source`")
        return value

    @field_validator("signal_data_collection")
    @classmethod
    def _signal_table(cls, name: str | None, info: ValidationInfo) -> str | None:
        if "source" in info.data.get("signal_enabled_channels", ()) and not name:
            raise ValueError("`signal.enabled.channels` has `source`: name its table here")
        if name is not None and (name.count(".") != 1 or not all(name.split(".")) or not name.isprintable()):
            raise ValueError("must be `schema.table` (or `database.table`)")
        return name

    def server(self) -> str:
        """`host:port`, as the connector reaches the server (for messages)."""
        return f"{self.database_hostname}:{getattr(self, 'database_port', '?')}"

    @field_validator("database_hostname")
    @classmethod
    def _host(cls, value: str) -> str:
        if "${" in value:
            # the server is part of what a connector claims at create (its slot, its replica id), so it
            # must be known there, not filled in where the task runs
            raise ValueError(
                "must be written out, not a config provider's placeholder: the server is claimed at create"
            )
        return check_host(value)

    @field_validator(
        "table_include_list", "table_exclude_list", "database_include_list", "database_exclude_list", check_fields=False
    )
    @classmethod
    def _patterns(cls, value: list[str]) -> list[str]:
        for pattern in value:
            compile_user_regex(pattern, "include/exclude list")  # bounded: length, nesting, errors
            _compiled(pattern)  # and matchable in linear time
        return value


class PostgresCdcConfig(CdcConfig):
    database_port: int = Field(default=5432, alias="database.port", ge=1, le=65535, description="PostgreSQL port.")
    database_dbname: str = Field(alias="database.dbname", min_length=1, description="The database to capture.")
    plugin_name: Literal["pgoutput"] = Field(
        default="pgoutput", alias="plugin.name", description="Logical decoding plugin: pgoutput (built in)."
    )
    slot_name: str | None = Field(
        default=None,
        alias="slot.name",
        description="The connector's replication slot, of no other connector (default: `connect_<connector "
        "name>_<hash>`, derived from the connector's name).",
    )
    publication_name: str | None = Field(
        default=None,
        alias="publication.name",
        description="The publication the slot streams; one the connector creates or alters is of no other "
        "connector (default: derived from the connector's name, as the slot's).",
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
    incremental_snapshot_parallel_reads: int = Field(
        default=1,
        alias="incremental.snapshot.parallel.reads",
        ge=1,
        le=64,
        description="Chunks of an incremental snapshot's run read at once, each by a Spark task on a connection of "
        "its own, all in the run's one snapshot (`pg_export_snapshot`); 1: one after the other, by the driver. Worth "
        "it where a chunk's read is most of a run (a remote server with cores to spare): a Spark job per that many "
        "chunks, whose rows come back through the driver (keep reads x chunk size within its memory); the job "
        "costs about half a second (measured: on 2 cores with the server local, 100,000 rows a run read in "
        "0.2 s by the driver, 0.65 s by 2 tasks).",
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

    @field_validator("slot_name")
    @classmethod
    def _slot_name(cls, value: str | None) -> str | None:
        if value is not None and not _SLOT.fullmatch(value):
            raise ValueError("1-63 lower-case letters, digits or `_`, not starting with a digit (PostgreSQL's rule)")
        return value

    @field_validator("publication_name")
    @classmethod
    def _identifier(cls, value: str | None) -> str | None:
        if value is not None and not _NAME.fullmatch(value):
            raise ValueError("1-63 letters, digits, `_` or `$`, not starting with a digit")
        return value

    def slot(self, connector: str) -> str:
        """The slot connector `connector` streams from: `slot.name`, or one named after the connector."""
        return self.slot_name or owned_name(connector)

    def publication(self, connector: str) -> str:
        """The publication connector `connector` streams: `publication.name`, or one named after it."""
        return self.publication_name or owned_name(connector)

    def database(self) -> str:
        """The database, as one string whatever way the host is spelt (see `server_identity`)."""
        return f"{server_identity(self.database_hostname, self.database_port)}/{self.database_dbname}"


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


def owned_name(connector: str) -> str:
    """A slot or publication name of connector `connector`'s own: `connect_`, the name in lower case
    with anything but letters, digits and `_` as `_`, then a hash of the exact name (so `A` and `a`,
    or `a.b` and `a_b`, differ): at most 63 characters, as PostgreSQL allows."""
    digest = hashlib.sha256(connector.encode()).hexdigest()[:10]
    readable = re.sub(r"[^a-z0-9_]", "_", connector.lower())[:42]
    return f"connect_{readable}_{digest}"


#: Names every host resolves to itself by: all of them are the machine the connector runs on.
_LOOPBACK_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"}


#: A host: a DNS name (letters, digits, `-`, `.`, `_`) or an IP address, nothing a driver reads as
#: a list (`a,b`), a socket directory (`/tmp`) or a shorthand address (`127.1`, `2130706433`).
_HOST_NAME = re.compile(r"[a-z0-9_]([a-z0-9_-]{0,62})(\.[a-z0-9_]([a-z0-9_-]{0,62}))*\.?")
_NUMERIC = re.compile(r"(0x)?[0-9a-f.x]+")
#: How long a name's lookup may take when it is compared with other connectors' (a claim).
_RESOLVE_SECONDS = 2.0
_RESOLVE_TTL_SECONDS = 60.0


def check_host(host: str) -> str:
    """`host` if it is one plain DNS name or IP address, else ValueError saying how to write it."""
    name = host.strip().lower().removeprefix("[").removesuffix("]")
    shown = host if len(host) <= 60 else host[:60] + "…"
    try:
        ipaddress.ip_address(name)
    except ValueError:
        if len(name) > 253 or not _HOST_NAME.fullmatch(name) or _NUMERIC.fullmatch(name.rstrip(".")):
            raise ValueError(
                f"`{shown}` must be one host name or IP address (dotted-quad or IPv6): no list, socket "
                "directory or shorthand address"
            ) from None
    return host


def server_identity(host: str, port: int) -> str:
    """`host:port` spelt one way: lower case, without a trailing dot or brackets, an IP address in its
    canonical form, a name by the address it resolves to (bounded: a name that does not resolve in
    time stays itself), and this machine, by any of its loopback or own addresses or names, as
    `localhost`. So two spellings of one server are one claim."""
    name = host.strip().lower().rstrip(".").removeprefix("[").removesuffix("]")
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        if name in _LOOPBACK_NAMES:
            return f"localhost:{port}"
        resolved = _resolve(name)
        if resolved is None:
            return f"{name}:{port}"
        address = resolved
    mapped = getattr(address, "ipv4_mapped", None)
    address = mapped or address
    own = address.is_loopback or address.is_unspecified or address in _own_addresses()
    return f"{'localhost' if own else address.compressed}:{port}"


def _resolve(name: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """The lowest address `name` resolves to, or None when it does not within `_RESOLVE_SECONDS`;
    looked up once a minute at most (a create compares its server with every stored CDC connector's)."""
    return _resolve_in(name, int(time.monotonic() // _RESOLVE_TTL_SECONDS))


@functools.lru_cache(maxsize=1024)
def _resolve_in(name: str, _period: int) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    found: list[ipaddress.IPv4Address | ipaddress.IPv6Address] = []

    def lookup() -> None:
        try:
            infos = socket.getaddrinfo(name, None, proto=socket.IPPROTO_TCP)
        except (OSError, UnicodeError):
            return
        found.extend(ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in infos)

    worker = threading.Thread(target=lookup, daemon=True)  # getaddrinfo takes no timeout
    worker.start()
    worker.join(_RESOLVE_SECONDS)
    if worker.is_alive() or not found:
        return None
    return min(found, key=lambda a: (a.version, int(a)))


@functools.lru_cache(maxsize=1)
def _own_addresses() -> frozenset[ipaddress.IPv4Address | ipaddress.IPv6Address]:
    """This machine's addresses, as its own names resolve."""
    own: set[ipaddress.IPv4Address | ipaddress.IPv6Address] = set()
    for mine in {socket.gethostname(), socket.getfqdn()}:
        try:
            own |= {ipaddress.ip_address(str(i[4][0]).split("%")[0]) for i in socket.getaddrinfo(mine, None)}
        except (OSError, UnicodeError, ValueError):
            continue
    return frozenset(own)


def captured(name: str, include: list[str], exclude: list[str]) -> bool:
    """Debezium's rule: a table (`schema.table`) is captured when it fully matches an include
    pattern (or there are none) and no exclude pattern."""
    if include and not any(_compiled(p).fullmatch(name) for p in include):
        return False
    return not any(_compiled(p).fullmatch(name) for p in exclude)


def _compiled(pattern: str) -> Any:
    """`pattern` for RE2 (`linear_regex`): the names come from the server the connector points at, and
    the match runs inside a REST request at create. A pattern RE2 cannot run is refused."""
    return linear_regex(pattern)
