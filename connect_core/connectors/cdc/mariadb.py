"""MariaDbCdcSourceConnector: a MariaDB's (or MySQL's) changes, deletes included, from its row binlog.

Debezium's MySQL / MariaDB connector as a micro-batch, reading the binlog as a replica does
(python-mysql-replication). Each run

1. checks the server writes what it needs (`binlog_format=ROW`, `binlog_row_image=FULL`,
   `binlog_row_metadata=FULL`: the column names travel in the log only with the last);
2. on its first run (`snapshot.mode=initial`), copies every captured table in one
   `START TRANSACTION WITH CONSISTENT SNAPSHOT`, with the binlog position that snapshot stands at
   (MariaDB gives it, lock-free, as `binlog_snapshot_file/position`; MySQL has it read under a
   brief `FLUSH TABLES WITH READ LOCK`): the stream then starts exactly where the copy ends;
3. otherwise reads the binlog from the committed position up to its end when the run began
   (about `max.batch.size` changes at most, whole transactions only), and ends with the position
   just past the last complete transaction, committed with the records in the runtime's one
   metadata transaction. Nothing is confirmed to the server: the binlog keeps what it keeps
   (`expire_logs_days`), and a position purged from it is an error that names the fix.

A position is MariaDB's GTID state (`domain-server-sequence` per domain) when the server is a
MariaDB, and the binlog file and offset always; MariaDB runs resume by GTID, MySQL ones by file
and offset. Events go to `<topic.prefix>.<database>.<table>` in Debezium's envelope, keyed by the
primary key; a delete is followed by a tombstone. TRUNCATE and other DDL are not row events:
they are not captured (a truncate's rows are not deleted downstream).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from connect_core.connectors.cdc._deadline import Interrupts, checked_server
from connect_core.connectors.cdc.config import MariaDbCdcConfig, captured, server_identity
from connect_core.connectors.cdc.envelope import MYSQL_SOURCE, ChangeTable, check_topics, topic_for
from connect_core.sdk import Positions, SourceBatch, SourceConnector, SourcePosition, SourceTask
from connect_core.sdk.errors import ConfigError, FatalError, RetriableError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["MariaDbCdcSourceConnector", "MariaDbCdcSourceTask", "server_problems"]

VERSION = "0.1.0"
_SYSTEM = ("mysql", "information_schema", "performance_schema", "sys")
#: MySQL's "could not find the position in the binlog" (purged, or a GTID the server never had).
_ER_MASTER_FATAL_READING_BINLOG = 1236
_ER_ACCESS_DENIED = 1045

Fix = Callable[[Any], Any] | None


@dataclass(frozen=True)
class _Table:
    db: str
    name: str
    columns: tuple[tuple[str, pa.DataType], ...]
    fixes: tuple[Fix, ...]  # per column: what makes a value of the log or of a query its Arrow value
    key: tuple[str, ...]

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
            fix = fixes.get(name, _text)
            out.append(value if fix is None or value is None else fix(value))
        return tuple(out)


class MariaDbCdcSourceTask(SourceTask):
    def read(self, spark: SparkSession, positions: Positions) -> SourceBatch:
        cfg = MariaDbCdcConfig.model_validate(self.config)
        partition = {"server": cfg.topic_prefix}
        found = positions.offset(partition)
        committed = dict(found) if found is not None else None
        with _connect(cfg) as conn:
            problems = server_problems(conn)
            if problems:
                raise ConfigError("; ".join(problems), {"database.hostname": problems})
            mariadb = _is_mariadb(conn)
            tables = _captured_tables(conn, cfg)
            if committed is None:
                return self._first_run(spark, cfg, conn, tables, partition, mariadb)
            if cfg.snapshot_mode == "initial_only":
                return SourceBatch.empty()
            behind = _binlog_behind(conn, committed)
            end = _binlog_end(conn)
        held = {"binlog_behind_bytes": behind}  # how far the committed position is behind, at the start
        stream = _Stream(cfg, {t.qualified: t for t in tables}, mariadb)
        position = stream.read(committed, end)
        records = {topic: changes.records(spark) for topic, changes in stream.changes.items() if len(changes)}
        if not records and _coordinates(position) == _coordinates(committed):
            return SourceBatch(stats=held)
        self.log.info("%d change(s) of %d table(s) up to %s", stream.count, len(records), _describe(position))
        offset = {**position, "snapshot": "done", "ts_ms": int(time.time() * 1000)}
        return SourceBatch(records, (SourcePosition(partition, offset),), stats=held)

    def has_new_data(self, positions: Positions) -> bool | None:
        """No binlog written since the committed position: nothing to read (one query, no Spark)."""
        cfg = MariaDbCdcConfig.model_validate(self.config)
        committed = positions.offset({"server": cfg.topic_prefix})
        if committed is None:
            return True
        if cfg.snapshot_mode == "initial_only":
            return False
        try:
            with _connect(cfg) as conn:
                return _position_key(_binlog_end(conn)) > _coordinates(dict(committed))
        except Exception as exc:  # the run reports it, with its context
            self.log.info("cannot tell whether there is anything new (%s); running", exc)
            return None

    def _first_run(
        self,
        spark: SparkSession,
        cfg: MariaDbCdcConfig,
        conn: Any,
        tables: list[_Table],
        partition: dict[str, str],
        mariadb: bool,
    ) -> SourceBatch:
        copy = cfg.snapshot_mode in ("initial", "initial_only")
        records: dict[str, Any] = {}
        if copy:
            records, position = _snapshot(spark, cfg, tables, mariadb, self.log)
        else:
            file, pos = _binlog_end(conn)
            position = {"file": file, "pos": pos, "gtid": _gtid_at(conn, file, pos) if mariadb else None}
        self.log.info(
            "binlog position %s; %d table(s) %s",
            _describe(position),
            len(tables),
            "copied" if copy else "not copied (snapshot.mode=" + cfg.snapshot_mode + ")",
        )
        offset = {**position, "snapshot": "done", "ts_ms": int(time.time() * 1000)}
        return SourceBatch(records, (SourcePosition(partition, offset),))


class _Stream:
    """Reads the binlog: whole transactions, each captured table's row changes into its ChangeTable."""

    def __init__(self, cfg: MariaDbCdcConfig, by_name: dict[str, _Table], mariadb: bool) -> None:
        self.cfg, self.by_name, self.mariadb = cfg, by_name, mariadb
        self.changes: dict[str, ChangeTable] = {}
        self._names: dict[str, tuple[str, ...]] = {}  # the column names each topic's rows came in last
        self.count = 0

    def read(self, start: dict[str, Any], end: tuple[str, int]) -> dict[str, Any]:
        """Stream from `start` to `end` (or `max.batch.size`); the position past the last complete
        transaction read."""
        import pymysql
        from pymysqlreplication import BinLogStreamReader
        from pymysqlreplication.event import GtidEvent, MariadbGtidEvent, QueryEvent, XidEvent
        from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

        cfg = self.cfg
        if _position_key(end) <= _coordinates(start):
            return start
        state = _gtid_state(start.get("gtid"))
        position = dict(start)
        resume: dict[str, Any]
        if self.mariadb and start.get("gtid") is not None:
            resume = {"is_mariadb": True, "auto_position": _gtid_text(state)}
        else:
            resume = {"log_file": start["file"], "log_pos": int(start["pos"])}
        stream = BinLogStreamReader(
            connection_settings={**_settings(cfg), "read_timeout": max(1, cfg.poll_timeout_ms // 1000)},
            server_id=cfg.server_id(),
            blocking=False,  # the server ends the stream at the binlog's end
            resume_stream=True,
            only_events=[
                MariadbGtidEvent,
                GtidEvent,
                QueryEvent,
                XidEvent,
                WriteRowsEvent,
                UpdateRowsEvent,
                DeleteRowsEvent,
            ],
            only_schemas=sorted({t.db for t in self.by_name.values()}),
            enable_logging=False,
            **resume,
        )
        pending: list[tuple[_Table, str, dict[str, Any] | None, dict[str, Any] | None, dict[str, Any]]] = []
        sources: dict[str, dict[str, Any]] = {}
        gtid: str | None = None
        began: tuple[str, int, int, int] = ("", 0, 0, 0)  # file, pos, timestamp and server id of the transaction
        try:
            for event in stream:
                if isinstance(event, MariadbGtidEvent | GtidEvent):
                    gtid = event.gtid if isinstance(event, MariadbGtidEvent) else None
                    began = (stream.log_file, stream.log_pos, event.timestamp, event.server_id)
                    pending, sources = [], {}
                    continue
                if isinstance(event, QueryEvent):
                    query = event.query.strip().upper()
                    if query == "BEGIN":
                        pending, sources = [], {}
                        if gtid is None:
                            began = (stream.log_file, stream.log_pos, event.timestamp, event.server_id)
                        continue
                    # COMMIT ends a transaction; other statements (DDL) are transactions of their own
                elif not isinstance(event, XidEvent):
                    table = self.by_name.get(f"{event.schema}.{event.table}")
                    if table is not None:
                        source = sources.get(table.qualified)  # one per table and transaction
                        if source is None:
                            source = sources[table.qualified] = self._source(table, gtid, began)
                        for row in event.rows:
                            if isinstance(event, WriteRowsEvent):
                                pending.append((table, "c", None, row["values"], source))
                            elif isinstance(event, UpdateRowsEvent):
                                pending.append((table, "u", row["before_values"], row["after_values"], source))
                            else:
                                pending.append((table, "d", row["values"], None, source))
                    continue
                # the end of a transaction
                self._apply(pending)
                pending = []
                if gtid is not None:
                    state[gtid.split("-", 1)[0]] = gtid
                position = {
                    "file": stream.log_file,
                    "pos": stream.log_pos,
                    "gtid": _gtid_text(state) if self.mariadb else None,
                }
                gtid = None
                if _coordinates(position) >= _position_key(end) or self.count >= cfg.max_batch_size:
                    break
        except pymysql.err.OperationalError as exc:
            code = exc.args[0] if exc.args else None
            if code == _ER_MASTER_FATAL_READING_BINLOG:
                raise FatalError(_lost(start, str(exc.args[-1]))) from exc
            raise RetriableError(
                f"the binlog stream from {cfg.database_hostname}:{cfg.database_port} broke: {exc}"
            ) from exc
        finally:
            stream.close()
        return position

    def _source(self, table: _Table, gtid: str | None, began: tuple[str, int, int, int]) -> dict[str, Any]:
        file, pos, timestamp, server_id = began
        return _source(self.cfg, self.mariadb, table, timestamp * 1000, "false", server_id, gtid, file, pos)

    def _apply(
        self, pending: list[tuple[_Table, str, dict[str, Any] | None, dict[str, Any] | None, dict[str, Any]]]
    ) -> None:
        now = int(time.time() * 1000)
        for table, op, before, after, source in pending:
            changes = self._changes(table, before if after is None else after)
            names = self._names[changes.topic]
            b = table.named_row(names, before)
            a = table.named_row(names, after)
            self.count += 1
            if op == "u" and table.key and _key_of(table, before) != _key_of(table, after):
                changes.add_row("d", b, None, source, now, tombstone=True)  # the key changed: Debezium's pair
                changes.add_row("c", None, a, source, now)
            else:
                changes.add_row(op, b, a, source, now, tombstone=op == "d")

    def _changes(self, table: _Table, row: dict[str, Any] | None) -> ChangeTable:
        topic = topic_for(self.cfg.topic_prefix, table.db, table.name)
        found = self.changes.get(topic)
        names = tuple(row) if row is not None else tuple(name for name, _ in table.columns)
        if found is not None and self._names.get(topic) == names:
            return found
        self._names[topic] = names
        kinds = dict(table.columns)
        columns = [(name, kinds.get(name, pa.string())) for name in names]  # a column added since: its text
        if found is None:
            found = self.changes[topic] = ChangeTable(topic, columns, table.key, source=MYSQL_SOURCE)
        found.describe(columns)
        return found


def _key_of(table: _Table, row: dict[str, Any] | None) -> tuple[Any, ...]:
    return tuple((row or {}).get(k) for k in table.key)


# -- the snapshot --------------------------------------------------------------------------------


def _snapshot(
    spark: SparkSession, cfg: MariaDbCdcConfig, tables: list[_Table], mariadb: bool, log: Any
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Every captured table as it was at one consistent snapshot, as `r` events, and the binlog
    position that snapshot stands at."""
    import pymysql.cursors

    records = {}
    now = int(time.time() * 1000)
    with _connect(cfg, autocommit=False) as conn:
        with conn.cursor() as cur:
            cur.execute("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
            cur.execute("SHOW STATUS LIKE 'binlog_snapshot_%%'")
            status = {name.lower(): value for name, value in cur.fetchall()}
        if status.get("binlog_snapshot_file"):  # MariaDB: the snapshot's own position, no lock
            file, pos = status["binlog_snapshot_file"], int(status["binlog_snapshot_position"])
        else:  # MySQL: the position read while writes are held off for a moment
            conn.rollback()
            with conn.cursor() as cur:
                cur.execute("FLUSH TABLES WITH READ LOCK")
                try:
                    cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
                    file, pos = _binlog_end(conn)
                finally:
                    cur.execute("UNLOCK TABLES")
        position = {"file": file, "pos": pos, "gtid": _gtid_at(conn, file, pos) if mariadb else None}
        for table in tables:
            changes = ChangeTable(
                topic_for(cfg.topic_prefix, table.db, table.name), table.columns, table.key, source=MYSQL_SOURCE
            )
            source = _source(cfg, mariadb, table, now, "true", None, position["gtid"], file, pos)
            names = ", ".join(_quote(name) for name, _ in table.columns)
            with conn.cursor(pymysql.cursors.SSCursor) as cur:  # streamed, not held in memory
                cur.execute(f"SELECT {names} FROM {_quote(table.db)}.{_quote(table.name)}")
                while rows := cur.fetchmany(10_000):
                    for row in rows:
                        changes.add_row("r", None, table.row(row), source, now)
            if len(changes):
                changes.mark_last(snapshot="last")
                records[changes.topic] = changes.records(spark)
            log.info("snapshot of %s: %d row(s)", table.qualified, len(changes))
        conn.rollback()
    return records, position


# -- the server ----------------------------------------------------------------------------------


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


def _is_mariadb(conn: Any) -> bool:
    with conn.cursor() as cur:
        cur.execute("SELECT VERSION()")
        return "mariadb" in str(cur.fetchone()[0]).lower()


def _binlog_end(conn: Any) -> tuple[str, int]:
    with conn.cursor() as cur:
        cur.execute("SHOW MASTER STATUS")
        row = cur.fetchone()
    if row is None:
        raise ConfigError("the server writes no binlog (`log_bin`)", {"database.hostname": ["no binlog"]})
    return str(row[0]), int(row[1])


def _gtid_at(conn: Any, file: str, pos: int) -> str:
    """MariaDB's GTID state at a binlog position: where a replica resuming there starts."""
    with conn.cursor() as cur:
        cur.execute("SELECT BINLOG_GTID_POS(%s, %s)", (file, pos))
        row = cur.fetchone()
    if row is None or row[0] is None:
        raise FatalError(f"the server has no GTID state for binlog position {file}:{pos}")
    return str(row[0])


def _binlog_behind(conn: Any, committed: dict[str, Any]) -> int:
    """The binlog's bytes after the committed position; FatalError if its file is purged (the
    server deletes old files: `expire_logs_days`, `PURGE BINARY LOGS`)."""
    with conn.cursor() as cur:
        cur.execute("SHOW BINARY LOGS")
        sizes = {str(row[0]): int(row[1]) for row in cur.fetchall()}
    files = sorted(sizes, key=lambda name: _position_key((name, 0)))
    if committed["file"] in sizes:
        after = files[files.index(committed["file"]) :]
        return max(0, sum(sizes[f] for f in after) - int(committed["pos"]))
    oldest = files[0] if files else "none"
    raise FatalError(_lost(committed, f"binlog file {committed['file']} is purged (the oldest is {oldest})"))


def _lost(position: dict[str, Any], why: str) -> str:
    return (
        f"the binlog no longer holds the committed position {_describe(position)}: {why}. The changes after it "
        "are lost to this connector. To start over with a new snapshot: stop the connector, reset its offsets "
        "(`connect offsets reset NAME`), resume it; keep binlogs longer (expire_logs_days / binlog_expire_logs_seconds)"
    )


def _captured_tables(conn: Any, cfg: MariaDbCdcConfig) -> list[_Table]:
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
            _arrow(data_type, column_type, precision, scale)
            for _, data_type, column_type, precision, scale, _ in columns
        ]
        tables.append(
            _Table(
                db,
                name,
                tuple((c[0], kind) for c, (kind, _) in zip(columns, kinds, strict=True)),
                tuple(fix for _, fix in kinds),
                tuple(c[0] for c in columns if c[5] == "PRI"),
            )
        )
    check_topics(cfg.topic_prefix, ((t.db, t.name) for t in tables))  # before anything is read
    if not tables:
        raise ConfigError(
            "no table matches database.include.list / table.include.list and their exclude lists",
            {"table.include.list": ["matches no table"]},
        )
    return tables


def _arrow(data_type: str, column_type: str, precision: int | None, scale: int | None) -> tuple[pa.DataType, Fix]:
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
        return pa.int64(), _bits
    if data_type in ("binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob", "geometry"):
        return pa.binary(), _bytes
    if data_type == "set":
        return pa.string(), _set
    return pa.string(), _text  # the texts, enum, json, time, a decimal too wide: their text


def _text(value: Any) -> Any:
    if isinstance(value, str):
        return value
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, dict | list):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


def _bytes(value: Any) -> bytes:
    return value.encode() if isinstance(value, str) else bytes(value)


def _bits(value: Any) -> int:
    if isinstance(value, bytes):
        return int.from_bytes(value, "big")
    return int(str(value), 2)


def _set(value: Any) -> str:
    """A SET's members, sorted (the log gives them unordered)."""
    members = value if isinstance(value, set) else set(filter(None, str(value).split(",")))
    return ",".join(sorted(members))


# -- positions -----------------------------------------------------------------------------------


def _gtid_state(text: str | None) -> dict[str, str]:
    """MariaDB's GTID state (`0-1-10,1-2-5`) by domain."""
    return {gtid.split("-", 1)[0]: gtid for gtid in (text or "").replace(" ", "").split(",") if gtid}


def _gtid_text(state: dict[str, str]) -> str:
    return ",".join(state[domain] for domain in sorted(state, key=int))


def _position_key(position: tuple[str, int]) -> tuple[int, int]:
    file, pos = position
    return int(file.rsplit(".", 1)[-1]), pos


def _coordinates(offset: dict[str, Any]) -> tuple[int, int]:
    return _position_key((str(offset["file"]), int(offset["pos"])))


def _describe(position: dict[str, Any]) -> str:
    where = f"{position['file']}:{position['pos']}"
    return f"{where} (GTID {position['gtid']})" if position.get("gtid") else where


def _source(
    cfg: MariaDbCdcConfig,
    mariadb: bool,
    table: _Table,
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


# -- connections ---------------------------------------------------------------------------------


def _settings(cfg: MariaDbCdcConfig) -> dict[str, Any]:
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
def _connect(cfg: MariaDbCdcConfig, *, autocommit: bool = True, cut: Interrupts | None = None) -> Iterator[Any]:
    """A connection; with `cut`, one whose every wait (the handshake's included: pymysql waits on it
    without `read_timeout`) the deadline bounds, and that the deadline may cut."""
    import pymysql

    settings = _settings(cfg)
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


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _probe(cfg: MariaDbCdcConfig, cut: Interrupts) -> dict[str, list[str]]:
    """What the server lacks for this connector, by config key (empty: nothing)."""
    with _connect(cfg, cut=cut) as conn:
        problems = server_problems(conn)
        if problems:
            return {"database.hostname": problems}
        try:
            _captured_tables(conn, cfg)
        except ConfigError as exc:
            if exc.errors.get("table.include.list") != ["matches no table"]:
                return dict(exc.errors)  # a topic collision; no table yet is fine: it may come
    return {}


class MariaDbCdcSourceConnector(SourceConnector[MariaDbCdcConfig]):
    """MariaDB's or MySQL's row changes (inserts, updates, deletes) from its binlog, as Debezium's events."""

    config_model = MariaDbCdcConfig
    task_class = MariaDbCdcSourceTask
    version = VERSION

    def validate(self, config: MariaDbCdcConfig) -> dict[str, list[str]]:
        """The server's binlog settings and captured tables, checked when the connector is registered
        (as Debezium does), in `probe.timeout.ms` at most (connect and queries): a server that has not
        answered by then makes the config invalid. Skipped while a connection setting is a provider's
        placeholder (resolved only where the task runs)."""
        values = (config.database_hostname, config.database_user, config.database_password)
        if any(v is not None and "${" in v for v in values):
            return {}
        return checked_server("MariaDB", config.server(), config.probe_timeout_ms, lambda cut: _probe(config, cut))

    def claims(self, name: str, config: MariaDbCdcConfig) -> dict[str, str]:
        """The replica id the binlog client registers with: a server drops the older of two clients
        that register with one id, so each connector reading a server needs its own."""
        server = server_identity(config.database_hostname, config.database_port)
        return {f"replica id {config.server_id()} of the MariaDB at {server}": "database.server.id"}

    def task_configs(self, config: MariaDbCdcConfig, max_tasks: int) -> list[dict[str, Any]]:
        return [config.model_dump(by_alias=True, exclude_none=True, exclude={"name", "tasks_max"})]  # one binlog

    def output_topics(self, config: MariaDbCdcConfig) -> list[str]:
        return []  # one per captured table, known only from the database
