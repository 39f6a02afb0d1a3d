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

Events go to `<topic.prefix>.<schema>.<table>` in Debezium's envelope (`cdc/envelope.py`), keyed by
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

import json
import logging
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from connect_core.connectors.cdc import _signal_table
from connect_core.connectors.cdc._deadline import Interrupts, ProbeTimeout, checked_server, checked_signal, within
from connect_core.connectors.cdc._source import CdcSourceTask, source_partition
from connect_core.connectors.cdc.config import PostgresCdcConfig
from connect_core.connectors.cdc.envelope import records_of, topic_for
from connect_core.connectors.cdc.postgres import _incremental, _server, _signals, _snapshot, _stream, pgoutput
from connect_core.sdk import Positions, Signal, SourceBatch, SourceConnector, SourcePosition
from connect_core.sdk.errors import ConfigError, FatalError, RetriableError
from connect_core.sdk.signals import SIGNAL_OPTIONS
from connect_core.sdk.testing import faults

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["PostgresCdcSourceConnector", "PostgresCdcSourceTask"]


class PostgresCdcSourceTask(CdcSourceTask[PostgresCdcConfig]):
    config_model = PostgresCdcConfig

    def read(self, spark: SparkSession, positions: Positions) -> SourceBatch:
        cfg = self.cdc_config()
        partition = source_partition(cfg)
        committed = positions.offset(partition)
        names = _server.Names.of(cfg, self.context.connector, committed)
        with _server.connect(cfg) as conn:
            tables = _server.captured_tables(conn, cfg)
            signal_table = _signal_table.signal_table(cfg, (t.qualified for t in tables))
            partitions = _server.partitions(conn, tables)
            _server.ensure_publication(conn, cfg, names.publication, tables, bool(partitions))
            slot = _server.slot(conn, names.slot)
            if committed is None:
                if slot is not None:
                    self._left_slot(conn, names, slot)
                return self._first_run(spark, cfg, names, [t for t in tables if t.qualified != signal_table], partition)
            if cfg.snapshot_mode == "initial_only":
                return SourceBatch.empty()
            if slot is None:
                raise FatalError(
                    f"replication slot `{names.slot}` is gone (dropped, or invalidated by "
                    "`max_slot_wal_keep_size`): the changes after the committed position "
                    f"{pgoutput.format_lsn(int(committed['lsn']))} are lost to it. To start over with a new snapshot: "
                    "stop the connector, reset its offsets (`connect offsets reset NAME`), resume it"
                )
            by_name = {t.qualified: t for t in tables if t.qualified != signal_table}
            keys = {name: list(t.key) for name, t in by_name.items()}
            before = committed.get(_incremental.STATE)
            options = _snapshot_options(cfg, by_name)
            progress = _incremental.apply_signals(before, self.context.signals, keys, self.log, options)
            chunk = self._chunk(spark, cfg, by_name, progress)
            if chunk is not None:
                faults.checkpoint("mid_source")  # a chunk read, the WAL end not yet: nothing of the run is kept
            # the high watermark, read after the chunk's snapshot: every transaction it saw is streamed by now
            target = _server.current_lsn(conn)
            self.log.info(
                "slot `%s` holds %s of WAL; streaming from %s to %s",
                names.slot,
                _server.size_text(slot["retained"]),
                pgoutput.format_lsn(int(committed["lsn"])),
                pgoutput.format_lsn(target),
            )
        # what the slot holds on the server, and how far the committed position is behind, at the start
        held = {
            "slot": names.slot,
            "wal_retained_bytes": slot["retained"],
            "wal_behind_bytes": max(0, target - int(committed["lsn"])),
        }
        stream = _stream.Stream(cfg, names, {t.qualified: t for t in tables}, self.log, partitions)
        lsn = stream.read(int(committed["lsn"]), target)
        masks = cfg.column_masks()
        events = stream.tables()
        if chunk is not None:
            topic, merged = _incremental.merge(cfg, chunk, events.get(_topic_of(cfg, chunk)), lsn, self.log)
            if merged is not None:
                events[topic] = merged
            progress = chunk.progress
        if signal_table is not None:  # the `source` channel: acted on after this run's chunk, from the next one
            schema, name = signal_table.split(".", 1)
            signalled = events.pop(topic_for(cfg.topic_prefix, schema, name), None)
            if signalled is not None:
                signalled_now = _signal_table.signals_of(signalled, self.log)
                progress = _incremental.apply_signals(progress, signalled_now, keys, self.log, options)
        records = {topic: records_of(spark, t, masks) for topic, t in events.items() if t.num_rows}
        offset: dict[str, Any] = {"lsn": lsn, "snapshot": "done", **names.recorded()}
        if progress is not None:
            offset[_incremental.STATE] = progress
        held.update(_incremental.progress_stats(progress))
        if progress != before:  # a signal acted on, chunks read: the progress is committed whatever else
            offset["ts_ms"] = int(time.time() * 1000)
            return SourceBatch(records, (SourcePosition(partition, offset),), stats=held)
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

    def _chunk(
        self,
        spark: SparkSession,
        cfg: PostgresCdcConfig,
        by_name: dict[str, _server.Table],
        progress: dict[str, Any] | None,
    ) -> _incremental.Chunk | None:
        """The incremental snapshot's next rows, read before the run's WAL end is (None: nothing to read)."""
        while progress is not None and not progress.get("paused"):
            if progress.get("table") not in by_name:  # no longer captured: the next table
                self.log.warning("incremental snapshot: `%s` is no longer captured: skipped", progress.get("table"))
                progress = _incremental.next_table({**progress, "table": None})
                continue
            chunk = _incremental.read_chunks(cfg, by_name, progress, cfg.incremental_snapshot_max_rows_per_run, spark)
            if chunk is not None and chunk.skipped:
                self.log.warning("incremental snapshot: `%s` skipped: %s", chunk.table.qualified, chunk.skipped)
            return chunk
        return None

    def log_moved_past(self, cfg: PostgresCdcConfig, committed: Mapping[str, Any]) -> bool:
        """New WAL since the committed position (without it: nothing to read)."""
        with _server.connect(cfg) as conn:
            return _server.current_lsn(conn) > int(committed["lsn"])

    def _left_slot(self, conn: Any, names: _server.Names, slot: dict[str, Any]) -> None:
        """The slot exists, and no committed position of this connector refers to it. Dropped (to start
        over) only when it is provably this connector's: named after it (no other connector may use
        that name), left by a first run that never committed, and not streamed from right now.
        Anything else may be another connector's, whose committed position refers to it: the run fails."""
        if names.derived and not slot["active"]:
            self.log.warning("dropping slot `%s`, left by a first run that did not commit", names.slot)
            _server.drop_slot(conn, names.slot)
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
        names: _server.Names,
        tables: list[_server.Table],
        partition: dict[str, str],
    ) -> SourceBatch:
        """Create the slot; with a snapshot mode that copies, copy the tables under its snapshot."""
        copy = cfg.snapshot_mode in ("initial", "initial_only")
        temporary = cfg.snapshot_mode == "initial_only"  # nothing streams later: the slot goes with this run
        with _server.replication(cfg) as replication:
            cur = replication.cursor()
            cur.execute(
                f"CREATE_REPLICATION_SLOT {names.slot}{' TEMPORARY' if temporary else ''} LOGICAL pgoutput "
                + ("EXPORT_SNAPSHOT" if copy else "NOEXPORT_SNAPSHOT")
            )
            _, consistent_point, snapshot, _ = cur.fetchone()
            lsn = _server.parse_lsn(consistent_point)
            records = {}
            if copy:
                records = _snapshot.snapshot(spark, cfg, tables, snapshot, lsn, self.log)
        self.log.info(
            "slot `%s` created at %s; %d table(s) %s",
            names.slot,
            consistent_point,
            len(tables),
            "copied" if copy else "not copied (snapshot.mode=" + cfg.snapshot_mode + ")",
        )
        offset = {"lsn": lsn, "snapshot": "done", "ts_ms": int(time.time() * 1000), **names.recorded()}
        # signals sent before the first run: what it copied needs no re-read, what it did not is queued
        signals = [] if copy else self.context.signals
        by_name = {t.qualified: t for t in tables}
        progress = _incremental.apply_signals(None, signals, _keys(tables), self.log, _snapshot_options(cfg, by_name))
        if progress is not None:
            offset[_incremental.STATE] = progress
        return SourceBatch(records, (SourcePosition(partition, offset),))


