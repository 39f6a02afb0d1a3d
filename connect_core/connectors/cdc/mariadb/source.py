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

Signals (Debezium's `execute-snapshot`, `stop-snapshot`, `pause-snapshot`, `resume-snapshot`, over
the `rest` channel, or rows inserted into the `signal.data.collection` table: the `source` channel,
streamed as any change and sent to no topic) re-read tables while the stream goes on: an incremental snapshot, read-only
(`_incremental`), its progress committed with the position.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from connect_core.connectors.cdc import _signal_table
from connect_core.connectors.cdc._deadline import Interrupts, checked_server, checked_signal
from connect_core.connectors.cdc._source import CdcSourceTask, source_partition
from connect_core.connectors.cdc.config import MariaDbCdcConfig, server_identity
from connect_core.connectors.cdc.envelope import MYSQL_SOURCE, ChangeTable, records_of, topic_for
from connect_core.connectors.cdc.mariadb import _binlog, _incremental, _server
from connect_core.sdk import Positions, Signal, SourceBatch, SourceConnector, SourcePosition
from connect_core.sdk.errors import ConfigError
from connect_core.sdk.testing import faults

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["MariaDbCdcSourceConnector", "MariaDbCdcSourceTask"]


class MariaDbCdcSourceTask(CdcSourceTask[MariaDbCdcConfig]):
    config_model = MariaDbCdcConfig

    def read(self, spark: SparkSession, positions: Positions) -> SourceBatch:
        cfg = self.cdc_config()
        partition = source_partition(cfg)
        found = positions.offset(partition)
        committed = dict(found) if found is not None else None
        with _server.connect(cfg) as conn:
            problems = _server.server_problems(conn)
            if problems:
                raise ConfigError("; ".join(problems), {"database.hostname": problems})
            mariadb = _server.is_mariadb(conn)
            tables = _server.captured_tables(conn, cfg)
            signal_table = _signal_table.signal_table(cfg, (t.qualified for t in tables))
            if committed is None:
                data = [t for t in tables if t.qualified != signal_table]  # signals, not data: never copied
                return self._first_run(spark, cfg, conn, data, partition, mariadb)
            if cfg.snapshot_mode == "initial_only":
                return SourceBatch.empty()
            behind = _server.binlog_behind(conn, committed)
            by_name = {t.qualified: t for t in tables if t.qualified != signal_table}
            keys = _keys(list(by_name.values()))
            before = committed.get(_incremental.STATE)
            progress = _incremental.apply_signals(before, self.context.signals, keys, self.log)
            progress, chunk = self._chunk(cfg, by_name, progress, mariadb)
            if chunk is not None:
                faults.checkpoint("mid_source")  # a chunk read, the binlog end not yet: nothing of the run is kept
            # the high watermark, read after the chunk's snapshot: every transaction it saw is streamed by now
            end = _server.binlog_end(conn)
        held: dict[str, Any] = {"binlog_behind_bytes": behind}  # how far the committed position is behind
        stream = _binlog.Stream(cfg, {t.qualified: t for t in tables}, mariadb)
        position = stream.read(committed, end)
        events = {topic: changes.table() for topic, changes in stream.changes.items() if len(changes)}
        if chunk is not None and not _incremental.streamed_past(chunk, position, stream.cut_short):
            self.log.info(
                "incremental snapshot of %s: the stream stopped at %s (max.batch.size), before the chunk's "
                "snapshot: its rows are read again by the next run",
                chunk.table.qualified,
                _server.describe(position),
            )
            chunk = None  # its rows would come before changes they already hold
        if chunk is not None:
            streamed = events.get(topic_for(cfg.topic_prefix, chunk.table.db, chunk.table.name))
            topic, merged = _incremental.merge(cfg, chunk, streamed, stream.truncates, mariadb, self.log)
            if merged is not None and merged.num_rows:
                events[topic] = merged
            progress = chunk.progress
        if signal_table is not None:  # the `source` channel: acted on after this run's chunk, from the next one
            db, name = signal_table.split(".", 1)
            signalled = events.pop(topic_for(cfg.topic_prefix, db, name), None)
            if signalled is not None:
                progress = _incremental.apply_signals(
                    progress, _signal_table.signals_of(signalled, self.log), keys, self.log
                )
        masks = cfg.column_masks()
        records = {topic: records_of(spark, table, masks) for topic, table in events.items()}
        held.update(_incremental.progress_stats(progress))
        moved = _server.coordinates(position) != _server.coordinates(committed)
        if not records and not moved and progress == before:
            return SourceBatch(stats=held)
        self.log.info("%d change(s) of %d table(s) up to %s", stream.count, len(records), _server.describe(position))
        where = {k: position.get(k) for k in ("file", "pos", "gtid")}  # not the committed progress `position` may hold
        offset: dict[str, Any] = {**where, "snapshot": "done", "ts_ms": int(time.time() * 1000)}
        if progress is not None:  # committed with the position: a run that dies reads the same chunk again
            offset[_incremental.STATE] = progress
        return SourceBatch(records, (SourcePosition(partition, offset),), stats=held)

    def _chunk(
        self, cfg: MariaDbCdcConfig, by_name: dict[str, _server.Table], progress: dict[str, Any] | None, mariadb: bool
    ) -> tuple[dict[str, Any] | None, _incremental.Chunk | None]:
        """The progress past tables no longer captured, and the incremental snapshot's next rows, read
        before the run's binlog end is (None: nothing to read)."""
        while progress is not None and not progress.get("paused"):
            if progress.get("table") not in by_name:  # no longer captured: the next table
                self.log.warning("incremental snapshot: `%s` is no longer captured: skipped", progress.get("table"))
                progress = _incremental.next_table({**progress, "table": None})
                continue
            return progress, _incremental.read_chunks(cfg, by_name, progress, mariadb)
        return progress, None

    def log_moved_past(self, cfg: MariaDbCdcConfig, committed: Mapping[str, Any]) -> bool:
        """Binlog written since the committed position (without it: nothing to read)."""
        with _server.connect(cfg) as conn:
            return _server.position_key(_server.binlog_end(conn)) > _server.coordinates(dict(committed))

    def _first_run(
        self,
        spark: SparkSession,
        cfg: MariaDbCdcConfig,
        conn: Any,
        tables: list[_server.Table],
        partition: dict[str, str],
        mariadb: bool,
    ) -> SourceBatch:
        copy = cfg.snapshot_mode in ("initial", "initial_only")
        records: dict[str, Any] = {}
        if copy:
            records, position = _snapshot(spark, cfg, tables, mariadb, self.log)
        else:
            file, pos = _server.binlog_end(conn)
            position = {"file": file, "pos": pos, "gtid": _server.gtid_at(conn, file, pos) if mariadb else None}
        self.log.info(
            "binlog position %s; %d table(s) %s",
            _server.describe(position),
            len(tables),
            "copied" if copy else "not copied (snapshot.mode=" + cfg.snapshot_mode + ")",
        )
        offset = {**position, "snapshot": "done", "ts_ms": int(time.time() * 1000)}
        # signals sent before the first run: what it copied needs no re-read, what it did not is queued
        progress = _incremental.apply_signals(None, [] if copy else self.context.signals, _keys(tables), self.log)
        if progress is not None:
            offset[_incremental.STATE] = progress
        return SourceBatch(records, (SourcePosition(partition, offset),))


