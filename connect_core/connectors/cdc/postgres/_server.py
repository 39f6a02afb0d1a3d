"""The PostgreSQL source's server: connections (plain and replication), the captured tables, the
publication, the slot, LSNs, and the `source` block of an event."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from connect_core.connectors.cdc._deadline import Interrupts
from connect_core.connectors.cdc.config import LEGACY_PUBLICATION, LEGACY_SLOT, PostgresCdcConfig, captured
from connect_core.connectors.cdc.envelope import check_topics
from connect_core.connectors.cdc.postgres import pgoutput
from connect_core.sdk.errors import ConfigError, FatalError, RetriableError

if TYPE_CHECKING:
    pass

__all__ = ["VERSION", "Names", "Table", "captured_tables", "connect", "replication", "slot", "source_info"]


VERSION = "0.1.0"


SESSION = "-c TimeZone=UTC -c DateStyle=ISO -c bytea_output=hex -c extra_float_digits=3"


@dataclass(frozen=True)
class Table:
    schema: str
    name: str
    columns: tuple[pgoutput.Column, ...]
    key: tuple[str, ...]  # the primary key

    @property
    def qualified(self) -> str:
        return f"{self.schema}.{self.name}"


@dataclass(frozen=True)
class Names:
    """The slot and publication a run of the connector uses."""

    slot: str
    publication: str
    derived: bool  # the slot is named after the connector (`slot.name` unset): no other may use it

    @classmethod
    def of(cls, cfg: PostgresCdcConfig, connector: str, committed: Mapping[str, Any] | None) -> Names:
        """The config's names, or for a position committed before positions recorded them, the
        defaults of then. A position is of one slot: it never goes on in another."""
        if committed is not None and "slot" not in committed:
            return cls(cfg.slot_name or LEGACY_SLOT, cfg.publication_name or LEGACY_PUBLICATION, False)
        names = cls(cfg.slot(connector), cfg.publication(connector), cfg.slot_name is None)
        if committed is not None and committed["slot"] != names.slot:
            raise FatalError(
                f"the committed position is one of replication slot `{committed['slot']}`, not of "
                f"`{names.slot}` (slot.name changed): a position goes on only in its own slot. Set slot.name "
                "back, or start over: stop the connector, reset its offsets (`connect offsets reset NAME`), resume it"
            )
        return names

    def recorded(self) -> dict[str, str]:
        """What a committed position records of them."""
        return {"slot": self.slot, "publication": self.publication}


def source_info(
    cfg: PostgresCdcConfig, schema: str, table: str, ts_ms: int, snapshot: str, xid: int | None, lsn: int
) -> dict[str, Any]:
    return {
        "version": VERSION,
        "connector": "postgresql",
        "name": cfg.topic_prefix,
        "ts_ms": ts_ms,
        "snapshot": snapshot,
        "db": cfg.database_dbname,
        "schema": schema,
        "table": table,
        "txId": xid,
        "lsn": lsn,
    }


def output_text(column: str, *, escaped: bool) -> str:
    """SQL giving `column`'s value as its type's output function writes it, the form pgoutput streams (a
    boolean `t`, a char(n) with its blanks, an inet without `/32`), NULL as NULL: a cast to text differs
    (`true`, blanks trimmed), and `format` alone makes NULL ''. `escaped`: for a query run with
    parameters (psycopg2 reads `%` there)."""
    percent = "%%" if escaped else "%"
    return f"CASE WHEN {column} IS NULL THEN NULL ELSE format('{percent}s', {column}) END"


def libpq_args(cfg: PostgresCdcConfig) -> dict[str, Any]:
    dsn: dict[str, Any] = {
        "host": cfg.database_hostname,
        "port": cfg.database_port,
        "user": cfg.database_user,
        "dbname": cfg.database_dbname,
        "connect_timeout": 10,
        # a server gone silent mid-query is noticed (no answer to keepalives) instead of waited on forever
        "keepalives": 1,
        "keepalives_idle": 30,
        "keepalives_interval": 10,
        "keepalives_count": 3,
    }
    if cfg.database_password:
        dsn["password"] = cfg.database_password
    return dsn


#: What libpq says when the server refuses who connects (no retry changes that): a wrong password or
#: user, a database that is not there, no pg_hba.conf line for them.
_REFUSED = re.compile(
    r"password authentication failed|authentication failed|role \"[^\"]*\" does not exist|"
    r"database \"[^\"]*\" does not exist|no pg_hba\.conf entry|password is required|no password supplied"
)


def _raise_if_refused(cfg: PostgresCdcConfig, exc: Exception) -> None:
    """A ConfigError (not retried: the config must change) when the server refused the login."""
    found = _REFUSED.search(str(exc))
    if found:
        raise ConfigError(
            f"{cfg.database_hostname}:{cfg.database_port} refused the login of `{cfg.database_user}` "
            f"to `{cfg.database_dbname}`: {found.group(0)}",
            {"database.user": [f"refused: {found.group(0)}"]},
        ) from None


@contextmanager
def connect(cfg: PostgresCdcConfig, cut: Interrupts | None = None) -> Iterator[Any]:
    """A connection; with `cut`, one a deadline may cut (libpq's own `connect_timeout` bounds the
    connect, which has no socket to cut yet)."""
    import psycopg2

    dsn = libpq_args(cfg)
    if cut is not None:
        # past the deadline, so that the deadline (one message) always comes first; it ends the thread
        dsn["connect_timeout"] = max(2, -(-cfg.probe_timeout_ms // 1000) + 1)  # libpq: 2 s at least
    try:
        conn = psycopg2.connect(**dsn, options=SESSION)
    except psycopg2.OperationalError as exc:
        _raise_if_refused(cfg, exc)
        raise RetriableError(
            f"cannot reach PostgreSQL at {cfg.database_hostname}:{cfg.database_port}: {str(exc).strip()}"
        ) from exc
    if cut is not None:
        cut.add(conn.fileno())
    conn.autocommit = True
    try:
        yield conn
    finally:
        conn.close()


@contextmanager
def replication(cfg: PostgresCdcConfig) -> Iterator[Any]:
    import psycopg2
    from psycopg2.extras import LogicalReplicationConnection

    try:
        conn = psycopg2.connect(**libpq_args(cfg), options=SESSION, connection_factory=LogicalReplicationConnection)
    except psycopg2.OperationalError as exc:
        _raise_if_refused(cfg, exc)
        raise RetriableError(
            f"cannot open a replication connection to {cfg.database_hostname}:{cfg.database_port} "
            f"(does `{cfg.database_user}` have REPLICATION, and pg_hba.conf a `replication` line?): "
            f"{str(exc).strip()}"
        ) from exc
    try:
        yield conn
    finally:
        conn.close()


def captured_tables(conn: Any, cfg: PostgresCdcConfig) -> list[Table]:
    """The user tables `table.include.list` / `table.exclude.list` select, with columns and primary key."""
    with conn.cursor() as cur:
        cur.execute(
            """
            SELECT n.nspname, c.relname, a.attname, a.atttypid, a.atttypmod,
                   coalesce(a.attnum = ANY(i.indkey), false)
            FROM pg_class c
            JOIN pg_namespace n ON n.oid = c.relnamespace
            JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
            LEFT JOIN pg_index i ON i.indrelid = c.oid AND i.indisprimary
            WHERE c.relkind IN ('r', 'p') AND n.nspname NOT IN ('pg_catalog', 'information_schema')
              AND n.nspname NOT LIKE 'pg_toast%%' AND NOT c.relispartition
            ORDER BY n.nspname, c.relname, a.attnum
            """
        )
        found: dict[tuple[str, str], list[tuple[str, int, int, bool]]] = {}
        for schema, name, column, type_oid, typmod, in_key in cur.fetchall():
            found.setdefault((schema, name), []).append((column, type_oid, typmod, in_key))
    tables = []
    for (schema, name), columns in found.items():
        if not captured(f"{schema}.{name}", cfg.table_include_list, cfg.table_exclude_list):
            continue
        cols = tuple(pgoutput.Column(c, t, m, k) for c, t, m, k in columns)
        tables.append(Table(schema, name, cols, tuple(c.name for c in cols if c.key)))
    check_topics(cfg.topic_prefix, ((t.schema, t.name) for t in tables))  # before anything is read
    if not tables:
        raise ConfigError(
            f"no table of `{cfg.database_dbname}` matches table.include.list / table.exclude.list",
            {"table.include.list": ["matches no table"]},
        )
    return tables


def ensure_publication(
    conn: Any, cfg: PostgresCdcConfig, publication: str, tables: list[Table], partitioned: bool
) -> None:
    """The connector's publication, created when missing. A partitioned table's changes must come
    under its own name, in one stream in commit order (`publish_via_partition_root`), not under each
    partition's: set on a publication the connector creates or manages, required of another."""
    name = quote(publication)
    with conn.cursor() as cur:
        cur.execute("SELECT pubviaroot FROM pg_publication WHERE pubname = %s", (publication,))
        found = cur.fetchone()
        if found:
            if partitioned and not found[0]:
                if cfg.publication_autocreate_mode == "disabled":
                    raise ConfigError(
                        f"publication `{publication}` publishes a partitioned table's changes under its "
                        f"partitions' names: run `ALTER PUBLICATION {name} SET (publish_via_partition_root = true)`",
                        {"publication.name": ["needs publish_via_partition_root"]},
                    )
                cur.execute(f"ALTER PUBLICATION {name} SET (publish_via_partition_root = true)")
            return
        if cfg.publication_autocreate_mode == "disabled":
            raise ConfigError(
                f"publication `{publication}` does not exist (publication.autocreate.mode=disabled): "
                "create it, or let the connector do it",
                {"publication.name": ["does not exist"]},
            )
        if cfg.publication_autocreate_mode == "all_tables":
            what = "FOR ALL TABLES"
        else:
            what = "FOR TABLE " + ", ".join(f"{quote(t.schema)}.{quote(t.name)}" for t in tables)
        cur.execute(f"CREATE PUBLICATION {name} {what} WITH (publish_via_partition_root = true)")