def _snapshot_options(
    cfg: PostgresCdcConfig, by_name: Mapping[str, _server.Table]
) -> Callable[[Signal, str], dict[str, Any]]:
    """What a signal asks of a table's read (its `surrogate-key`, its filter), checked against the
    server as `check_signal` checks it where it is sent (a `source` channel signal only here)."""

    checked: dict[tuple[str, str], dict[str, Any] | ValueError] = {}  # a flood of one signal: asked once

    def options(signal: Signal, name: str) -> dict[str, Any]:
        if not any(signal.data.get(k) for k in SIGNAL_OPTIONS) and by_name[name].key:
            return {}  # a table read by its primary key, whole: nothing to ask the server
        asked = (name, json.dumps({k: signal.data.get(k) for k in SIGNAL_OPTIONS}, sort_keys=True, default=str))
        if asked not in checked:
            try:
                with _server.connect(cfg) as conn:
                    checked[asked] = _signals.snapshot_options(conn, cfg, by_name, name, signal.data)
            except ValueError as refused:  # `Refused`: the same answer for the same question
                checked[asked] = refused
        found = checked[asked]
        if isinstance(found, ValueError):
            raise found
        return dict(found)

    return options


def _keys(tables: list[_server.Table]) -> dict[str, list[str]]:
    """Each captured table's key columns, by its qualified name: what an incremental snapshot reads it by."""
    return {t.qualified: list(t.key) for t in tables}


