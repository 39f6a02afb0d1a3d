"""The JDBC sink into MariaDB/MySQL, exactly once as into PostgreSQL.

A micro-batch goes, per topic, (1) from every Spark partition in parallel (from the driver for a
small batch) into a staging InnoDB table with the topic's own column types, by multi-row INSERTs
(PyMySQL), then (2) in one InnoDB transaction of the target: `INSERT … SELECT` in offset order
(`ON DUPLICATE KEY UPDATE` for upsert: the newest offset per key wins; `UPDATE … JOIN` the newest
row per key for update), plus the topic offsets in the target's `connect_sink_offsets`. A batch
delivered again after a crash skips every row at or past those offsets.

The session is strict (`STRICT_ALL_TABLES`): a value too long, a NULL into NOT NULL or a string that
is no number is an error, never silently cut or zeroed. Times are UTC.

Bad rows are found in the merge. Under `errors.tolerance=all`: first by set-based checks of the
staging table (NULLs for NOT NULL columns, text longer than its column, and in insert mode keys
already in the target or twice in the batch; one statement each), then anything else by merging
in chunks and halving a chunk that fails until its bad row is alone (InnoDB undoes only the failed
statement), so the cost follows the number of bad rows. Under `none` the first bad row is found
the same way and the run fails naming it, with nothing committed. Rows set aside are remembered in
`connect_sink_errors` in the transaction that writes past them (see `_postgres_tolerant`). The SQL
of the merge and the search for bad rows is `_mariadb_sql`'s.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from typing import TYPE_CHECKING, Any

from connect_core.connectors.jdbc._staging import (
    STAGE_DELETED,
    STAGE_OFFSET,
    STAGE_PARTITION,
    ArrowStaged,
    Layout,
    copier,
    next_offsets,
    run_copy,
    stager,
    tombstones_refused,
    where_text,
)
from connect_core.connectors.jdbc.targets import BadRow, _mariadb_replace, register
from connect_core.connectors.jdbc.targets._evolution import evolution
from connect_core.connectors.jdbc.targets._mariadb_sql import (
    Column,
    column_types,
    columns,
    merge_in_chunks,
    merge_sql,
    quarantine,
    refused,
    unique_columns,
)
from connect_core.sdk.errors import ConfigError, DataError, FatalError, RetriableError
from connect_core.sdk.records import CommittedOffset, TopicPartition
from connect_core.sdk.testing import faults
from connect_core.sdk.transforms import TOMBSTONE_COLUMN

if TYPE_CHECKING:
    import logging

    from pyspark.sql import DataFrame

    from connect_core.connectors.jdbc.config import JdbcSinkConfig
    from connect_core.connectors.jdbc.dialects.mariadb import MariaDbDialect
    from connect_core.sdk import ArrowRecords

__all__ = ["MariaDbTarget"]

SESSION = "SET SESSION sql_mode = 'STRICT_ALL_TABLES,NO_ENGINE_SUBSTITUTION', time_zone = '+00:00'"
#: Rows per multi-row INSERT into the staging table.
INSERT_ROWS = 5_000
_NAME = "VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL"
OFFSETS_DDL = (
    f"CREATE TABLE IF NOT EXISTS connect_sink_offsets (connector {_NAME}, topic {_NAME}, `partition` INT NOT NULL, "
    "next_offset BIGINT NOT NULL, PRIMARY KEY (connector, topic, `partition`)) ENGINE=InnoDB"
)
ERRORS_DDL = (
    f"CREATE TABLE IF NOT EXISTS connect_sink_errors (connector {_NAME}, topic {_NAME}, `partition` INT NOT NULL, "
    "record_offset BIGINT NOT NULL, error_class VARCHAR(255) NOT NULL, message TEXT, "
    "PRIMARY KEY (connector, topic, `partition`, record_offset)) ENGINE=InnoDB"
)
_P, _O = f"`{STAGE_PARTITION}`", f"`{STAGE_OFFSET}`"


def connect(args: Mapping[str, Any], host: str, *, local_data: bool = False) -> Any:
    """A PyMySQL connection in the sink's session (strict, UTC, no autocommit); clear errors.
    It never sends a file of this host (`_mysql`); `local_data`: its `load_data` may send the
    staging data it is given, from memory."""
    import pymysql

    from connect_core.connectors.jdbc._mysql import guarded_connect

    try:
        return guarded_connect(
            **args,
            charset="utf8mb4",
            autocommit=False,
            connect_timeout=10,
            read_timeout=3600,
            init_command=SESSION,
            local_data=local_data,
        )
    except pymysql.err.OperationalError as exc:
        code = exc.args[0] if exc.args else 0
        if code in (1044, 1045):
            raise FatalError(f"{host} refused the login: wrong user or password") from None
        if code == 1049:
            raise FatalError(f"{host}: no such database ({exc.args[1] if len(exc.args) > 1 else exc})") from None
        raise RetriableError(f"cannot reach the database at {host}") from None


@contextmanager
def _transaction(args: Mapping[str, Any], host: str) -> Iterator[Any]:
    """A cursor in one transaction: committed when the block ends, rolled back if it raises."""
    conn = connect(args, host)
    try:
        with conn.cursor() as cur:
            yield cur
        conn.commit()
    except BaseException:
        with suppress(Exception):  # the error raised is the one to report; closing undoes the rest
            conn.rollback()
        raise
    finally:
        with suppress(Exception):
            conn.close()


@register("mariadb")
class MariaDbTarget:
    """One sink task's MariaDB/MySQL target: its offsets, staging table and merges."""

    def __init__(
        self,
        dialect: MariaDbDialect,
        cfg: JdbcSinkConfig,
        connector: str,
        stage: str,
        log: logging.Logger | logging.LoggerAdapter[Any],
    ) -> None:
        self.dialect, self.cfg, self.connector, self.log = dialect, cfg, connector, log
        self.args = dialect.mysql_args()
        self.host = dialect.host
        self.quote = dialect.quote
        self.stage = f"`{stage}`"
        self.tolerant = False

    def open(self, committed: Mapping[TopicPartition, CommittedOffset], tolerant: bool) -> dict[TopicPartition, int]:
        """Make the sink's tables if needed, drop a staging table a dead run left; the offsets applied."""
        self.tolerant = tolerant
        with _transaction(self.args, self.host) as cur:
            cur.execute(OFFSETS_DDL)
            cur.execute(f"DROP TABLE IF EXISTS {self.stage}")
            if tolerant:
                cur.execute(ERRORS_DDL)
                for tp, offset in committed.items():  # their run committed: the dead-letter topic has them
                    cur.execute(
                        "DELETE FROM connect_sink_errors WHERE connector = %s AND topic = %s AND `partition` = %s "
                        "AND record_offset < %s",
                        (self.connector, tp.topic, tp.partition, offset.offset),
                    )
            cur.execute(
                "SELECT topic, `partition`, next_offset FROM connect_sink_offsets WHERE connector = %s",
                (self.connector,),
            )
            return {TopicPartition(t, p): o for t, p, o in cur.fetchall()}

    def set_aside(self, topic: str, applied: Mapping[int, int]) -> list[BadRow]:
        """Rows of `topic` an earlier run set aside below the target's offsets whose run did not commit."""
        with _transaction(self.args, self.host) as cur:
            cur.execute(
                "SELECT `partition`, record_offset, error_class, message FROM connect_sink_errors "
                "WHERE connector = %s AND topic = %s ORDER BY 1, 2",
                (self.connector, topic),
            )
            return [row for row in cur.fetchall() if row[1] < applied.get(row[0], 0)]

    def _staged(self, layout: Layout, records: ArrowRecords | None, applied: dict[int, int]) -> DataFrame | ArrowStaged:
        """The rows in the staged layout: as pyarrow reads the topic's files where it can."""
        from pyspark.sql import functions as F

        tombstones = self._tombstones(layout)
        if records is not None:
            stage = stager(layout.columns, self.cfg.pk_mode == "kafka", applied, layout.from_key, deleted=tombstones)
            return ArrowStaged(records, stage)
        flags = [F.coalesce(F.col(TOMBSTONE_COLUMN), F.lit(False)).alias(STAGE_DELETED)] if tombstones else []
        return layout.df.select(
            *[F.col(c) for c in layout.columns],
            *flags,
            F.col("__partition").alias(STAGE_PARTITION),
            F.col("__offset").alias(STAGE_OFFSET),
        )

    def _tombstones(self, layout: Layout) -> bool:
        """Whether tombstones are staged, to be deleted or refused (not while tolerating bad rows:
        `delete.enabled` cannot be configured with it)."""
        return TOMBSTONE_COLUMN in layout.df.columns and not self.tolerant

    def write(
        self, topic: str, layout: Layout, records: ArrowRecords | None, applied: dict[int, int]
    ) -> tuple[int, list[BadRow]]:
        """Stage and merge `topic`'s rows; (rows written, rows set aside)."""
        staged = self._staged(layout, records, applied)
        table = self.quote(layout.table)
        known = self._ensure_table(layout)
        tombstones = self._tombstones(layout)
        self._create_stage(layout, tombstones)
        started = time.monotonic()
        staged_names = [*map(self.quote, layout.columns), *([STAGE_DELETED] if tombstones else []), _P, _O]
        names = ", ".join(staged_names)
        insert = f"INSERT INTO {self.stage} ({names}) VALUES ({', '.join(['%s'] * len(staged_names))})"
        load = (
            f"LOAD DATA LOCAL INFILE %s INTO TABLE {self.stage} CHARACTER SET utf8mb4 "
            f"FIELDS TERMINATED BY '\\t' ESCAPED BY '\\\\' LINES TERMINATED BY '\\n' ({names})"
        )
        reached = run_copy(staged, copier(_inserter(self.args, self.host, insert, load), len(staged_names)))
        staged_rows = sum(r["n"] for r in reached)
        stage_s = time.monotonic() - started
        faults.checkpoint("mid_sink")  # staged in the target database, not merged
        keys = [self.quote(k) for k in layout.keys]
        bad: list[BadRow] = []
        with _transaction(self.args, self.host) as cur:
            deleted = self._apply_tombstones(cur, topic, table, keys) if tombstones else 0
            staged_rows -= deleted
            merge = merge_sql(
                self.cfg.insert_mode, table, self.stage, [self.quote(c) for c in layout.columns], keys, deleted > 0
            )
            if self.tolerant:
                bad = quarantine(cur, table, self.stage, layout, known, self.cfg.insert_mode, self.quote)
                bad += merge_in_chunks(cur, merge, self.stage)
            else:
                try:
                    cur.execute(merge.format(where="TRUE"))
                except Exception as exc:
                    if refused(exc) is None:
                        raise
                    cur.connection.rollback()
                    raise self._first_bad(cur, topic, merge) from None
            self._record_offsets(cur, topic, reached)
            if bad:
                cur.executemany(
                    "INSERT IGNORE INTO connect_sink_errors VALUES (%s, %s, %s, %s, %s, %s)",
                    [(self.connector, topic, p, o, cls, msg) for p, o, cls, msg in bad],
                )
        with _transaction(self.args, self.host) as cur:
            cur.execute(f"DROP TABLE IF EXISTS {self.stage}")
        written = staged_rows - len(bad)
        self.log.info(
            "%s: %d row(s) staged %s in %.1f s, %d merged into %s in %.1f s%s",
            topic,
            staged_rows,
            where_text(staged),
            stage_s,
            written,
            table,
            time.monotonic() - started - stage_s,
            f", {len(bad)} set aside (errors.tolerance=all)" if bad else "",
        )
        return written, bad

    def _apply_tombstones(self, cur: Any, topic: str, table: str, keys: list[str]) -> int:
        """Delete the rows whose key's newest staged record is a tombstone (`delete.enabled`); without
        it a staged tombstone fails the batch, as Kafka's JDBC sink fails on a null value. Returns
        the number of tombstones staged."""
        cur.execute(f"SELECT count(*) FROM {self.stage} WHERE {STAGE_DELETED}")
        found = int(cur.fetchone()[0])
        if not found:
            return 0
        if not self.cfg.delete_enabled:
            raise DataError(tombstones_refused(topic, found))
        key_list = ", ".join(keys)
        newest = (
            f"SELECT {key_list}, {STAGE_DELETED} FROM (SELECT {key_list}, {STAGE_DELETED}, ROW_NUMBER() OVER "
            f"(PARTITION BY {key_list} ORDER BY {_P} DESC, {_O} DESC) AS __connect_rank FROM {self.stage}) AS ranked "
            "WHERE __connect_rank = 1"
        )
        match = " AND ".join(f"t.{k} = s.{k}" for k in keys)
        cur.execute(f"DELETE t FROM {table} AS t JOIN ({newest}) AS s ON {match} WHERE s.{STAGE_DELETED}")
        self.log.info("%s: %d row(s) deleted for %d tombstone(s)", topic, cur.rowcount, found)
        return found

    def _first_bad(self, cur: Any, topic: str, merge: str) -> DataError:
        """`errors.tolerance=none`: the first row the merge refuses, found as `all` would, all undone."""
        try:
            bad = merge_in_chunks(cur, merge, self.stage, first=True)
        finally:
            cur.connection.rollback()
        where = f" (partition {bad[0][0]}, offset {bad[0][1]})" if bad else ""
        message = bad[0][3] if bad else "refused"
        return DataError(
            f"a record of topic `{topic}` could not be written to {self.host}: {message}{where} "
            "(errors.tolerance=none: nothing past the last commit is committed; `all` would skip it)"
        )

    def _record_offsets(self, cur: Any, topic: str, reached: list[Any]) -> None:
        for partition, end in next_offsets(reached).items():
            cur.execute(
                "INSERT INTO connect_sink_offsets VALUES (%s, %s, %s, %s) "
                "ON DUPLICATE KEY UPDATE next_offset = GREATEST(next_offset, VALUES(next_offset))",
                (self.connector, topic, partition, end),
            )

    def _ensure_table(self, layout: Layout) -> dict[str, Column]:
        """The target's columns, the table made (`auto.create`) or widened (`auto.evolve`) as configured."""
        schema = layout.df.schema
        wanted = {c: self.dialect.column_type(schema[c], key=c in layout.keys) for c in layout.columns}
        table = self.quote(layout.table)
        with _transaction(self.args, self.host) as cur:
            have = columns(cur, layout.table)
            if not have:
                if not self.cfg.auto_create:
                    raise ConfigError(f"table {table} does not exist at {self.host}: create it or set `auto.create`")
                defs = [f"{self.quote(c)} {wanted[c]}" for c in layout.columns]
                if layout.keys:
                    defs.append(f"PRIMARY KEY ({', '.join(map(self.quote, layout.keys))})")
                cur.execute(f"CREATE TABLE {table} ({', '.join(defs)}) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4")
                return columns(cur, layout.table)
            declared = column_types(cur, layout.table)
            evolve = evolution(self.cfg, layout, declared, unique_columns(cur, layout.table), wanted)
            lacking = [c for c in layout.columns if c not in have]
            if lacking and not evolve.add:
                raise ConfigError(
                    f"table {table} lacks column(s) {lacking}: add them or set `auto.evolve`",
                    {"auto.evolve": [f"missing columns {lacking}"]},
                )
            alter = [f"ADD COLUMN {self.quote(c)} {wanted[c]}" for c in lacking]
            alter += [f"DROP COLUMN {self.quote(c)}" for c in evolve.drop]
            # MODIFY restates the whole column
            alter += [f"MODIFY COLUMN {self.quote(c)} {declared[c]} NULL" for c in evolve.relax]
            alter += [
                f"MODIFY COLUMN {self.quote(c)} {wanted[c]} {'NULL' if have[c].nullable else 'NOT NULL'}"
                for c in evolve.widen
            ]
            if not alter:
                return have
            cur.execute(f"ALTER TABLE {table} {', '.join(alter)}")
            self.log.info("table %s: %s", table, ", ".join(alter))
            return columns(cur, layout.table)

    def _create_stage(self, layout: Layout, tombstones: bool) -> None:
        schema = layout.df.schema
        defs = [f"{self.quote(c)} {self.dialect.column_type(schema[c])} NULL" for c in layout.columns]
        if tombstones:
            defs.append(f"{STAGE_DELETED} BOOLEAN NOT NULL")
        with _transaction(self.args, self.host) as cur:
            cur.execute(f"DROP TABLE IF EXISTS {self.stage}")
            cur.execute(
                f"CREATE TABLE {self.stage} ({', '.join(defs)}, {_P} INT NOT NULL, {_O} BIGINT NOT NULL, "
                f"PRIMARY KEY ({_P}, {_O})) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4"
            )

    def replica(self, table: tuple[str, ...], topic: str, generation: int) -> tuple[str, ...]:
        with _transaction(self.args, self.host) as cur:
            return _mariadb_replace.replica(
                cur, self.quote, self.connector, table, topic, generation, self.cfg.auto_create
            )

    def swap_in(self, table: tuple[str, ...] | None, topic: str, generation: int) -> str | None:
        started = time.monotonic()
        with _transaction(self.args, self.host) as cur:
            swapped = _mariadb_replace.swap_in(cur, self.quote, self.connector, table, topic, generation)
        if swapped:
            self.log.info(
                "%s: re-read %d swapped in for table %s in %.3f s",
                topic,
                generation,
                swapped,
                time.monotonic() - started,
            )
        return swapped

    def has_key(self, table: tuple[str, ...]) -> bool | None:
        with _transaction(self.args, self.host) as cur:
            if not columns(cur, table):
                return None
            return bool(unique_columns(cur, table))

    @classmethod
    def alter_offsets(
        cls, dialect: MariaDbDialect, connector: str, offsets: Mapping[TopicPartition, int | None] | None
    ) -> None:
        """An offset reset or alteration through Connect, applied to the target's `connect_sink_offsets`."""
        with _transaction(dialect.mysql_args(), dialect.host) as cur:
            cur.execute(
                "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = 'connect_sink_offsets'"
            )
            if not cur.fetchone()[0]:
                return
            if offsets is None:
                cur.execute("DELETE FROM connect_sink_offsets WHERE connector = %s", (connector,))
                return
            for tp, offset in offsets.items():
                if offset is None:
                    cur.execute(
                        "DELETE FROM connect_sink_offsets WHERE connector = %s AND topic = %s AND `partition` = %s",
                        (connector, tp.topic, tp.partition),
                    )
                else:
                    cur.execute(
                        "INSERT INTO connect_sink_offsets VALUES (%s, %s, %s, %s) "
                        "ON DUPLICATE KEY UPDATE next_offset = VALUES(next_offset)",
                        (connector, tp.topic, tp.partition, offset),
                    )