def partitions(conn: Any, tables: list[Table]) -> dict[str, Table]:
    """Each partition (at any depth) of a captured partitioned table, by `schema.name`: its changes are
    the table's (a stream decoded before the publication published them under the table's name)."""
    by_name = {t.qualified: t for t in tables}
    with conn.cursor() as cur:
        cur.execute(
            """
            SELECT n.nspname || '.' || c.relname, rn.nspname || '.' || r.relname
            FROM pg_class c
            JOIN pg_namespace n ON n.oid = c.relnamespace
            JOIN pg_class r ON r.oid = pg_partition_root(c.oid)
            JOIN pg_namespace rn ON rn.oid = r.relnamespace
            WHERE c.relispartition
            """
        )
        return {part: by_name[root] for part, root in cur.fetchall() if root in by_name}


def slot(conn: Any, name: str) -> dict[str, Any] | None:
    with conn.cursor() as cur:
        cur.execute(
            "SELECT plugin, database, pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn), active "
            "FROM pg_replication_slots WHERE slot_name = %s",
            (name,),
        )
        row = cur.fetchone()
    if row is None:
        return None
    plugin, database, retained, active = row
    if plugin != "pgoutput":
        raise ConfigError(f"slot `{name}` exists with plugin `{plugin}`, not pgoutput", {"slot.name": ["in use"]})
    return {"database": database, "retained": int(retained or 0), "active": bool(active)}


