"""PostgresCdcSourceConnector: a database's changes, deletes included, from its write-ahead log.

Debezium's PostgreSQL connector as a micro-batch: logical replication with the built-in
`pgoutput` plugin, through a slot and a publication of the connector's own (created when
missing). Each run

1. confirms to the server the position the last run committed (only now may the slot free the
   WAL before it: a run that dies before its commit is read again, never lost);
2. on its first run (`snapshot.mode=initial`), creates the slot and copies every captured table
   under the snapshot the slot exported, as `r` events: the stream then starts exactly where the
   copy ends, with no gap and no duplicate;
3. otherwise reads the slot from the committed position up to the WAL end the server had when
   the run began (about `max.batch.size` changes or `max.batch.bytes` at most, whole
   transactions only) and ends with the position just past the last complete transaction,
   committed with the records in the runtime's one metadata transaction. The changes are filed
   as they come and decoded a column at a time while the stream waits for the server
   (`pgbatch`), so a run costs about what the server takes to send them.

Events go to `<topic.prefix>.<schema>.<table>` in Debezium's envelope (`envelope.py`), keyed by
the primary key; a delete is followed by a tombstone. A table without a primary key has no key.
What the log does not carry: without `REPLICA IDENTITY FULL`, an update's `before` is null and a
delete's holds the key columns only (the others null); with FULL, both are whole. An unchanged
out-of-line (TOAST) value, a large text an update did not touch, is `__debezium_unavailable_value`
in `after` either way: PostgreSQL does not send it (with FULL, `before` holds it). Whether an
update changed the key is read from the old and new values, not from the message's marker.

A partitioned table's changes come under its own name (the publication's
`publish_via_partition_root`, set by the connector), so a row moved between partitions is a
delete and an insert in that order; changes the server decoded before the setting come under a
partition's name and go to the table's topic too.
"""

from __future__ import annotations

import itertools
import logging
import select
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from connect_core.connectors.cdc import pgbatch, pgoutput
from connect_core.connectors.cdc._deadline import Interrupts, ProbeTimeout, checked_server, within
from connect_core.connectors.cdc.config import LEGACY_PUBLICATION, LEGACY_SLOT, PostgresCdcConfig, captured
from connect_core.connectors.cdc.envelope import ChangeTable, arrow_type, check_topics, records_of, topic_for
from connect_core.sdk import Positions, SourceBatch, SourceConnector, SourcePosition, SourceTask
from connect_core.sdk.errors import ConfigError, FatalError, RetriableError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["PostgresCdcSourceConnector", "PostgresCdcSourceTask"]

VERSION = "0.1.0"
#: How long the stream must be quiet before the server's reported WAL end is taken as reached.
_QUIET_S = 0.5
#: Row changes decoded at a time while the stream waits for the server (`pgbatch`).
DECODE_CHUNK = 20_000
_SESSION = "-c TimeZone=UTC -c DateStyle=ISO -c bytea_output=hex -c extra_float_digits=3"


@dataclass(frozen=True)
class _Table:
    schema: str
    name: str
    columns: tuple[pgoutput.Column, ...]
    key: tuple[str, ...]  # the primary key

    @property
    def qualified(self) -> str:
        return f"{self.schema}.{self.name}"


@dataclass(frozen=True)
class _Names:
    """The slot and publication a run of the connector uses."""

    slot: str
    publication: str
    derived: bool  # the slot is named after the connector (`slot.name` unset): no other may use it

    @classmethod
    def of(cls, cfg: PostgresCdcConfig, connector: str, committed: Mapping[str, Any] | None) -> _Names:
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


