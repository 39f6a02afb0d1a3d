"""Incremental snapshots (Debezium's, DBLog's watermark algorithm) of the PostgreSQL source: one
table re-read in chunks of its primary key while its changes keep streaming, read-only.

A signal (`execute-snapshot`, `stop-snapshot`, `pause-snapshot`, `resume-snapshot`; the runtime
hands a run the ones sent over REST) changes the progress kept in the source's committed position
(`incremental`): the tables queued, the one being read, its last key read and the largest key it
had when its read began. Each run that has a table to read:

1. reads the next chunks of the table, up to `incremental.snapshot.chunk.size` rows each and
   `incremental.snapshot.max.rows.per.run` in all, in key order, in one read-only REPEATABLE READ
   transaction whose first statement takes its snapshot (`pg_current_snapshot()`: the low
   watermark, with no write to the source). One query over the key columns gives the chunks' key
   ranges; the chunks are then read by Spark tasks, `incremental.snapshot.parallel.reads` at once,
   each on a connection of its own that imports the transaction's snapshot (`pg_export_snapshot`),
   so every row is read as of the one watermark;
2. only then reads the WAL end it streams to (the high watermark): every transaction the chunk's
   snapshot saw committed before it, so its changes are in this run's stream (or an earlier one's);
3. streams as any run does, and drops each chunk row whose key a streamed transaction the
   snapshot did *not* see changed (an update, a delete, a key moved): that change is newer than
   the row, and is in the stream; the other chunk rows go to the topic after the run's changes,
   as `r` events with `snapshot=incremental`;
4. commits the new progress with the position, in the runtime's one commit: a run killed at any
   point reads the same chunk again, and a chunk row never overwrites a newer change.

Rows inserted after the table's read began with a key past its largest are not read: the stream
carries them.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from connect_core.connectors.cdc._incremental import STATE, apply_signals, next_table, progress_stats
from connect_core.connectors.cdc.config import PostgresCdcConfig
from connect_core.connectors.cdc.envelope import ChangeTable, arrow_type, topic_for
from connect_core.connectors.cdc.postgres import _server
from connect_core.connectors.cdc.postgres._filter import RefusedFilter, checked_filter
from connect_core.connectors.cdc.postgres._signals import filter_columns

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import SparkSession

__all__ = ["STATE", "Chunk", "apply_signals", "merge", "next_table", "progress_stats", "read_chunks"]


@dataclass
class Chunk:
    """What a run read of the current table: its rows (as text), the snapshot it read them in."""

    table: _server.Table
    rows: list[tuple[Any, ...]]
    snapshot: tuple[int, int, frozenset[int]]  # xmin, xmax, xip (64-bit)
    progress: dict[str, Any] | None  # after these rows: the next run's
    #: The `surrogate-key` a table without a primary key is read by: what tells its chunk rows from
    #: the stream's changes (None: the primary key, the events' own key).
    by: str | None = None
    #: Why the table was given up (logged by the caller; None: it was read).
    skipped: str | None = None


def read_chunks(
    cfg: PostgresCdcConfig,
    tables: Mapping[str, _server.Table],
    progress: dict[str, Any],
    limit: int,
    spark: SparkSession | None = None,
) -> Chunk | None:
    """The next rows of the current table (up to `limit`), read in one read-only snapshot, in the
    order of its key (its `surrogate-key` when the signal named one), only those its filter keeps;
    None when the snapshot is paused or its table is gone (then the progress moves on)."""
    import psycopg2

    if progress.get("paused"):
        return None
    table = tables.get(str(progress["table"]))
    if table is None:  # no longer captured: the next one
        return None
    asked = dict((progress.get("options") or {}).get(table.qualified) or {})
    surrogate = asked.get("surrogate-key")
    key_names = [surrogate] if surrogate else list(table.key)
    key = [c for name in key_names for c in table.columns if c.name == name]
    if len(key) != len(key_names) or not key:
        # its key (or surrogate column) dropped since the snapshot began: no order to read it in
        return _given_up(table, progress, "its key columns are gone")
    try:  # checked when the signal was taken; again here, as what runs must be the checked form
        condition = checked_filter(asked["filter"], *filter_columns(cfg, table)) if "filter" in asked else None
    except RefusedFilter as exc:
        return _given_up(table, progress, f"its filter {exc}")
    conn = psycopg2.connect(**_server.libpq_args(cfg), options=_server.SESSION)
    try:
        try:
            return _read(cfg, conn, table, progress, limit, key, key_names, surrogate, condition, spark)
        except (psycopg2.DataError, _TaskFailed) as exc:
            # a row the filter cannot be evaluated on (a cast of a value that is no number): every run
            # would fail the same way, and stop the stream with it. Given up, its values not quoted
            # (they may be a masked column's).
            conn.rollback()
            kind = exc.kind if isinstance(exc, _TaskFailed) else type(exc).__name__
            return _given_up(table, progress, f"its filter failed on a row ({kind}, SQLSTATE {exc.pgcode})")
    finally:
        conn.close()


def _read(
    cfg: PostgresCdcConfig,
    conn: Any,
    table: _server.Table,
    progress: dict[str, Any],
    limit: int,
    key: list[Any],
    key_names: list[str],
    surrogate: str | None,
    condition: str | None,
    spark: SparkSession | None,
) -> Chunk:
    """`read_chunks`' reads, in one read-only REPEATABLE READ transaction on `conn` (and, with
    `spark`, in Spark tasks that import its snapshot)."""
    name = f"{_server.quote(table.schema)}.{_server.quote(table.name)}"
    # qualified: `ORDER BY "id"` would sort by the output column `"id"::text`, as text
    keys = ", ".join(f"s.{_server.quote(c.name)}" for c in key)
    conn.set_session(isolation_level="REPEATABLE READ", readonly=True)
    with conn.cursor() as cur:
        cur.execute("SELECT pg_current_snapshot()::text")  # the first statement: the transaction's snapshot
        snapshot = _parse_snapshot(cur.fetchone()[0])
        if surrogate and not _still_unique(cur, table, surrogate):
            return _given_up(table, progress, f"`{surrogate}` is no longer unique and NOT NULL")
        cur.execute(
            "SELECT a.attname, format_type(a.atttypid, a.atttypmod) FROM pg_attribute a "
            "WHERE a.attrelid = %s::regclass AND a.attnum > 0 AND NOT a.attisdropped",
            (name,),
        )
        types = dict(cur.fetchall())
        cast = ", ".join(f"%s::{_p(types[c.name])}" for c in key)
        progress = dict(progress)
        if progress.get("key") != key_names:  # a first chunk, or the key changed since: from the start
            progress.update(key=key_names, last_key=None, max_key=None)
        if progress.get("max_key") is None:
            newest = ", ".join(f"s.{_server.quote(c.name)} DESC" for c in key)
            key_texts = ", ".join(_server.output_text(f"s.{_server.quote(c.name)}", escaped=False) for c in key)
            only = f" WHERE {condition}" if condition else ""
            # no params: `%` as is
            cur.execute(f"SELECT {key_texts} FROM {name} AS s{only} ORDER BY {newest} LIMIT 1")
            found = cur.fetchone()
            if found is None:  # an empty table (or none of its rows match): done
                progress.update(table=None)
                return Chunk(table, [], snapshot, next_table(progress))
            progress["max_key"] = list(found)
        # the filter names the columns unqualified (the query reads one table); `%` doubled for psycopg2
        where = f" AND ({_p(condition)})" if condition else ""
        # below, queries run with parameters: every name with its `%` doubled (`_p`)
        after = f"({_p(keys)}) > ({cast}) AND " if progress.get("last_key") is not None else ""
        ranges, total = _ranges(cur, cfg, _p(name), key, f"{after}({_p(keys)}) <= ({cast}){where}", progress, limit)
        # each value as pgoutput streams it (`output_text`): what the stream's events are compared with
        columns = ", ".join(_server.output_text(f"s.{_p(_server.quote(c.name))}", escaped=True) for c in table.columns)
        reads = [
            (
                f"SELECT {columns} FROM {_p(name)} AS s WHERE "
                f"{f'({_p(keys)}) > ({cast}) AND ' if low is not None else ''}"
                f"({_p(keys)}) <= ({cast}){where} ORDER BY {_p(keys)}",
                (*(low or []), *high),
            )
            for low, high in ranges
        ]
        parallel = min(cfg.incremental_snapshot_parallel_reads, len(reads))
        if spark is None or parallel < 2:
            rows = [row for query, params in reads for row in _fetch(cur, query, params)]
        else:
            # the transaction waits, idle, while the tasks read: a server's idle timeout must not end it
            cur.execute("SET LOCAL idle_in_transaction_session_timeout = 0")
            cur.execute("SELECT pg_export_snapshot()")  # this transaction's snapshot, for the tasks to read in
            rows = _read_in_tasks(spark, cfg, cur.fetchone()[0], reads, parallel, len(table.columns))
        progress["chunks"] = int(progress.get("chunks", 0)) + len(reads)
        progress["rows"] = int(progress.get("rows", 0)) + total
        if total < limit:
            progress.update(table=None)  # read to its largest key: the next table
        else:
            progress["last_key"] = list(ranges[-1][1])
    conn.rollback()
    return Chunk(table, rows, snapshot, next_table(progress), by=surrogate if not table.key else None)


def _ranges(
    cur: Any,
    cfg: PostgresCdcConfig,
    name: str,
    key: list[Any],
    where: str,
    progress: dict[str, Any],
    limit: int,
) -> tuple[list[tuple[list[str] | None, list[str]]], int]:
    """The chunks of the run's next rows (up to `limit` of those `where` keeps, in key order):
    each chunk's key range, `(after, up to and with)` (after None: from the start), as text; and how
    many rows they hold. One query over the key columns only."""
    picked = ", ".join(f"s.{_p(_server.quote(c.name))} AS k{i}" for i, c in enumerate(key))
    order = ", ".join(f"k{i}" for i in range(len(key)))
    texts = ", ".join(_server.output_text(f"k{i}", escaped=True) for i in range(len(key)))
    size = cfg.incremental_snapshot_chunk_size
    cur.execute(
        f"SELECT {texts}, n, total FROM (SELECT *, row_number() OVER (ORDER BY {order}) AS n, count(*) OVER () AS "
        f"total FROM (SELECT {picked} FROM {name} AS s WHERE {where} ORDER BY {order} LIMIT {limit}) AS w) AS b "
        f"WHERE n %% {size} = 0 OR n = total ORDER BY n",
        [*(progress.get("last_key") or []), *progress["max_key"]],
    )
    ends = cur.fetchall()
    if not ends:
        return [], 0
    width = len(key)
    highs = [list(row[:width]) for row in ends]
    lows = [progress.get("last_key"), *highs[:-1]]
    return list(zip(lows, highs, strict=True)), int(ends[-1][-1])


def _p(sql: str) -> str:
    """`sql` (a name, a type, a filter) in a query run with parameters: its `%` doubled for psycopg2."""
    return sql.replace("%", "%%")


def _fetch(cur: Any, query: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
    cur.execute(query, params)
    return list(cur.fetchall())


class _TaskFailed(Exception):
    """A chunk's read in a Spark task failed on a row (psycopg2's `DataError`, raised again in the driver)."""

    def __init__(self, kind: str, pgcode: str | None) -> None:
        super().__init__(f"{kind}, SQLSTATE {pgcode}")
        self.kind, self.pgcode = kind, pgcode


def _read_in_tasks(
    spark: SparkSession,
    cfg: PostgresCdcConfig,
    exported: str,
    reads: list[tuple[str, tuple[Any, ...]]],
    parallel: int,
    width: int,
) -> list[tuple[Any, ...]]:
    """The chunks' rows (of `width` columns), in their order: read by Spark tasks (DataFrame API: on
    a Spark Connect pool too), `parallel` at once, each on a connection of its own in snapshot
    `exported`. The exporting transaction stays open until every task has read (the caller's), so
    each reads the snapshot the watermarks were taken with."""
    import pyarrow.compute as pc

    # what the tasks give back: each chunk's rows, a column of text per column of the table, by chunk
    # and place in it; a chunk -1 row: a read's `DataError`, its kind and SQLSTATE in the first column
    schema = ", ".join(["chunk int", "n int", *(f"c{i} string" for i in range(width))])
    rows: list[tuple[Any, ...]] = []
    # a Spark job per `parallel` chunks, one a task: what a job brings back through the driver (its
    # JVM's memory) is `parallel` chunks at most, not the run's rows
    for first in range(0, len(reads), parallel):
        wave = [(i, *reads[i]) for i in range(first, min(first + parallel, len(reads)))]
        read = functools.partial(_read_chunk_tasks, cfg, exported, wave, width)
        found = spark.range(0, len(wave), 1, len(wave)).mapInArrow(read, schema).toArrow()  # a row, a task
        failed = found.filter(pc.equal(found.column("chunk"), -1))
        if failed.num_rows:
            raise _TaskFailed(*str(failed.column("c0")[0]).split(":", 1))
        ordered = found.sort_by([("chunk", "ascending"), ("n", "ascending")])
        rows += zip(*(ordered.column(f"c{i}").to_pylist() for i in range(width)), strict=True)
    return rows


def _read_chunk_tasks(
    cfg: PostgresCdcConfig,
    exported: str,
    wave: list[tuple[int, str, tuple[Any, ...]]],
    width: int,
    batches: Iterator[pa.RecordBatch],
) -> Iterator[pa.RecordBatch]:
    """In a Spark task (`mapInArrow`): the chunks of `wave` (index in the run, query, parameters) its
    rows name, each read on a connection of its own in snapshot `exported`; a read's `DataError` (a
    row its filter fails on) as a chunk -1 row. A snapshot that cannot be imported fails the task
    (and the run)."""
    import psycopg2

    from connect_core.connectors.cdc.postgres._snapshot import in_snapshot

    for batch in batches:
        for at in batch.column("id").to_pylist():
            i, query, params = wave[at]
            with in_snapshot(cfg, exported) as conn, conn.cursor() as cur:
                try:
                    rows = _fetch(cur, query, params)
                except psycopg2.DataError as exc:
                    yield _task_rows(-1, [(f"{type(exc).__name__}:{exc.pgcode}", *[None] * (width - 1))], width)
                    return
            yield _task_rows(i, rows, width)


def _task_rows(chunk: int, rows: list[tuple[Any, ...]], width: int) -> pa.RecordBatch:
    import pyarrow as pa

    columns = [pa.array([row[i] for row in rows], pa.string()) for i in range(width)]
    return pa.RecordBatch.from_arrays(
        [pa.array([chunk] * len(rows), pa.int32()), pa.array(range(len(rows)), pa.int32()), *columns],
        names=["chunk", "n", *(f"c{i}" for i in range(width))],
    )


def _given_up(table: _server.Table, progress: dict[str, Any], why: str) -> Chunk:
    """No rows: the table cannot be read (any more) as asked; the next one is current."""
    return Chunk(table, [], (0, 0, frozenset()), next_table({**progress, "table": None}), skipped=why)


def _still_unique(cur: Any, table: _server.Table, column: str) -> bool:
    """Whether `column` still has a unique index over it alone and is NOT NULL (an order that
    reaches every row exactly once)."""
    facts = _server.key_facts(cur.connection, table.schema, table.name)
    return facts is not None and facts.unique.get(column, False)


def _parse_snapshot(text: str) -> tuple[int, int, frozenset[int]]:
    """`pg_current_snapshot()`'s `xmin:xmax:xip,…` (64-bit transaction ids)."""
    xmin, xmax, xip = text.split(":")
    return int(xmin), int(xmax), frozenset(int(x) for x in xip.split(",") if x)