def _keys(tables: list[_server.Table]) -> dict[str, list[str]]:
    """Each captured table's key columns, by its qualified name: what an incremental snapshot reads it
    by; none for a key whose order a chunk query cannot follow (`Table.unordered_key`: a float is read
    back rounded, an enum sorts by position but compares as text), so no row is skipped or read twice."""
    return {t.qualified: [] if t.unordered_key else list(t.key) for t in tables}


def _snapshot(
    spark: SparkSession, cfg: MariaDbCdcConfig, tables: list[_server.Table], mariadb: bool, log: Any
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Every captured table as it was at one consistent snapshot, as `r` events, and the binlog
    position that snapshot stands at."""
    import pymysql.cursors

    records = {}
    now = int(time.time() * 1000)
    masks = cfg.column_masks()
    with _server.connect(cfg, autocommit=False) as conn:
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
                    file, pos = _server.binlog_end(conn)
                finally:
                    cur.execute("UNLOCK TABLES")
        position = {"file": file, "pos": pos, "gtid": _server.gtid_at(conn, file, pos) if mariadb else None}
        for table in tables:
            changes = ChangeTable(
                topic_for(cfg.topic_prefix, table.db, table.name), table.columns, table.key, source=MYSQL_SOURCE
            )
            source = _server.source_info(cfg, mariadb, table, now, "true", None, position["gtid"], file, pos)
            names = ", ".join(_server.quote(name) for name, _ in table.columns)
            with conn.cursor(pymysql.cursors.SSCursor) as cur:  # streamed, not held in memory
                cur.execute(f"SELECT {names} FROM {_server.quote(table.db)}.{_server.quote(table.name)}")
                while rows := cur.fetchmany(10_000):
                    for row in rows:
                        changes.add_row("r", None, table.row(row), source, now)
            if len(changes):
                changes.mark_last(snapshot="last")
                records[changes.topic] = changes.records(spark, masks)
            log.info("snapshot of %s: %d row(s)", table.qualified, len(changes))
        conn.rollback()
    return records, position


def _probe(cfg: MariaDbCdcConfig, cut: Interrupts) -> dict[str, list[str]]:
    """What the server lacks for this connector, by config key (empty: nothing)."""
    with _server.connect(cfg, cut=cut) as conn:
        problems = _server.server_problems(conn)
        if problems:
            return {"database.hostname": problems}
        try:
            _server.captured_tables(conn, cfg)
        except ConfigError as exc:
            if exc.errors.get("table.include.list") != ["matches no table"]:
                return dict(exc.errors)  # a topic collision; no table yet is fine: it may come
    return {}


class MariaDbCdcSourceConnector(SourceConnector[MariaDbCdcConfig]):
    """MariaDB's or MySQL's row changes (inserts, updates, deletes) from its binlog, as Debezium's events."""

    config_model = MariaDbCdcConfig
    task_class = MariaDbCdcSourceTask
    accepts_signals = True
    version = _server.VERSION

    def validate(self, config: MariaDbCdcConfig) -> dict[str, list[str]]:
        """The server's binlog settings and captured tables, checked when the connector is registered
        (as Debezium does), in `probe.timeout.ms` at most (connect and queries): a server that has not
        answered by then makes the config invalid. Skipped while a connection setting is a provider's
        placeholder (resolved only where the task runs)."""
        values = (config.database_hostname, config.database_user, config.database_password)
        if any(v is not None and "${" in v for v in values):
            return {}
        return checked_server("MariaDB", config.server(), config.probe_timeout_ms, lambda cut: _probe(config, cut))

    def check_signal(self, config: MariaDbCdcConfig, signal: Signal) -> None:
        """An `execute-snapshot`'s tables, checked against the server within `probe.timeout.ms` before
        the signal is queued: each captured, not the signal table, with a key a chunk query can follow
        (`_keys`). A ConfigError (400) names every table the run could not act on and why; a server
        that does not answer in time is a RetriableError (503). Not checked while a connection setting
        is a provider's placeholder (the run checks it)."""
        values = (config.database_hostname, config.database_user, config.database_password)
        if signal.type != "execute-snapshot" or any(v is not None and "${" in v for v in values):
            return

        def check(cut: Interrupts) -> dict[str, list[str]]:
            with _server.connect(config, cut=cut) as conn:
                tables = {t.qualified: t for t in _server.captured_tables(conn, config)}
            keys = _keys(list(tables.values()))
            problems = []
            for name in [str(n) for n in signal.data.get("data-collections") or []]:
                if name not in tables:
                    problems.append(f"`{name}` is not a captured table (name it `database.table`)")
                elif name == config.signal_data_collection:
                    problems.append(f"`{name}` is the signal table: its rows are signals, not data")
                elif not keys[name]:
                    problems.append(
                        f"`{name}` has no key to read it in chunks by (a primary key, not of a floating-point, "
                        "enum or set type)"
                    )
            return {"data.data-collections": problems} if problems else {}

        checked_signal("MariaDB", config.server(), config.probe_timeout_ms, check)

    def claims(self, name: str, config: MariaDbCdcConfig) -> dict[str, str]:
        """The replica id the binlog client registers with: a server drops the older of two clients
        that register with one id, so each connector reading a server needs its own."""
        server = server_identity(config.database_hostname, config.database_port)
        return {f"replica id {config.server_id()} of the MariaDB at {server}": "database.server.id"}

    def task_configs(self, config: MariaDbCdcConfig, max_tasks: int) -> list[dict[str, Any]]:
        return [config.model_dump(by_alias=True, exclude_none=True, exclude={"name", "tasks_max"})]  # one binlog

    def output_topics(self, config: MariaDbCdcConfig) -> list[str]:
        return []  # one per captured table, known only from the database