def _inserter(args: Mapping[str, Any], host: str, insert: str, load: str) -> Any:
    """How a Spark partition's staged rows get into the staging table, in one transaction: each
    Arrow batch as tab-separated text by `LOAD DATA LOCAL INFILE` (`load`), encoded by pyarrow and
    sent from memory (no file: the server gets these bytes or nothing, see `_mysql`); by multi-row
    INSERTs (`insert`) where the server refuses local data or a column is binary."""

    def write(batches: Iterator[Any]) -> None:
        import pymysql

        conn = connect(args, host, local_data=True)
        loading = True
        try:
            with conn.cursor() as cur:
                for batch in batches:
                    text = _tsv(batch) if loading else None
                    if text is not None:
                        try:
                            conn.load_data(cur, load, text)
                            continue
                        except pymysql.err.MySQLError as exc:
                            if not exc.args or exc.args[0] not in _NO_LOCAL_FILES:
                                raise
                            loading = False
                    rows = _python_rows(batch)
                    for start in range(0, len(rows), INSERT_ROWS):
                        cur.executemany(insert, rows[start : start + INSERT_ROWS])
            conn.commit()
        finally:
            with suppress(Exception):  # an error raised above is the one to report
                conn.close()

    return write


#: The server's "local files are not allowed" errors (`local_infile=OFF`).
_NO_LOCAL_FILES = frozenset({1148, 3948, 4166})
_ESCAPES = (("\\", "\\\\"), ("\t", "\\t"), ("\n", "\\n"), ("\r", "\\r"), ("\x00", "\\0"))