class PostgresCdcSourceTask(SourceTask):
    def read(self, spark: SparkSession, positions: Positions) -> SourceBatch:
        cfg = PostgresCdcConfig.model_validate(self.config)
        partition = {"server": cfg.topic_prefix}
        committed = positions.offset(partition)
        names = _Names.of(cfg, self.context.connector, committed)
        with _connect(cfg) as conn:
            tables = _captured_tables(conn, cfg)
            partitions = _partitions(conn, tables)
            _ensure_publication(conn, cfg, names.publication, tables, bool(partitions))
            slot = _slot(conn, names.slot)
            if committed is None:
                if slot is not None:
                    self._left_slot(conn, names, slot)
                return self._first_run(spark, cfg, names, tables, partition)
            if cfg.snapshot_mode == "initial_only":
                return SourceBatch.empty()
            if slot is None:
                raise FatalError(
                    f"replication slot `{names.slot}` is gone (dropped, or invalidated by "
                    "`max_slot_wal_keep_size`): the changes after the committed position "
                    f"{pgoutput.format_lsn(int(committed['lsn']))} are lost to it. To start over with a new snapshot: "
                    "stop the connector, reset its offsets (`connect offsets reset NAME`), resume it"
                )
            target = _current_lsn(conn)
            self.log.info(
                "slot `%s` holds %s of WAL; streaming from %s to %s",
                names.slot,
                _bytes(slot["retained"]),
                pgoutput.format_lsn(int(committed["lsn"])),
                pgoutput.format_lsn(target),
            )
        # what the slot holds on the server, and how far the committed position is behind, at the start
        held = {
            "slot": names.slot,
            "wal_retained_bytes": slot["retained"],
            "wal_behind_bytes": max(0, target - int(committed["lsn"])),
        }
        stream = _Stream(cfg, names, {t.qualified: t for t in tables}, self.log, partitions)
        lsn = stream.read(int(committed["lsn"]), target)
        records = {topic: records_of(spark, table) for topic, table in stream.tables().items() if table.num_rows}
        offset = {"lsn": lsn, "snapshot": "done", **names.recorded()}
        if not records and lsn != int(committed["lsn"]):
            # nothing captured changed, but the WAL moved on (other tables): advance past it
            # at most every heartbeat interval, so the slot does not hold that WAL for ever
            last = int(committed.get("ts_ms", 0))
            now = int(time.time() * 1000)
            if not cfg.heartbeat_interval_ms or now - last < cfg.heartbeat_interval_ms:
                return SourceBatch(stats=held)
            offset["ts_ms"] = now
        elif records:
            offset["ts_ms"] = int(time.time() * 1000)
        self.log.info("%d change(s) of %d table(s) up to %s", stream.count, len(records), pgoutput.format_lsn(lsn))
        return SourceBatch(records, (SourcePosition(partition, offset),), stats=held)

    def has_new_data(self, positions: Positions) -> bool | None:
        """No new WAL since the committed position: nothing to read (one query, no Spark)."""
        cfg = PostgresCdcConfig.model_validate(self.config)
        committed = positions.offset({"server": cfg.topic_prefix})
        if committed is None:
            return True
        if cfg.snapshot_mode == "initial_only":
            return False
        try:
            with _connect(cfg) as conn:
                return _current_lsn(conn) > int(committed["lsn"])
        except Exception as exc:  # the run reports it, with its context
            self.log.info("cannot tell whether there is anything new (%s); running", exc)
            return None

    def _left_slot(self, conn: Any, names: _Names, slot: dict[str, Any]) -> None:
        """The slot exists, and no committed position of this connector refers to it. Dropped (to start
        over) only when it is provably this connector's: named after it (no other connector may use
        that name), left by a first run that never committed, and not streamed from right now.
        Anything else may be another connector's, whose committed position refers to it: the run fails."""
        if names.derived and not slot["active"]:
            self.log.warning("dropping slot `%s`, left by a first run that did not commit", names.slot)
            _drop_slot(conn, names.slot)
            return
        why = "is being streamed from" if slot["active"] else "exists"
        raise FatalError(
            f"replication slot `{names.slot}` {why}, and no committed position of this connector refers to "
            "it: it may be another connector's, so it is neither used nor dropped. Give this connector a "
            "slot of its own (`slot.name`, or none for one named after the connector); if the slot is a "
            f"leftover nothing uses, drop it: SELECT pg_drop_replication_slot('{names.slot}')"
        )

    def _first_run(
        self,
        spark: SparkSession,
        cfg: PostgresCdcConfig,
        names: _Names,
        tables: list[_Table],
        partition: dict[str, str],
    ) -> SourceBatch:
        """Create the slot; with a snapshot mode that copies, copy the tables under its snapshot."""
        copy = cfg.snapshot_mode in ("initial", "initial_only")
        temporary = cfg.snapshot_mode == "initial_only"  # nothing streams later: the slot goes with this run
        with _replication(cfg) as replication:
            cur = replication.cursor()
            cur.execute(
                f"CREATE_REPLICATION_SLOT {names.slot}{' TEMPORARY' if temporary else ''} LOGICAL pgoutput "
                + ("EXPORT_SNAPSHOT" if copy else "NOEXPORT_SNAPSHOT")
            )
            _, consistent_point, snapshot, _ = cur.fetchone()
            lsn = _parse_lsn(consistent_point)
            records = {}
            if copy:
                records = _snapshot(spark, cfg, tables, snapshot, lsn, self.log)
        self.log.info(
            "slot `%s` created at %s; %d table(s) %s",
            names.slot,
            consistent_point,
            len(tables),
            "copied" if copy else "not copied (snapshot.mode=" + cfg.snapshot_mode + ")",
        )
        offset = {"lsn": lsn, "snapshot": "done", "ts_ms": int(time.time() * 1000), **names.recorded()}
        return SourceBatch(records, (SourcePosition(partition, offset),))


