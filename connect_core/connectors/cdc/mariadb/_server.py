"""The MariaDB/MySQL source's server: its settings and binlog position, GTIDs, the captured tables
and their columns' Arrow types, connections, and the `source` block of an event."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from connect_core.connectors.cdc._deadline import Interrupts
from connect_core.connectors.cdc.config import MariaDbCdcConfig, captured
from connect_core.connectors.cdc.envelope import check_topics
from connect_core.sdk.errors import ConfigError, FatalError, RetriableError

if TYPE_CHECKING:
    pass

__all__ = ["VERSION", "Table", "captured_tables", "connect", "server_problems", "source_info"]


VERSION = "0.1.0"


_SYSTEM = ("mysql", "information_schema", "performance_schema", "sys")


#: MySQL's "could not find the position in the binlog" (purged, or a GTID the server never had).
ER_MASTER_FATAL_READING_BINLOG = 1236


_ER_ACCESS_DENIED = 1045


Fix = Callable[[Any], Any] | None


@dataclass(frozen=True)
class Table:
    db: str
    name: str
    columns: tuple[tuple[str, pa.DataType], ...]
    fixes: tuple[Fix, ...]  # per column: what makes a value of the log or of a query its Arrow value
    key: tuple[str, ...]
    #: the key columns whose order no chunk query can follow (`float`, `double`, `real`: a query gives
    #: the value rounded; `enum`, `set`: sorted by position, compared as text), by column: their type
    unordered_key: tuple[tuple[str, str], ...] = ()

    @property
    def qualified(self) -> str:
        return f"{self.db}.{self.name}"

    def row(self, values: tuple[Any, ...]) -> tuple[Any, ...]:
        """A row in the columns' order (a snapshot's), each value as its Arrow value."""
        return tuple(v if f is None or v is None else f(v) for f, v in zip(self.fixes, values, strict=True))

    @cached_property
    def _fix_by_name(self) -> dict[str, Fix]:
        return dict(zip((name for name, _ in self.columns), self.fixes, strict=True))

    def named_row(self, names: tuple[str, ...], row: dict[str, Any] | None) -> tuple[Any, ...] | None:
        """A row of the log (by column name) in `names`' order, each value as its Arrow value (a
        column added since the run began: its text)."""
        if row is None:
            return None
        fixes = self._fix_by_name
        out = []
        for name in names:
            value = row.get(name)
            fix = fixes.get(name, text_value)
            out.append(value if fix is None or value is None else fix(value))
        return tuple(out)


def server_problems(conn: Any) -> list[str]:
    """What the server lacks for change capture, each with its fix; empty when all is well."""
    with conn.cursor() as cur:
        cur.execute(
            "SHOW GLOBAL VARIABLES WHERE Variable_name IN "
            "('log_bin', 'binlog_format', 'binlog_row_image', 'binlog_row_metadata')"
        )
        found = {name.lower(): str(value).upper() for name, value in cur.fetchall()}
    if found.get("log_bin") != "ON":
        return ["the server writes no binlog: start it with `log_bin` (and binlog_format=ROW)"]
    wanted = {"binlog_format": "ROW", "binlog_row_image": "FULL", "binlog_row_metadata": "FULL"}
    problems = []
    for name, value in wanted.items():
        have = found.get(name)
        if have is None:
            problems.append(f"the server has no `{name}` (change capture needs MariaDB 10.5+ or MySQL 8.0.14+)")
        elif have != value:
            problems.append(
                f"the server's {name} is {have}: set {name}={value} (SET GLOBAL {name}='{value}', and in its config)"
            )
    try:
        with conn.cursor() as cur:
            cur.execute("SHOW MASTER STATUS")
    except Exception as exc:
        problems.append(
            f"the user cannot read the binlog position ({exc}): grant it REPLICATION SLAVE and "
            "REPLICATION CLIENT (BINLOG MONITOR on MariaDB 10.5+)"
        )
    return problems


def is_mariadb(conn: Any) -> bool:
    with conn.cursor() as cur:
        cur.execute("SELECT VERSION()")
        return "mariadb" in str(cur.fetchone()[0]).lower()


def binlog_end(conn: Any) -> tuple[str, int]:
    with conn.cursor() as cur:
        cur.execute("SHOW MASTER STATUS")
        row = cur.fetchone()
    if row is None:
        raise ConfigError("the server writes no binlog (`log_bin`)", {"database.hostname": ["no binlog"]})
    return str(row[0]), int(row[1])


def gtid_at(conn: Any, file: str, pos: int) -> str:
    """MariaDB's GTID state at a binlog position: where a replica resuming there starts."""
    with conn.cursor() as cur:
        cur.execute("SELECT BINLOG_GTID_POS(%s, %s)", (file, pos))
        row = cur.fetchone()
    if row is None or row[0] is None:
        raise FatalError(f"the server has no GTID state for binlog position {file}:{pos}")
    return str(row[0])


