"""Incremental snapshots (Debezium's, DBLog's watermark algorithm) of the MariaDB/MySQL source: one
table re-read in chunks of its primary key while its changes keep streaming, read-only.

What a signal does to the progress kept in the committed position is shared with the PostgreSQL
source (`cdc._incremental`). Each run that has a table to read:

1. reads the next chunks of the table, up to `incremental.snapshot.chunk.size` rows each and
   `incremental.snapshot.max.rows.per.run` in all, in key order, in one
   `START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY`. MariaDB tells that snapshot's exact
   binlog position (`binlog_snapshot_file/position`, the low watermark, with no write to the
   source): every transaction that ends at or before it is in the snapshot, none after;
2. only then reads the binlog end it streams to (the high watermark): every transaction the chunk's
   snapshot saw is streamed by this run, or was by an earlier one;
3. streams as any run does, and drops each chunk row whose key a streamed transaction past the
   watermark changed (an update, a delete, a key moved), and every chunk row when a TRUNCATE of the
   table came after it: that change is newer than the row, and is in the stream. The other chunk
   rows go to the topic after the run's changes, as `r` events with `snapshot=incremental`;
4. commits the new progress with the position, in the runtime's one commit: a run killed at any
   point reads the same chunk again, and a chunk row never overwrites a newer change.

MySQL has no snapshot position: there every change the run streams counts as newer than the chunk
(its rows are dropped; the stream carries those rows whole, `binlog_row_image=FULL`). Rows inserted
after the table's read began with a key past its largest are not read: the stream carries them.

A chunk's values are read as the initial snapshot reads them (`Table.row`), which gives the values
the binlog gives for the same column, so a chunk row's key and a streamed event's compare equal.
The last key read is kept in the position as JSON, each value tagged with its type when JSON has
none (`{"decimal": "1.50"}`), and bound as a parameter of the next chunk's query.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from connect_core.connectors.cdc._incremental import STATE, apply_signals, next_table, progress_stats
from connect_core.connectors.cdc.config import MariaDbCdcConfig
from connect_core.connectors.cdc.envelope import MYSQL_SOURCE, ChangeTable, topic_for
from connect_core.connectors.cdc.mariadb import _server
from connect_core.sdk.errors import FatalError

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["STATE", "Chunk", "apply_signals", "merge", "next_table", "progress_stats", "read_chunks", "streamed_past"]


@dataclass
class Chunk:
    """What a run read of the current table: its rows (Arrow values), and the binlog position of the
    snapshot it read them in (None on MySQL: unknown)."""

    table: _server.Table
    rows: list[tuple[Any, ...]]
    watermark: tuple[str, int] | None
    gtid: str | None  # MariaDB's GTID state at the watermark
    progress: dict[str, Any] | None  # after these rows: the next run's


def read_chunks(
    cfg: MariaDbCdcConfig, tables: Mapping[str, _server.Table], progress: dict[str, Any], mariadb: bool
) -> Chunk | None:
    """The next rows of the current table (up to `incremental.snapshot.max.rows.per.run`), read in
    one read-only snapshot; None when the snapshot is paused or its table is not captured."""
    if progress.get("paused"):
        return None
    table = tables.get(str(progress["table"]))
    if table is None:
        return None
    if not table.key:  # its primary key dropped since the read began: no order to read it in, the next table
        return Chunk(table, [], None, None, next_table({**progress, "table": None}))
    limit, chunk_size = cfg.incremental_snapshot_max_rows_per_run, cfg.incremental_snapshot_chunk_size
    name = f"{_server.quote(table.db)}.{_server.quote(table.name)}"
    columns = ", ".join(_server.quote(c) for c, _ in table.columns)
    keys = [_server.quote(k) for k in table.key]
    positions = [i for i, (c, _) in enumerate(table.columns) if c in table.key]
    at = {table.columns[i][0]: i for i in positions}
    order = [at[k] for k in table.key]  # each key column's place in a row
    progress = dict(progress)
    if progress.get("key") != list(table.key):  # a first chunk, or the key changed since: from the start
        progress.update(key=list(table.key), last_key=None, max_key=None)
    rows: list[tuple[Any, ...]] = []
    with _server.connect(cfg, autocommit=False) as conn:
        with conn.cursor() as cur:
            cur.execute("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY")
            watermark, gtid = _snapshot_position(cur, mariadb)
            if progress.get("max_key") is None:
                newest = ", ".join(f"{k} DESC" for k in keys)
                cur.execute(f"SELECT {', '.join(keys)} FROM {name} ORDER BY {newest} LIMIT 1")
                found = cur.fetchone()
                if found is None:  # an empty table: done
                    progress.update(table=None)
                    conn.rollback()
                    return Chunk(table, [], watermark, gtid, next_table(progress))
                progress["max_key"] = [encode_key(v) for v in found]
            upto, upto_params = _bound(keys, _stored_key(progress, "max_key", len(keys)), "<")
            while len(rows) < limit:
                where, params = upto, list(upto_params)
                if progress.get("last_key") is not None:
                    after, after_params = _bound(keys, _stored_key(progress, "last_key", len(keys)), ">")
                    where, params = f"{after} AND {upto}", [*after_params, *params]
                size = min(chunk_size, limit - len(rows))
                cur.execute(
                    f"SELECT {columns} FROM {name} WHERE {where} ORDER BY {', '.join(keys)} LIMIT {size}", params
                )
                read = cur.fetchall()
                rows += [table.row(r) for r in read]
                progress["chunks"] = int(progress.get("chunks", 0)) + 1
                progress["rows"] = int(progress.get("rows", 0)) + len(read)
                if len(read) < size:
                    progress.update(table=None)  # read to its largest key: the next table
                    break
                progress["last_key"] = [encode_key(read[-1][i]) for i in order]
        conn.rollback()
    return Chunk(table, rows, watermark, gtid, next_table(progress))


def _snapshot_position(cur: Any, mariadb: bool) -> tuple[tuple[str, int] | None, str | None]:
    """The binlog position the transaction's snapshot stands at, and the GTID state there (MariaDB's,
    read in the snapshot's first statement; MySQL has none: None)."""
    cur.execute("SHOW STATUS LIKE 'binlog_snapshot_%%'")
    status = {str(name).lower(): value for name, value in cur.fetchall()}
    if not status.get("binlog_snapshot_file"):
        return None, None
    file, pos = str(status["binlog_snapshot_file"]), int(status["binlog_snapshot_position"])
    gtid = None
    if mariadb:
        cur.execute("SELECT BINLOG_GTID_POS(%s, %s)", (file, pos))
        found = cur.fetchone()
        gtid = None if found is None or found[0] is None else str(found[0])
    return (file, pos), gtid