class _Stream:
    """Reads the slot: whole transactions, each captured table's row changes filed as they came
    (`pgbatch.RowChanges`), decoded in bulk at the end (`tables`)."""

    def __init__(
        self,
        cfg: PostgresCdcConfig,
        names: _Names,
        by_name: dict[str, _Table],
        log: Any,
        partitions: dict[str, _Table] | None = None,
    ) -> None:
        self.cfg, self.names, self.by_name, self.log = cfg, names, by_name, log
        self.partitions = partitions or {}  # a partition's `schema.name` → its captured partitioned table
        self._pieces: dict[str, list[pgbatch.RowChanges | pgbatch.Truncated]] = {}  # by topic
        self._tables: dict[str, _Table] = {}  # by topic
        self._groups: dict[int, pgbatch.RowChanges | None] = {}  # by relation OID (None: not captured)
        self._skipped: list[bytes] = []  # changes to tables published but not captured
        self._truncates = 0
        self._decoder = pgoutput.Decoder()

    def read(self, start: int, target: int) -> int:
        """Stream from `start` to `target`; the position just past the last complete transaction read."""
        if target <= start:
            return start
        cfg = self.cfg
        timeout = cfg.poll_timeout_ms / 1000
        reached = start
        begin: pgoutput.Begin | None = None
        opened: dict[int, list[bytes]] = {}  # the open transaction's messages, by relation OID
        changes = polled = size = 0  # row changes streamed (captured or not) and their bytes; changes at the last poll
        with _replication(cfg) as replication:
            cur = replication.cursor()
            cur.start_replication(
                slot_name=self.names.slot,
                decode=False,
                start_lsn=start,
                options={"proto_version": "1", "publication_names": self.names.publication},
            )
            cur.send_feedback(flush_lsn=start, force=True)  # the last run's commit: confirmed only now
            heard = time.monotonic()  # the last data message (or the start)
            deadline = heard + timeout
            while True:
                message = cur.read_message()
                if message is None:
                    if changes != polled:  # row changes came since the last poll
                        polled, heard = changes, time.monotonic()
                        deadline = heard + timeout
                    # The server's reported WAL end can run ahead of what it has decoded and sent
                    # yet: trust it only once the stream has been quiet for a moment.
                    quiet = time.monotonic() - heard >= _QUIET_S
                    if begin is None and (reached >= target or (cur.wal_end >= target and quiet)):
                        break
                    if time.monotonic() > deadline:
                        if begin is None:
                            break
                        raise RetriableError(
                            f"the server streamed no more of slot `{self.names.slot}` within "
                            f"{cfg.poll_timeout_ms} ms while a transaction was open (poll.timeout.ms)"
                        )
                    if not self._decode_some():  # the server has sent nothing yet: decode what it sent
                        select.select([cur], [], [], 0.2)
                    continue
                payload = message.payload
                if payload and payload[0] in pgoutput.ROW_CHANGES:  # the hot path: filed as it came
                    oid = int.from_bytes(payload[1:5], "big")
                    into = opened.get(oid)
                    if into is None:
                        into = opened[oid] = self._enter(oid, begin)
                    into.append(payload)
                    changes += 1
                    size += len(payload)
                    continue
                heard = time.monotonic()
                deadline = heard + timeout
                event = self._decoder.decode(payload)
                if isinstance(event, pgoutput.Begin):
                    if begin is not None:
                        raise pgoutput.PgOutputError("a Begin inside an open transaction (no Commit before it)")
                    begin, opened = event, {}
                elif isinstance(event, pgoutput.Commit):
                    begin, opened = None, {}  # a change before the next Begin is outside any transaction
                    self._skipped.clear()
                    reached = event.end_lsn
                    if event.end_lsn >= target or changes >= cfg.max_batch_size or size >= cfg.max_batch_bytes:
                        break
                elif isinstance(event, pgoutput.Relation):  # a new description: its changes file apart
                    self._groups.pop(event.oid, None)
                    opened.pop(event.oid, None)
                elif isinstance(event, pgoutput.Truncate):
                    for oid in event.relation_oids:
                        self._truncate(oid, begin)
                        opened.pop(oid, None)  # the changes after it file after it
        return reached

    @property
    def count(self) -> int:
        """Row changes and truncates of captured tables streamed."""
        return self._truncates + sum(
            len(p.messages) for pieces in self._pieces.values() for p in pieces if isinstance(p, pgbatch.RowChanges)
        )

    def tables(self) -> dict[str, Any]:
        """Each captured table's events (an Arrow table), by topic."""
        return {
            topic: pgbatch.envelope_table(topic, self._tables[topic].key, pieces)
            for topic, pieces in self._pieces.items()
        }

    def _decode_some(self) -> bool:
        """Decode `DECODE_CHUNK` filed changes of a table that has that many pending, if one has:
        done while the stream waits for the server, the decoding costs the run (almost) nothing."""
        for group in self._groups.values():
            if group is not None and group.pending >= DECODE_CHUNK:
                group.decode_early(DECODE_CHUNK)
                return True
        return False

    def _group(self, oid: int) -> pgbatch.RowChanges | None:
        """The RowChanges a change to relation `oid` goes to now (None: a table not captured)."""
        if oid in self._groups:
            return self._groups[oid]
        relation = self._decoder.relation(oid)
        name = f"{relation.namespace}.{relation.name}"
        table = self.by_name.get(name) or self.partitions.get(name)  # published, maybe not captured
        group = None
        if table is not None:
            topic = topic_for(self.cfg.topic_prefix, table.schema, table.name)
            group = pgbatch.RowChanges(relation, topic, table.key)
            self._pieces.setdefault(topic, []).append(group)
            self._tables[topic] = table
        self._groups[oid] = group
        return group

    def _enter(self, oid: int, begin: pgoutput.Begin | None) -> list[bytes]:
        """The list the open transaction's changes to relation `oid` go to."""
        if begin is None:
            raise pgoutput.PgOutputError("a row change outside a transaction (no Begin before it)")
        group = self._group(oid)
        if group is None:
            return self._skipped
        return group.begin(self._source(group.relation, begin), int(time.time() * 1000))

    def _truncate(self, oid: int, begin: pgoutput.Begin | None) -> None:
        if begin is None:
            raise pgoutput.PgOutputError("a TRUNCATE outside a transaction (no Begin before it)")
        group = self._group(oid)
        if group is None:
            return
        relation = group.relation
        self._groups.pop(oid, None)  # the changes after it file after it
        topic = topic_for(self.cfg.topic_prefix, relation.namespace, relation.name)
        self._pieces[topic].append(pgbatch.Truncated(relation, self._source(relation, begin), int(time.time() * 1000)))
        self._truncates += 1

    def _source(self, relation: pgoutput.Relation, begin: pgoutput.Begin) -> dict[str, Any]:
        commit_ms = int(begin.commit_ts.timestamp() * 1000)
        return _source(self.cfg, relation.namespace, relation.name, commit_ms, "false", begin.xid, begin.final_lsn)


