"""The MariaDB/MySQL source's stream: a run reads the row binlog as a replica does
(python-mysql-replication) from its committed position up to the binlog's end of when it began,
whole transactions only (about `max.batch.size` changes at most)."""

from __future__ import annotations

import re
import time
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from connect_core.connectors.cdc.config import MariaDbCdcConfig
from connect_core.connectors.cdc.envelope import MYSQL_SOURCE, ChangeTable, topic_for
from connect_core.connectors.cdc.mariadb import _server
from connect_core.sdk.errors import FatalError, RetriableError

if TYPE_CHECKING:
    pass

__all__ = ["Stream"]


class Stream:
    """Reads the binlog: whole transactions, each captured table's row changes into its ChangeTable."""

    def __init__(self, cfg: MariaDbCdcConfig, by_name: dict[str, _server.Table], mariadb: bool) -> None:
        self.cfg, self.by_name, self.mariadb = cfg, by_name, mariadb
        self.changes: dict[str, ChangeTable] = {}
        #: captured tables truncated in the stream read: name and where the truncate ends in the binlog
        self.truncates: list[tuple[str, tuple[str, int]]] = []
        self._names: dict[str, tuple[str, ...]] = {}  # the column names each topic's rows came in last
        self.count = 0
        #: whether the read stopped at `max.batch.size`, before the end it was to read to
        self.cut_short = False

    def read(self, start: dict[str, Any], end: tuple[str, int]) -> dict[str, Any]:
        """Stream from `start` to `end` (or `max.batch.size`); the position past the last complete
        transaction read."""
        import pymysql
        from pymysqlreplication import BinLogStreamReader
        from pymysqlreplication.event import GtidEvent, MariadbGtidEvent, QueryEvent, XidEvent
        from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

        cfg = self.cfg
        if _server.position_key(end) <= _server.coordinates(start):
            return start
        state = _server.gtid_state(start.get("gtid"))
        position = dict(start)
        resume: dict[str, Any]
        if self.mariadb and start.get("gtid") is not None:
            resume = {"is_mariadb": True, "auto_position": _server.gtid_text(state)}
        else:
            resume = {"log_file": start["file"], "log_pos": int(start["pos"])}
        stream = BinLogStreamReader(
            connection_settings={**_server.connect_args(cfg), "read_timeout": max(1, cfg.poll_timeout_ms // 1000)},
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
        pending: list[tuple[_server.Table, str, dict[str, Any] | None, dict[str, Any] | None, dict[str, Any]]] = []
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
                    self._truncated(event, (stream.log_file, stream.log_pos))
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
                    "gtid": _server.gtid_text(state) if self.mariadb else None,
                }
                gtid = None
                if _server.coordinates(position) >= _server.position_key(end):
                    break
                if self.count >= cfg.max_batch_size:
                    self.cut_short = True
                    break
        except pymysql.err.OperationalError as exc:
            code = exc.args[0] if exc.args else None
            if code == _server.ER_MASTER_FATAL_READING_BINLOG:
                raise FatalError(_server.lost(start, str(exc.args[-1]))) from exc
            raise RetriableError(
                f"the binlog stream from {cfg.database_hostname}:{cfg.database_port} broke: {exc}"
            ) from exc
        finally:
            stream.close()
        return position

    def _truncated(self, event: Any, end: tuple[str, int]) -> None:
        """Note a TRUNCATE of a captured table (not a row event: its rows are not captured, but an
        incremental snapshot's rows read before it are gone)."""
        default = event.schema.decode("utf-8", "replace") if isinstance(event.schema, bytes) else event.schema
        name = truncated_table(event.query, default or "")
        if name is not None and name in self.by_name:
            self.truncates.append((name, end))

    def _source(self, table: _server.Table, gtid: str | None, began: tuple[str, int, int, int]) -> dict[str, Any]:
        file, pos, timestamp, server_id = began
        return _server.source_info(self.cfg, self.mariadb, table, timestamp * 1000, "false", server_id, gtid, file, pos)

    def _apply(
        self, pending: list[tuple[_server.Table, str, dict[str, Any] | None, dict[str, Any] | None, dict[str, Any]]]
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

    def _changes(self, table: _server.Table, row: dict[str, Any] | None) -> ChangeTable:
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


def _key_of(table: _server.Table, row: dict[str, Any] | None) -> tuple[Any, ...]:
    return tuple((row or {}).get(k) for k in table.key)


#: `TRUNCATE [TABLE] [db.]name`, each name plain or in backquotes (linear: no nested repetition)
_TRUNCATE = re.compile(r"TRUNCATE\s+(?:TABLE\s+)?(`(?:[^`]|``)+`|[\w$]+)(?:\s*\.\s*(`(?:[^`]|``)+`|[\w$]+))?", re.I)


def truncated_table(query: str, default_db: str) -> str | None:
    """The `db.table` a TRUNCATE statement empties (its database: the statement's, else the session's
    default), or None for any other statement."""
    text = query[:4096].lstrip()
    while text.startswith("/*"):  # leading comments, skipped without a regex
        end = text.find("*/")
        if end < 0:
            return None
        text = text[end + 2 :].lstrip()
    found = _TRUNCATE.match(text)
    if found is None:
        return None
    first, second = (_unquoted(n) if n else None for n in found.groups())
    return f"{first}.{second}" if second is not None else f"{default_db}.{first}"


def _unquoted(name: str) -> str:
    return name[1:-1].replace("``", "`") if name.startswith("`") else name
