"""The PostgreSQL source's snapshot: every captured table as it was at the slot's exported
snapshot, read in chunks of its primary key by several connections in that snapshot at once."""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from connect_core.connectors.cdc.config import PostgresCdcConfig
from connect_core.connectors.cdc.envelope import ChangeTable, arrow_type, topic_for
from connect_core.connectors.cdc.postgres import _server

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["CHUNK_MIN_BYTES", "in_snapshot", "snapshot"]


#: Integer types a primary key can be split into ranges by.
_SPLITTABLE = {20, 21, 23}


#: How long a read in an exported snapshot waits for a table's lock before its run fails.
LOCK_TIMEOUT_S = 30

#: Tables smaller than this are read whole, by one thread.
CHUNK_MIN_BYTES = 8 << 20


@dataclass(frozen=True)
class _Chunk:
    table: _server.Table
    where: str  # a range of the primary key, or empty: the whole table
    params: tuple[Any, ...] = ()


def snapshot(
    spark: SparkSession, cfg: PostgresCdcConfig, tables: list[_server.Table], snapshot: str, lsn: int, log: Any
) -> dict[str, Any]:
    """Every captured table as it was at the slot's snapshot, as `r` events: read in chunks (a big
    table with an integer key in `snapshot.max.threads` ranges of it) by as many connections at
    once, each in the same exported snapshot."""
    from concurrent.futures import ThreadPoolExecutor

    threads = cfg.snapshot_max_threads
    with in_snapshot(cfg, snapshot) as conn:
        chunks = [chunk for table in tables for chunk in _chunks(conn, table, threads)]
        if threads == 1 or len(chunks) == 1:
            rows = [_read_chunk(conn, chunk) for chunk in chunks]
        else:

            def read(chunk: _Chunk) -> list[tuple[Any, ...]]:
                with in_snapshot(cfg, snapshot) as own:
                    return _read_chunk(own, chunk)

            with ThreadPoolExecutor(min(threads, len(chunks)), thread_name_prefix="snapshot") as pool:
                rows = list(pool.map(read, chunks))
    records = {}
    now = int(time.time() * 1000)
    masks = cfg.column_masks()
    for table in tables:
        changes = ChangeTable(
            topic_for(cfg.topic_prefix, table.schema, table.name),
            [(c.name, arrow_type(c.type_oid, c.typmod)) for c in table.columns],
            table.key,
            text=True,
        )
        source = _server.source_info(cfg, table.schema, table.name, now, "true", None, lsn)
        for chunk, chunk_rows in zip(chunks, rows, strict=True):
            if chunk.table is table:
                for row in chunk_rows:
                    changes.add_row("r", None, row, source, now)
        if len(changes):
            changes.mark_last(snapshot="last")
            records[changes.topic] = changes.records(spark, masks)
        log.info("snapshot of %s: %d row(s)", table.qualified, len(changes))
    return records


@contextmanager
def in_snapshot(cfg: PostgresCdcConfig, snapshot: str) -> Iterator[Any]:
    """A read-only connection in `snapshot` (one `pg_export_snapshot` gave: the slot's, an
    incremental snapshot's)."""
    import psycopg2

    conn = psycopg2.connect(**_server.libpq_args(cfg), options=_server.SESSION)
    try:
        conn.set_session(isolation_level="REPEATABLE READ", readonly=True)
        with conn.cursor() as cur:
            cur.execute("SET TRANSACTION SNAPSHOT %s", (snapshot,))
            # the exporting transaction holds the table's lock while it waits for this one: a DDL
            # queued between them would block this read for ever (PostgreSQL sees no deadlock across
            # connections it does not know wait for each other), so the wait is bounded: the run fails
            cur.execute("SET LOCAL lock_timeout = %s", (f"{LOCK_TIMEOUT_S}s",))
        yield conn
        conn.rollback()
    finally:
        conn.close()


def _chunks(conn: Any, table: _server.Table, threads: int) -> list[_Chunk]:
    """`table` in up to `threads` ranges of its integer primary key (whole if small or not splittable)."""
    key = [c for c in table.columns if c.name in table.key]
    if threads == 1 or len(key) != 1 or key[0].type_oid not in _SPLITTABLE:
        return [_Chunk(table, "")]
    name, column = f"{_server.quote(table.schema)}.{_server.quote(table.name)}", _server.quote(key[0].name)
    with conn.cursor() as cur:
        cur.execute("SELECT pg_relation_size(%s::regclass)", (name,))
        (size,) = cur.fetchone()
        if size < CHUNK_MIN_BYTES:
            return [_Chunk(table, "")]
        cur.execute(f"SELECT min({column}), max({column}) FROM {name}")
        low, high = cur.fetchone()
    if low is None:
        return [_Chunk(table, "")]
    step = (high - low) // threads + 1
    bounds = [low + i * step for i in range(threads)] + [high + 1]
    return [_Chunk(table, f"WHERE {column} >= %s AND {column} < %s", (a, b)) for a, b in itertools.pairwise(bounds)]


def _read_chunk(conn: Any, chunk: _Chunk) -> list[tuple[Any, ...]]:
    table = chunk.table
    # each value in the form pgoutput streams it (`_server.output_text`), which `from_text` reads
    texts = ", ".join(_server.output_text(_server.quote(c.name), escaped=True) for c in table.columns)
    with conn.cursor() as cur:
        cur.execute(
            f"SELECT {texts} FROM {_server.quote(table.schema)}.{_server.quote(table.name)} {chunk.where}", chunk.params
        )
        return cur.fetchall()