#: Integer types a primary key can be split into ranges by.
_SPLITTABLE = {20, 21, 23}
#: Tables smaller than this are read whole, by one thread.
CHUNK_MIN_BYTES = 8 << 20


@dataclass(frozen=True)
class _Chunk:
    table: _Table
    where: str  # a range of the primary key, or empty: the whole table
    params: tuple[Any, ...] = ()


def _snapshot(
    spark: SparkSession, cfg: PostgresCdcConfig, tables: list[_Table], snapshot: str, lsn: int, log: Any
) -> dict[str, Any]:
    """Every captured table as it was at the slot's snapshot, as `r` events: read in chunks (a big
    table with an integer key in `snapshot.max.threads` ranges of it) by as many connections at
    once, each in the same exported snapshot."""
    from concurrent.futures import ThreadPoolExecutor

    threads = cfg.snapshot_max_threads
    with _snapshot_connection(cfg, snapshot) as conn:
        chunks = [chunk for table in tables for chunk in _chunks(conn, table, threads)]
        if threads == 1 or len(chunks) == 1:
            rows = [_read_chunk(conn, chunk) for chunk in chunks]
        else:

            def read(chunk: _Chunk) -> list[tuple[Any, ...]]:
                with _snapshot_connection(cfg, snapshot) as own:
                    return _read_chunk(own, chunk)

            with ThreadPoolExecutor(min(threads, len(chunks)), thread_name_prefix="snapshot") as pool:
                rows = list(pool.map(read, chunks))
    records = {}
    now = int(time.time() * 1000)
    for table in tables:
        changes = ChangeTable(
            topic_for(cfg.topic_prefix, table.schema, table.name),
            [(c.name, arrow_type(c.type_oid, c.typmod)) for c in table.columns],
            table.key,
            text=True,
        )
        source = _source(cfg, table.schema, table.name, now, "true", None, lsn)
        for chunk, chunk_rows in zip(chunks, rows, strict=True):
            if chunk.table is table:
                for row in chunk_rows:
                    changes.add_row("r", None, row, source, now)
        if len(changes):
            changes.mark_last(snapshot="last")
            records[changes.topic] = changes.records(spark)
        log.info("snapshot of %s: %d row(s)", table.qualified, len(changes))
    return records