def _topic_of(cfg: PostgresCdcConfig, chunk: _incremental.Chunk) -> str:
    return topic_for(cfg.topic_prefix, chunk.table.schema, chunk.table.name)


class PostgresCdcSourceConnector(SourceConnector[PostgresCdcConfig]):
    """PostgreSQL's changes (inserts, updates, deletes, truncates) from its log, as Debezium's events."""

    config_model = PostgresCdcConfig
    task_class = PostgresCdcSourceTask
    accepts_signals = True
    signal_options = SIGNAL_OPTIONS
    version = _server.VERSION

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

    def check_signal(self, config: PostgresCdcConfig, signal: Signal) -> None:
        """An `execute-snapshot`'s tables, checked against the server within `probe.timeout.ms` before
        the signal is queued: each captured, with a primary key or a valid `surrogate-key`, its filter
        a plain predicate over its columns (`_signals`). A ConfigError (400) names every table the
        run could not act on and why; a server that cannot be reached or does not answer in time
        is a RetriableError (503): the signal is not queued either way. Not checked while a
        connection setting is a provider's placeholder (the run checks it)."""
        if signal.type != "execute-snapshot" or _placeholders(config):
            return

        def check(cut: Interrupts) -> dict[str, list[str]]:
            with _server.connect(config, cut) as conn:
                return _signals.signal_problems(conn, config, signal.data)

        checked_signal("PostgreSQL", config.server(), config.probe_timeout_ms, check)

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
            with _server.connect(config, cut) as conn:
                if _server.slot(conn, slot) is None:
                    return False
                _server.drop_slot(conn, slot)
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
    with _server.connect(cfg, cut) as conn:
        with conn.cursor() as cur:
            cur.execute("SHOW wal_level")
            (level,) = cur.fetchone()
        if level != "logical":
            problems["database.hostname"] = [
                f"the server's wal_level is {level}: set wal_level=logical (and restart it) for logical replication"
            ]
        try:
            _server.captured_tables(conn, cfg)
        except ConfigError as exc:
            if "table.include.list" in exc.errors and exc.errors["table.include.list"] != ["matches no table"]:
                problems.update(exc.errors)  # a topic collision; no table yet is fine: it may come
    return problems