def _tsv(batch: Any) -> bytes | None:
    """An Arrow batch as `LOAD DATA`'s default text format (tab-separated, `\\` escapes, `\\N` for
    NULL), every value written by pyarrow; None when a column is binary (no text form here)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if not batch.num_rows:
        return b""
    columns = []
    for column in batch.columns:
        kind = column.type
        if pa.types.is_binary(kind) or pa.types.is_large_binary(kind) or pa.types.is_nested(kind):
            return None
        if pa.types.is_timestamp(kind) and kind.tz is not None:
            column = column.cast(pa.timestamp(kind.unit))  # keeps the UTC value, drops the zone
        elif pa.types.is_boolean(kind):
            column = column.cast(pa.int8())
        text = column.cast(pa.string())
        if pa.types.is_string(kind) or pa.types.is_large_string(kind):
            for raw, escaped in _ESCAPES:
                text = pc.replace_substring(text, raw, escaped)
        columns.append(pc.fill_null(text, "\\N"))
    lines = pc.binary_join_element_wise(*columns, "\t") if len(columns) > 1 else columns[0]
    return ("\n".join(lines.to_pylist()) + "\n").encode("utf-8")


def _python_rows(batch: Any) -> list[tuple[Any, ...]]:
    """An Arrow batch as rows of Python values PyMySQL quotes: an instant as its UTC wall-clock time."""
    import pyarrow as pa

    columns = []
    for column in batch.columns:
        if pa.types.is_timestamp(column.type) and column.type.tz is not None:
            column = column.cast(pa.timestamp(column.type.unit))  # keeps the UTC value, drops the zone
        columns.append(column.to_pylist())
    return list(zip(*columns, strict=True))