@contextmanager
def _snapshot_connection(cfg: PostgresCdcConfig, snapshot: str) -> Iterator[Any]:
    """A read-only connection in the slot's exported snapshot."""
    import psycopg2

    conn = psycopg2.connect(**_dsn(cfg), options=_SESSION)
    try:
        conn.set_session(isolation_level="REPEATABLE READ", readonly=True)
        with conn.cursor() as cur:
            cur.execute("SET TRANSACTION SNAPSHOT %s", (snapshot,))
        yield conn
        conn.rollback()
    finally:
        conn.close()


def _chunks(conn: Any, table: _Table, threads: int) -> list[_Chunk]:
    """`table` in up to `threads` ranges of its integer primary key (whole if small or not splittable)."""
    key = [c for c in table.columns if c.name in table.key]
    if threads == 1 or len(key) != 1 or key[0].type_oid not in _SPLITTABLE:
        return [_Chunk(table, "")]
    name, column = f"{_quote(table.schema)}.{_quote(table.name)}", _quote(key[0].name)
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
    texts = ", ".join(f"{_quote(c.name)}::text" for c in table.columns)
    with conn.cursor() as cur:
        cur.execute(f"SELECT {texts} FROM {_quote(table.schema)}.{_quote(table.name)} {chunk.where}", chunk.params)
        return cur.fetchall()