def _stored_key(progress: Mapping[str, Any], name: str, width: int) -> list[Any]:
    """The key values kept in the progress under `name`, as query parameters; FatalError naming the
    fix when they are not what a run wrote (an offset edited by hand)."""
    stored = progress.get(name)
    try:
        if not isinstance(stored, list) or len(stored) != width:
            raise ValueError(f"{width} value(s) expected")
        return [decode_key(v) for v in stored]
    except (ValueError, TypeError, ArithmeticError) as exc:
        raise FatalError(
            f"the incremental snapshot of `{progress.get('table')}` in the committed position has an unreadable "
            f"`{name}` ({exc}): stop it (`connect snapshot NAME --stop`) and ask for it again"
        ) from exc


def _bound(keys: Sequence[str], values: Sequence[Any], op: str) -> tuple[str, list[Any]]:
    """`(k1, k2, …) > (v1, v2, …)` (op `>`) or `<=` (op `<`) as the range the index serves: `k1 > v1
    OR (k1 = v1 AND k2 > v2) …` (MariaDB does not range-scan a row comparison)."""
    terms, params = [], []
    for n, key in enumerate(keys):
        last = n == len(keys) - 1
        equal = [f"{k} = %s" for k in keys[:n]]
        compare = f"{key} {op}{'=' if last and op == '<' else ''} %s"
        terms.append("(" + " AND ".join([*equal, compare]) + ")")
        params += [*values[:n], values[n]]
    return "(" + " OR ".join(terms) + ")", params