def _seen(xid: int, snapshot: tuple[int, int, frozenset[int]]) -> bool:
    """Whether the transaction of 32-bit id `xid` (pgoutput's) had committed for `snapshot`: its
    full id is the one nearest the snapshot's `xmax` (its epoch, or the one before or after)."""
    xmin, xmax, xip = snapshot
    full = (xmax & ~0xFFFFFFFF) | (xid & 0xFFFFFFFF)
    # the full id nearest `xmax`: a transaction just past it is newer (not one 2^32 older)
    if full > xmax + (1 << 31):
        full -= 1 << 32
    elif full < xmax - (1 << 31):
        full += 1 << 32
    return full < xmin or (full < xmax and full not in xip)


def merge(
    cfg: PostgresCdcConfig, chunk: Chunk, streamed: pa.Table | None, lsn: int, log: Any
) -> tuple[str, pa.Table | None]:
    """The table's events of this run: the streamed ones, then the chunk's rows as `r` events
    (`snapshot=incremental`) but those a streamed transaction the chunk's snapshot did not see
    changed: (topic, events)."""
    import pyarrow as pa

    table = chunk.table
    topic = topic_for(cfg.topic_prefix, table.schema, table.name)
    if not chunk.rows:
        return topic, streamed
    changes = ChangeTable(
        topic, [(c.name, arrow_type(c.type_oid, c.typmod)) for c in table.columns], table.key, text=True
    )
    now = int(time.time() * 1000)
    source = _server.source_info(cfg, table.schema, table.name, now, "incremental", None, lsn)
    for row in chunk.rows:
        changes.add_row("r", None, row, source, now)
    rows = changes.table()
    newer = _changed_since(streamed, chunk.snapshot, chunk.by) if streamed is not None else set()
    if newer is None:  # truncated after the chunk's snapshot: its rows are gone
        log.info(
            "incremental snapshot of %s: %d chunk row(s) dropped, the table was truncated since",
            table.qualified,
            len(rows),
        )
        return topic, streamed
    if newer:
        keep = pa.array([k not in newer for k in _identities(rows, chunk.by, "after")], pa.bool_())
        dropped = len(rows) - pa.compute.sum(keep).as_py()
        rows = rows.filter(keep)
        log.info(
            "incremental snapshot of %s: %d chunk row(s) dropped, changed by the stream since", table.qualified, dropped
        )
    if streamed is None or not len(streamed):
        return topic, rows
    return topic, pa.concat_tables([streamed, rows], promote_options="permissive")