def binlog_behind(conn: Any, committed: dict[str, Any]) -> int:
    """The binlog's bytes after the committed position; FatalError if its file is purged (the
    server deletes old files: `expire_logs_days`, `PURGE BINARY LOGS`)."""
    with conn.cursor() as cur:
        cur.execute("SHOW BINARY LOGS")
        sizes = {str(row[0]): int(row[1]) for row in cur.fetchall()}
    files = sorted(sizes, key=lambda name: position_key((name, 0)))
    if committed["file"] in sizes:
        after = files[files.index(committed["file"]) :]
        return max(0, sum(sizes[f] for f in after) - int(committed["pos"]))
    oldest = files[0] if files else "none"
    raise FatalError(lost(committed, f"binlog file {committed['file']} is purged (the oldest is {oldest})"))


def lost(position: dict[str, Any], why: str) -> str:
    return (
        f"the binlog no longer holds the committed position {describe(position)}: {why}. The changes after it "
        "are lost to this connector. To start over with a new snapshot: stop the connector, reset its offsets "
        "(`connect offsets reset NAME`), resume it; keep binlogs longer (expire_logs_days / binlog_expire_logs_seconds)"
    )


#: Key column types an incremental snapshot cannot read in chunks by (see `Table.unordered_key`).
_UNORDERED = frozenset({"float", "double", "real", "enum", "set"})


def captured_tables(conn: Any, cfg: MariaDbCdcConfig) -> list[Table]:
    """The base tables the include / exclude lists select, with columns and primary key."""
    with conn.cursor() as cur:
        cur.execute(
            """
            SELECT c.TABLE_SCHEMA, c.TABLE_NAME, c.COLUMN_NAME, c.DATA_TYPE, c.COLUMN_TYPE,
                   c.NUMERIC_PRECISION, c.NUMERIC_SCALE, c.COLUMN_KEY
            FROM information_schema.COLUMNS c
            JOIN information_schema.TABLES t ON t.TABLE_SCHEMA = c.TABLE_SCHEMA AND t.TABLE_NAME = c.TABLE_NAME
            WHERE t.TABLE_TYPE = 'BASE TABLE' AND c.TABLE_SCHEMA NOT IN %s
            ORDER BY c.TABLE_SCHEMA, c.TABLE_NAME, c.ORDINAL_POSITION
            """,
            (_SYSTEM,),
        )
        found: dict[tuple[str, str], list[tuple[Any, ...]]] = {}
        for db, name, *column in cur.fetchall():
            found.setdefault((db, name), []).append(tuple(column))
    tables = []
    for (db, name), columns in found.items():
        if not captured(db, cfg.database_include_list, cfg.database_exclude_list):
            continue
        if not captured(f"{db}.{name}", cfg.table_include_list, cfg.table_exclude_list):
            continue
        kinds = [
            arrow_of(data_type, column_type, precision, scale)
            for _, data_type, column_type, precision, scale, _ in columns
        ]
        tables.append(
            Table(
                db,
                name,
                tuple((c[0], kind) for c, (kind, _) in zip(columns, kinds, strict=True)),
                tuple(fix for _, fix in kinds),
                tuple(c[0] for c in columns if c[5] == "PRI"),
                tuple((c[0], str(c[1]).lower()) for c in columns if c[5] == "PRI" and str(c[1]).lower() in _UNORDERED),
            )
        )
    check_topics(cfg.topic_prefix, ((t.db, t.name) for t in tables))  # before anything is read
    if not tables:
        raise ConfigError(
            "no table matches database.include.list / table.include.list and their exclude lists",
            {"table.include.list": ["matches no table"]},
        )
    return tables


def arrow_of(data_type: str, column_type: str, precision: int | None, scale: int | None) -> tuple[pa.DataType, Fix]:
    """A column's Arrow type, and what turns its values (from the log or a query) into Arrow values."""
    data_type, unsigned = data_type.lower(), "unsigned" in column_type.lower()
    ints = {"tinyint": 8, "smallint": 16, "mediumint": 32, "int": 32, "integer": 32, "bigint": 64}
    if data_type in ints:
        bits = ints[data_type] * (2 if unsigned and data_type != "mediumint" else 1)
        if bits > 64:
            return pa.decimal128(20, 0), None  # bigint unsigned
        return pa.int64() if bits == 64 else pa.int32() if bits == 32 else pa.int16() if bits == 16 else pa.int8(), None
    if data_type == "decimal" and precision is not None and precision <= 38:
        return pa.decimal128(int(precision), int(scale or 0)), None
    if data_type in ("float", "double", "real"):
        return (pa.float32() if data_type == "float" else pa.float64()), None
    if data_type == "date":
        return pa.date32(), None
    if data_type == "datetime":
        return pa.timestamp("us"), None
    if data_type == "timestamp":  # stored in UTC; the log's values and the session's (time_zone UTC) are UTC
        return pa.timestamp("us", tz="UTC"), None
    if data_type == "year":
        return pa.int16(), None
    if data_type == "bit":
        return pa.int64(), bits_value
    if data_type == "binary":  # the log drops its trailing zero bytes, a query keeps them: padded both ways
        return pa.binary(), functools.partial(padded_bytes, _length(column_type))
    if data_type in ("varbinary", "tinyblob", "blob", "mediumblob", "longblob", "geometry"):
        return pa.binary(), bytes_value
    if data_type == "set":
        return pa.string(), set_value
    return pa.string(), text_value  # the texts, enum, json, time, a decimal too wide: their text