def encode_key(value: Any) -> Any:
    """A key value as JSON holds it: numbers and texts as they are, the others tagged with their type."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, Decimal):
        return {"decimal": str(value)}
    if isinstance(value, dt.datetime):
        return {"datetime": value.isoformat()}
    if isinstance(value, dt.date):
        return {"date": value.isoformat()}
    if isinstance(value, dt.timedelta):
        return {"time_us": value // dt.timedelta(microseconds=1)}
    if isinstance(value, bytes | bytearray):
        return {"bytes": bytes(value).hex()}
    return {"text": str(value)}


def decode_key(value: Any) -> Any:
    """What `encode_key` made, as the query parameter it was read as."""
    if not isinstance(value, dict):
        return value
    if len(value) != 1:
        raise ValueError(f"a key value is one tagged value, not {len(value)}")
    ((kind, held),) = value.items()
    if kind == "decimal":
        return Decimal(held)
    if kind == "datetime":
        return dt.datetime.fromisoformat(held)
    if kind == "date":
        return dt.date.fromisoformat(held)
    if kind == "time_us":
        return dt.timedelta(microseconds=int(held))
    if kind == "bytes":
        return bytes.fromhex(held)
    if kind == "text":
        return str(held)
    raise ValueError(f"unknown key value type `{str(kind)[:40]}`")


def streamed_past(chunk: Chunk, position: Mapping[str, Any], cut_short: bool) -> bool:
    """Whether the run's stream got past the chunk's snapshot (to the binlog end it was to read, or
    at least to the watermark): only then may its rows follow the stream's changes. A stream cut
    short of it (`max.batch.size`) would stream, next run, changes the rows already hold after them."""
    if not cut_short:
        return True
    return chunk.watermark is not None and _server.coordinates(dict(position)) >= _server.position_key(chunk.watermark)


def merge(
    cfg: MariaDbCdcConfig,
    chunk: Chunk,
    streamed: pa.Table | None,
    truncates: Sequence[tuple[str, tuple[str, int]]],
    mariadb: bool,
    log: Any,
) -> tuple[str, pa.Table | None]:
    """The table's events of this run: the streamed ones, then the chunk's rows as `r` events
    (`snapshot=incremental`) but those a streamed transaction past the chunk's snapshot changed:
    (topic, events)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    table = chunk.table
    topic = topic_for(cfg.topic_prefix, table.db, table.name)
    if not chunk.rows:
        return topic, streamed
    if any(name == table.qualified and _newer(end, chunk.watermark) for name, end in truncates):
        log.info(
            "incremental snapshot of %s: %d chunk row(s) dropped, the table was truncated since",
            table.qualified,
            len(chunk.rows),
        )
        return topic, streamed
    changes = ChangeTable(topic, table.columns, table.key, source=MYSQL_SOURCE)
    now = int(time.time() * 1000)
    file, pos = chunk.watermark or ("", 0)
    source = _server.source_info(cfg, mariadb, table, now, "incremental", None, chunk.gtid, file, pos)
    for row in chunk.rows:
        changes.add_row("r", None, row, source, now)
    rows = changes.table()
    newer = _changed_since(streamed, table.key, chunk.watermark) if streamed is not None else set()
    if newer:
        keep = pa.array([_key(k, table.key) not in newer for k in rows.column("__key").to_pylist()], pa.bool_())
        dropped = len(rows) - pc.sum(keep).as_py()
        rows = rows.filter(keep)
        log.info(
            "incremental snapshot of %s: %d chunk row(s) dropped, changed by the stream since", table.qualified, dropped
        )
    if streamed is None or not len(streamed):
        return topic, rows
    return topic, pa.concat_tables([streamed, rows], promote_options="permissive")


def _newer(position: tuple[str, int], watermark: tuple[str, int] | None) -> bool:
    """Whether a transaction at `position` (any point of it but its start) is past the snapshot at
    `watermark`: a transaction ends at or before the snapshot's position, or begins at or after it.
    Without a watermark (MySQL) every streamed transaction counts as newer."""
    return watermark is None or _server.position_key(position) > _server.position_key(watermark)


def _changed_since(streamed: pa.Table, key: Sequence[str], watermark: tuple[str, int] | None) -> set[tuple[Any, ...]]:
    """The keys of streamed events whose transactions are past `watermark` (newer than the chunk's rows)."""
    if "__key" not in streamed.column_names:
        return set()
    sources = streamed.column("source").to_pylist()
    keys = streamed.column("__key").to_pylist()
    newer = set()
    for found, source in zip(keys, sources, strict=True):
        if source is None or found is None:  # a tombstone: its delete, just before, has the same key
            continue
        if _newer((str(source["file"]), int(source["pos"])), watermark):
            newer.add(_key(found, key))
    return newer


def _key(found: Mapping[str, Any], key: Sequence[str]) -> tuple[Any, ...]:
    """An event's key values in the table's key order."""
    return tuple(found.get(name) for name in key)