def _identities(events: pa.Table, by: str | None, image: str) -> list[tuple[Any, ...] | None]:
    """Which row each event is of: its key's values, or (`by`, a table without a key) the value of
    column `by` in its `image` (`before` or `after`; None where the event has none)."""
    if by is None:
        return [tuple(k.values()) if k is not None else None for k in events.column("__key").to_pylist()]
    values = events.column(image).combine_chunks()
    present = values.is_valid().to_pylist()
    return [(v,) if ok else None for v, ok in zip(values.field(by).to_pylist(), present, strict=True)]


def _changed_since(
    streamed: pa.Table, snapshot: tuple[int, int, frozenset[int]], by: str | None = None
) -> set[tuple[Any, ...]] | None:
    """The rows (as `_identities`) that streamed events whose transactions `snapshot` did not see
    changed (newer than its rows); None when one of them truncated the table (every chunk row is older
    than that). By `by`, a row is the one its old value (`before`: updates, deletes, whole under
    REPLICA IDENTITY FULL) and its new one (`after`: inserts, updates) name."""
    if by is None and "__key" not in streamed.column_names:
        return set()
    xids = streamed.column("source").combine_chunks().field("txId").to_pylist()
    ops = streamed.column("op").to_pylist()
    images = (
        [_identities(streamed, by, "after")]
        if by is None
        else [
            _identities(streamed, by, "before"),
            _identities(streamed, by, "after"),
        ]
    )
    newer: set[tuple[Any, ...]] = set()
    for i, (xid, op) in enumerate(zip(xids, ops, strict=True)):
        if xid is None or _seen(xid, snapshot):
            continue
        if op == "t":
            return None
        for ids in images:
            found = ids[i]
            if found is not None:
                newer.add(found)
    return newer