def _source(
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


def _dsn(cfg: PostgresCdcConfig) -> dict[str, Any]:
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


@contextmanager
def _connect(cfg: PostgresCdcConfig, cut: Interrupts | None = None) -> Iterator[Any]:
    """A connection; with `cut`, one a deadline may cut (libpq's own `connect_timeout` bounds the
    connect, which has no socket to cut yet)."""
    import psycopg2

    dsn = _dsn(cfg)
    if cut is not None:
        # past the deadline, so that the deadline (one message) always comes first; it ends the thread
        dsn["connect_timeout"] = max(2, -(-cfg.probe_timeout_ms // 1000) + 1)  # libpq: 2 s at least
    try:
        conn = psycopg2.connect(**dsn, options=_SESSION)
    except psycopg2.OperationalError as exc:
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
def _replication(cfg: PostgresCdcConfig) -> Iterator[Any]:
    import psycopg2
    from psycopg2.extras import LogicalReplicationConnection

    try:
        conn = psycopg2.connect(**_dsn(cfg), options=_SESSION, connection_factory=LogicalReplicationConnection)
    except psycopg2.OperationalError as exc:
        raise RetriableError(
            f"cannot open a replication connection to {cfg.database_hostname}:{cfg.database_port} "
            f"(does `{cfg.database_user}` have REPLICATION, and pg_hba.conf a `replication` line?): "
            f"{str(exc).strip()}"
        ) from exc
    try:
        yield conn
    finally:
        conn.close()


def _captured_tables(conn: Any, cfg: PostgresCdcConfig) -> list[_Table]:
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
        tables.append(_Table(schema, name, cols, tuple(c.name for c in cols if c.key)))
    check_topics(cfg.topic_prefix, ((t.schema, t.name) for t in tables))  # before anything is read
    if not tables:
        raise ConfigError(
            f"no table of `{cfg.database_dbname}` matches table.include.list / table.exclude.list",
            {"table.include.list": ["matches no table"]},
        )
    return tables


def _ensure_publication(
    conn: Any, cfg: PostgresCdcConfig, publication: str, tables: list[_Table], partitioned: bool
) -> None:
    """The connector's publication, created when missing. A partitioned table's changes must come
    under its own name, in one stream in commit order (`publish_via_partition_root`), not under each
    partition's: set on a publication the connector creates or manages, required of another."""
    name = _quote(publication)
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
            what = "FOR TABLE " + ", ".join(f"{_quote(t.schema)}.{_quote(t.name)}" for t in tables)
        cur.execute(f"CREATE PUBLICATION {name} {what} WITH (publish_via_partition_root = true)")


def _partitions(conn: Any, tables: list[_Table]) -> dict[str, _Table]:
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


def _slot(conn: Any, name: str) -> dict[str, Any] | None:
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


def _drop_slot(conn: Any, name: str) -> None:
    with conn.cursor() as cur:
        cur.execute("SELECT pg_drop_replication_slot(%s)", (name,))


def _current_lsn(conn: Any) -> int:
    with conn.cursor() as cur:
        cur.execute("SELECT pg_current_wal_insert_lsn()::text")  # the write position may lag commits
        return _parse_lsn(cur.fetchone()[0])


def _parse_lsn(text: str) -> int:
    high, low = text.split("/")
    return (int(high, 16) << 32) | int(low, 16)


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _bytes(n: int) -> str:
    return f"{n / 1024 / 1024:.1f} MiB" if n >= 1 << 20 else f"{n} B"


class PostgresCdcSourceConnector(SourceConnector[PostgresCdcConfig]):
    """PostgreSQL's changes (inserts, updates, deletes, truncates) from its log, as Debezium's events."""

    config_model = PostgresCdcConfig
    task_class = PostgresCdcSourceTask
    version = VERSION

    def task_configs(self, config: PostgresCdcConfig, max_tasks: int) -> list[dict[str, Any]]:
        return [config.model_dump(by_alias=True, exclude_none=True, exclude={"name", "tasks_max"})]  # one slot

    def output_topics(self, config: PostgresCdcConfig) -> list[str]:
        return []  # one per captured table, known only from the database

    def validate(self, config: PostgresCdcConfig) -> dict[str, list[str]]:
        """The server, checked when the connector is registered (as Debezium does): reachable within
        `probe.timeout.ms` in all (connect and queries), `wal_level=logical`, and no two captured tables
        going to one topic. Skipped while a connection setting is a provider's placeholder."""
        if _placeholders(config):
            return {}
        return checked_server("PostgreSQL", config.server(), config.probe_timeout_ms, lambda cut: _probe(config, cut))

    def claims(self, name: str, config: PostgresCdcConfig) -> dict[str, str]:
        """The slot (a server's, whatever the database) and a publication the connector creates or
        alters (a database's) are the connector's alone."""
        server = config.database().rsplit("/", 1)[0]
        held = {f"replication slot `{config.slot(name)}` of the PostgreSQL at {server}": "slot.name"}
        if config.publication_autocreate_mode != "disabled":
            held[f"publication `{config.publication(name)}` of database {config.database()}"] = "publication.name"
        return held

    def deleted(self, name: str, config: PostgresCdcConfig) -> None:
        """`slot.drop.on.stop`: drop the connector's slot, so it holds no WAL any more (Debezium drops
        it when the connector stops; here the connector is gone, so it stops for good). A run still
        streaming from it makes the drop fail: the warning says so, and the slot stays. Bounded by
        `probe.timeout.ms`: a delete never waits on a server that does not answer."""
        if not config.slot_drop_on_stop:
            return
        slot = config.slot(name)

        def drop(cut: Interrupts) -> bool:
            with _connect(config, cut) as conn:
                if _slot(conn, slot) is None:
                    return False
                _drop_slot(conn, slot)
                return True

        try:
            dropped = within(config.probe_timeout_ms / 1000, drop, "pg-cdc-drop")
        except ProbeTimeout as exc:
            raise RetriableError(
                f"PostgreSQL at {config.server()} did not answer within {config.probe_timeout_ms} ms "
                f"(probe.timeout.ms): slot `{slot}` not dropped"
            ) from exc
        if dropped:
            logging.getLogger("connect").info("connector %s: slot `%s` dropped", name, slot)


def _placeholders(config: PostgresCdcConfig) -> bool:
    """Whether a setting the connection needs is a config provider's placeholder (resolved only where
    the task runs): the server cannot be checked at create then."""
    values = (config.database_hostname, config.database_user, config.database_dbname, config.database_password)
    return any(v is not None and "${" in v for v in values)


def _probe(cfg: PostgresCdcConfig, cut: Interrupts) -> dict[str, list[str]]:
    """What the server lacks for this connector, by config key (empty: nothing)."""
    problems: dict[str, list[str]] = {}
    with _connect(cfg, cut) as conn:
        with conn.cursor() as cur:
            cur.execute("SHOW wal_level")
            (level,) = cur.fetchone()
        if level != "logical":
            problems["database.hostname"] = [
                f"the server's wal_level is {level}: set wal_level=logical (and restart it) for logical replication"
            ]
        try:
            _captured_tables(conn, cfg)
        except ConfigError as exc:
            if "table.include.list" in exc.errors and exc.errors["table.include.list"] != ["matches no table"]:
                problems.update(exc.errors)  # a topic collision; no table yet is fine: it may come
    return problems