def text_value(value: Any) -> Any:
    if isinstance(value, str):
        return value
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, dict | list):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


def bytes_value(value: Any) -> bytes:
    return value.encode() if isinstance(value, str) else bytes(value)


def padded_bytes(length: int, value: Any) -> bytes:
    """A BINARY(n) value at its full length, as the column holds it."""
    return bytes_value(value).ljust(length, b"\0")


def _length(column_type: str) -> int:
    """The `n` of a column type `binary(n)` (1 without one, as the server's default)."""
    inside = column_type.partition("(")[2].partition(")")[0]
    return int(inside) if inside.isdigit() else 1


def bits_value(value: Any) -> int:
    if isinstance(value, bytes):
        return int.from_bytes(value, "big")
    return int(str(value), 2)


def set_value(value: Any) -> str:
    """A SET's members, sorted (the log gives them unordered)."""
    members = value if isinstance(value, set) else set(filter(None, str(value).split(",")))
    return ",".join(sorted(members))


def gtid_state(text: str | None) -> dict[str, str]:
    """MariaDB's GTID state (`0-1-10,1-2-5`) by domain."""
    return {gtid.split("-", 1)[0]: gtid for gtid in (text or "").replace(" ", "").split(",") if gtid}


def gtid_text(state: dict[str, str]) -> str:
    return ",".join(state[domain] for domain in sorted(state, key=int))


def position_key(position: tuple[str, int]) -> tuple[int, int]:
    file, pos = position
    return int(file.rsplit(".", 1)[-1]), pos


def coordinates(offset: dict[str, Any]) -> tuple[int, int]:
    return position_key((str(offset["file"]), int(offset["pos"])))


def describe(position: dict[str, Any]) -> str:
    where = f"{position['file']}:{position['pos']}"
    return f"{where} (GTID {position['gtid']})" if position.get("gtid") else where


def source_info(
    cfg: MariaDbCdcConfig,
    mariadb: bool,
    table: Table,
    ts_ms: int,
    snapshot: str,
    server_id: int | None,
    gtid: str | None,
    file: str,
    pos: int,
) -> dict[str, Any]:
    return {
        "version": VERSION,
        "connector": "mariadb" if mariadb else "mysql",
        "name": cfg.topic_prefix,
        "ts_ms": ts_ms,
        "snapshot": snapshot,
        "db": table.db,
        "table": table.name,
        "server_id": server_id,
        "gtid": gtid,
        "file": file,
        "pos": pos,
    }


def connect_args(cfg: MariaDbCdcConfig) -> dict[str, Any]:
    settings: dict[str, Any] = {
        "host": cfg.database_hostname,
        "port": cfg.database_port,
        "user": cfg.database_user,
        "connect_timeout": 10,
        "charset": "utf8mb4",
    }
    if cfg.database_password:
        settings["passwd"] = cfg.database_password
    return settings


@contextmanager
def connect(cfg: MariaDbCdcConfig, *, autocommit: bool = True, cut: Interrupts | None = None) -> Iterator[Any]:
    """A connection; with `cut`, one whose every wait (the handshake's included: pymysql waits on it
    without `read_timeout`) the deadline bounds, and that the deadline may cut."""
    import pymysql

    settings = connect_args(cfg)
    settings["password"] = settings.pop("passwd", "")
    if cut is not None:
        wait = -(-cfg.probe_timeout_ms // 1000) + 1  # past the deadline, which always comes first
        settings.update(connect_timeout=wait, read_timeout=wait, write_timeout=wait)
    try:
        conn = pymysql.connect(**settings, autocommit=autocommit, init_command="SET time_zone = '+00:00'")
    except pymysql.err.OperationalError as exc:
        if exc.args and exc.args[0] == _ER_ACCESS_DENIED:
            raise ConfigError(
                f"{cfg.database_hostname}:{cfg.database_port} refused user `{cfg.database_user}`",
                {"database.password": ["access denied"]},
            ) from exc
        raise RetriableError(f"cannot reach {cfg.database_hostname}:{cfg.database_port}: {exc.args[-1]}") from exc
    if cut is not None:
        cut.add(conn._sock.fileno())  # pymysql keeps its socket there; its read_timeout bounds the rest
    try:
        yield conn
    finally:
        conn.close()


def quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"