def drop_slot(conn: Any, name: str) -> None:
    with conn.cursor() as cur:
        cur.execute("SELECT pg_drop_replication_slot(%s)", (name,))


def current_lsn(conn: Any) -> int:
    with conn.cursor() as cur:
        cur.execute("SELECT pg_current_wal_insert_lsn()::text")  # the write position may lag commits
        return parse_lsn(cur.fetchone()[0])


def parse_lsn(text: str) -> int:
    high, low = text.split("/")
    return (int(high, 16) << 32) | int(low, 16)


def quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def size_text(n: int) -> str:
    return f"{n / 1024 / 1024:.1f} MiB" if n >= 1 << 20 else f"{n} B"


@dataclass(frozen=True)
class KeyFacts:
    """What an incremental snapshot needs to know of a table beyond its columns: its replica identity
    (`d` default, `f` full, `i` an index, `n` nothing) and its columns that a valid unique index
    covers alone, each with whether it is NOT NULL."""

    replica_identity: str
    unique: dict[str, bool]


def key_facts(conn: Any, schema: str, name: str) -> KeyFacts | None:
    """`schema.name`'s replica identity and single-column unique indexes (None: no such table). A
    partial or expression index is no key: it does not make the column's values unique."""
    with conn.cursor() as cur:
        cur.execute(
            """
            SELECT c.relreplident, a.attname, a.attnotnull
            FROM pg_class c
            JOIN pg_namespace n ON n.oid = c.relnamespace
            LEFT JOIN pg_index i ON i.indrelid = c.oid AND i.indisunique AND i.indisvalid AND i.indnkeyatts = 1
                 AND i.indpred IS NULL AND i.indexprs IS NULL
            LEFT JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = i.indkey[0]
                 -- the index compares as the column does (a chunk query orders and bounds by the column's
                 -- collation), and that collation tells every two values apart (a case-insensitive one
                 -- makes `k > 'a'` skip 'A')
                 AND i.indcollation[0] = a.attcollation
                 AND NOT EXISTS (SELECT 1 FROM pg_collation co WHERE co.oid = a.attcollation AND NOT co.collisdeterministic)
            WHERE n.nspname = %s AND c.relname = %s AND c.relkind IN ('r', 'p')
            """,
            (schema, name),
        )
        rows = cur.fetchall()
    if not rows:
        return None
    unique = {column: bool(not_null) for _, column, not_null in rows if column is not None}
    return KeyFacts(str(rows[0][0]), unique)


def relation_exists(conn: Any, schema: str, name: str) -> bool:
    """Whether the database has a relation (a table, a view …) `schema.name`."""
    with conn.cursor() as cur:
        cur.execute(
            "SELECT 1 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s AND c.relname = %s",
            (schema, name),
        )
        return cur.fetchone() is not None
