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
`connect_sink_errors` in the transaction that writes past them (see `_tolerant`).
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from typing import TYPE_CHECKING, Any, NamedTuple

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
from connect_core.connectors.jdbc.dialect import dialect_for
from connect_core.connectors.jdbc.types import mariadb_type
from connect_core.runtime.execution import _faults
from connect_core.sdk.errors import ConfigError, DataError, FatalError, RetriableError
from connect_core.sdk.records import CommittedOffset, TopicPartition
from connect_core.sdk.transforms import TOMBSTONE_COLUMN

if TYPE_CHECKING:
    import logging

    from pyspark.sql import DataFrame

    from connect_core.connectors.jdbc.config import JdbcSinkConfig
    from connect_core.sdk import ArrowRecords

__all__ = ["MariaDbTarget", "alter_offsets"]

SESSION = "SET SESSION sql_mode = 'STRICT_ALL_TABLES,NO_ENGINE_SUBSTITUTION', time_zone = '+00:00'"
#: Rows per multi-row INSERT into the staging table.
INSERT_ROWS = 5_000
#: Rows per merge statement under `errors.tolerance=all` (a failing one is halved).
CHUNK_ROWS = 10_000
#: Server errors that refuse a row's data: a data exception or a constraint.
REFUSED = frozenset({1048, 1062, 1263, 1264, 1265, 1292, 1364, 1366, 1406, 1411, 1451, 1452, 1690, 3819, 4025})
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
_AT_ROW = re.compile(r" at row [0-9]+$")

BadRow = tuple[int, int, str, str]  # partition, offset, error class, message


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


class _Column(NamedTuple):
    nullable: bool
    data_type: str
    max_length: int | None


class MariaDbTarget:
    """One sink task's MariaDB/MySQL target: its offsets, staging table and merges."""

    def __init__(
        self, cfg: JdbcSinkConfig, connector: str, stage: str, log: logging.Logger | logging.LoggerAdapter[Any]
    ) -> None:
        dialect = dialect_for(cfg.connection_url)
        self.cfg, self.connector, self.log = cfg, connector, log
        self.args = dialect.mysql_args(cfg.connection_user, cfg.connection_password)
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

    def staged(self, layout: Layout, records: ArrowRecords | None, applied: dict[int, int]) -> DataFrame | ArrowStaged:
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
        self, topic: str, layout: Layout, staged: DataFrame | ArrowStaged, tolerant: bool
    ) -> tuple[int, list[BadRow]]:
        """Stage and merge `topic`'s rows; (rows written, rows set aside)."""
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
        _faults.checkpoint("mid_sink")  # staged in the target database, not merged
        keys = [self.quote(k) for k in layout.keys]
        bad: list[BadRow] = []
        with _transaction(self.args, self.host) as cur:
            deleted = self._apply_tombstones(cur, topic, table, keys) if tombstones else 0
            staged_rows -= deleted
            merge = _merge_sql(
                self.cfg.insert_mode, table, self.stage, [self.quote(c) for c in layout.columns], keys, deleted > 0
            )
            if tolerant:
                bad = _quarantine(cur, table, self.stage, layout, known, self.cfg.insert_mode, self.quote)
                bad += _merge_in_chunks(cur, merge, self.stage)
            else:
                try:
                    cur.execute(merge.format(where="TRUE"))
                except Exception as exc:
                    if _refused(exc) is None:
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
            bad = _merge_in_chunks(cur, merge, self.stage, first=True)
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

    def _ensure_table(self, layout: Layout) -> dict[str, _Column]:
        """The target's columns, the table made (`auto.create`) or widened (`auto.evolve`) as configured."""
        schema = layout.df.schema
        wanted = {c: mariadb_type(schema[c], key=c in layout.keys) for c in layout.columns}
        table = self.quote(layout.table)
        with _transaction(self.args, self.host) as cur:
            have = _columns(cur, layout.table)
            if not have:
                if not self.cfg.auto_create:
                    raise ConfigError(f"table {table} does not exist at {self.host}: create it or set `auto.create`")
                defs = [f"{self.quote(c)} {wanted[c]}" for c in layout.columns]
                if layout.keys:
                    defs.append(f"PRIMARY KEY ({', '.join(map(self.quote, layout.keys))})")
                cur.execute(f"CREATE TABLE {table} ({', '.join(defs)}) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4")
                return _columns(cur, layout.table)
            lacking = [c for c in layout.columns if c not in have]
            if lacking and not self.cfg.auto_evolve:
                raise ConfigError(
                    f"table {table} lacks column(s) {lacking}: add them or set `auto.evolve`",
                    {"auto.evolve": [f"missing columns {lacking}"]},
                )
            for c in lacking:
                cur.execute(f"ALTER TABLE {table} ADD COLUMN {self.quote(c)} {wanted[c]}")
            return _columns(cur, layout.table) if lacking else have

    def _create_stage(self, layout: Layout, tombstones: bool) -> None:
        schema = layout.df.schema
        defs = [f"{self.quote(c)} {mariadb_type(schema[c])} NULL" for c in layout.columns]
        if tombstones:
            defs.append(f"{STAGE_DELETED} BOOLEAN NOT NULL")
        with _transaction(self.args, self.host) as cur:
            cur.execute(f"DROP TABLE IF EXISTS {self.stage}")
            cur.execute(
                f"CREATE TABLE {self.stage} ({', '.join(defs)}, {_P} INT NOT NULL, {_O} BIGINT NOT NULL, "
                f"PRIMARY KEY ({_P}, {_O})) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4"
            )


def _columns(cur: Any, table: tuple[str, ...]) -> dict[str, _Column]:
    schema, name = (table[0], table[1]) if len(table) == 2 else (None, table[0])
    cur.execute(
        "SELECT column_name, is_nullable, data_type, character_maximum_length FROM information_schema.columns "
        "WHERE table_schema = COALESCE(%s, DATABASE()) AND table_name = %s ORDER BY ordinal_position",
        (schema, name),
    )
    return {c: _Column(n == "YES", str(t).lower(), m) for c, n, t, m in cur.fetchall()}


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


def _merge_sql(mode: str, table: str, stage: str, columns: list[str], keys: list[str], tombstones: bool = False) -> str:
    """The statement merging the staged rows `{where}` selects into `table`, in offset order; with
    `tombstones`, each key's newest row unless it is a tombstone (whose row was deleted)."""
    cols = ", ".join(columns)
    others = [c for c in columns if c not in keys]
    if tombstones:
        key_list = ", ".join(keys)
        rows = (
            f"SELECT {cols} FROM (SELECT {cols}, {STAGE_DELETED}, ROW_NUMBER() OVER (PARTITION BY {key_list} "
            f"ORDER BY {_P} DESC, {_O} DESC) AS __connect_rank FROM {stage} WHERE {{where}}) AS ranked "
            f"WHERE __connect_rank = 1 AND NOT {STAGE_DELETED}"
        )
        if mode == "update":
            match = " AND ".join(f"t.{k} = s.{k}" for k in keys)
            assignments = ", ".join(f"t.{c} = s.{c}" for c in others) or f"t.{keys[0]} = s.{keys[0]}"
            return f"UPDATE {table} AS t JOIN ({rows}) AS s ON {match} SET {assignments}"
        upsert = ", ".join(f"{c} = VALUES({c})" for c in others or keys[:1])
        return f"INSERT INTO {table} ({cols}) {rows}" + (
            f" ON DUPLICATE KEY UPDATE {upsert}" if mode == "upsert" else ""
        )
    rows = f"SELECT {cols} FROM {stage} WHERE {{where}} ORDER BY {_P}, {_O}"
    if mode == "insert":
        return f"INSERT INTO {table} ({cols}) {rows}"
    if mode == "upsert":
        assignments = ", ".join(f"{c} = VALUES({c})" for c in others or keys[:1])
        return f"INSERT INTO {table} ({cols}) {rows} ON DUPLICATE KEY UPDATE {assignments}"
    if not others:
        return "SELECT 1 FROM DUAL WHERE {where}"
    key_list = ", ".join(keys)
    newest = (
        f"SELECT {cols} FROM (SELECT {cols}, ROW_NUMBER() OVER (PARTITION BY {key_list} ORDER BY {_P} DESC, {_O} DESC) "
        f"AS __connect_rank FROM {stage} WHERE {{where}}) AS ranked WHERE __connect_rank = 1"
    )
    match = " AND ".join(f"t.{k} = s.{k}" for k in keys)
    assignments = ", ".join(f"t.{c} = s.{c}" for c in others)
    return f"UPDATE {table} AS t JOIN ({newest}) AS s ON {match} SET {assignments}"


def _refused(exc: BaseException) -> tuple[str, str] | None:
    """(class, message) of a server error refusing a row's data; None for any other failure."""
    import pymysql

    if not isinstance(exc, pymysql.err.MySQLError) or not exc.args or exc.args[0] not in REFUSED:
        return None
    message = str(exc.args[1]) if len(exc.args) > 1 else str(exc)
    return f"{type(exc).__module__}.{type(exc).__name__}", _AT_ROW.sub("", message)[:2000]


def _merge_in_chunks(cur: Any, merge: str, stage: str, *, first: bool = False) -> list[BadRow]:
    """Run `merge` over the staged rows in chunks of one topic partition's offsets, in order,
    halving a chunk the server refuses until the bad row is alone; the bad rows (with `first`,
    only the first found)."""
    cur.execute(f"SELECT {_P}, {_O} FROM {stage} ORDER BY 1, 2")
    keys = cur.fetchall()
    pending: list[tuple[int, int]] = []
    start = 0
    for end in range(1, len(keys) + 1):
        if end == len(keys) or keys[end][0] != keys[start][0] or end - start >= CHUNK_ROWS:
            pending.append((start, end))
            start = end
    bad: list[BadRow] = []
    where = f"{_P} = %s AND {_O} BETWEEN %s AND %s"
    while pending:
        start, end = pending.pop(0)
        partition, low, high = keys[start][0], keys[start][1], keys[end - 1][1]
        try:
            cur.execute(merge.format(where=where), (partition, low, high))
        except Exception as exc:
            refused = _refused(exc)
            if refused is None:
                raise
            if end - start > 1:
                middle = (start + end) // 2
                pending[:0] = [(start, middle), (middle, end)]
                continue
            bad.append((partition, low, *refused))
            if first:
                break
    return bad


def _quarantine(
    cur: Any, table: str, stage: str, layout: Layout, known: Mapping[str, _Column], mode: str, quote: Any
) -> list[BadRow]:
    """Take out of the staging table the rows the merge would refuse, by set-based checks."""
    from pyspark.sql.types import BinaryType, StringType

    checks: list[tuple[str, str, str]] = []  # (condition, class, message)
    for c in layout.columns:
        column = known.get(c)
        if column is None:
            continue
        q = quote(c)
        if not column.nullable:
            checks.append((f"{q} IS NULL", "pymysql.err.IntegrityError", f"Column '{c}' cannot be null"))
        kind = layout.df.schema[c].dataType
        if column.max_length and column.data_type in ("char", "varchar") and isinstance(kind, StringType):
            checks.append(
                (
                    f"CHAR_LENGTH({q}) > {int(column.max_length)}",
                    "pymysql.err.DataError",
                    f"Data too long for column '{c}'",
                )
            )
        if column.max_length and column.data_type in ("binary", "varbinary") and isinstance(kind, BinaryType):
            checks.append(
                (f"LENGTH({q}) > {int(column.max_length)}", "pymysql.err.DataError", f"Data too long for column '{c}'")
            )
    found: dict[tuple[int, int], BadRow] = {}
    for condition, cls, message in checks:
        cur.execute(f"SELECT {_P}, {_O} FROM {stage} WHERE {condition}")
        for p, o in cur.fetchall():
            found.setdefault((p, o), (p, o, cls, message))
    if mode == "insert":
        for name, keys in _unique_keys(cur, layout.table):
            if not set(keys) <= set(layout.columns):
                continue
            key_list = ", ".join(map(quote, keys))
            present = " AND ".join(f"{quote(k)} IS NOT NULL" for k in keys)
            match = " AND ".join(f"t.{quote(k)} = s.{quote(k)}" for k in keys)
            cur.execute(
                f"SELECT {_P}, {_O} FROM (SELECT {_P}, {_O}, ROW_NUMBER() OVER (PARTITION BY {key_list} "
                f"ORDER BY {_P}, {_O}) AS n FROM {stage} WHERE {present}) AS d WHERE n > 1 "
                f"UNION SELECT s.{_P}, s.{_O} FROM {stage} AS s WHERE EXISTS (SELECT 1 FROM {table} AS t WHERE {match})"
            )
            for p, o in cur.fetchall():
                found.setdefault((p, o), (p, o, "pymysql.err.IntegrityError", f"Duplicate entry for key '{name}'"))
    if found:
        cur.executemany(f"DELETE FROM {stage} WHERE {_P} = %s AND {_O} = %s", list(found))
    return sorted(found.values())


def _unique_keys(cur: Any, table: tuple[str, ...]) -> list[tuple[str, list[str]]]:
    """The target's unique indexes (primary key included) on whole columns: (name, columns)."""
    schema, name = (table[0], table[1]) if len(table) == 2 else (None, table[0])
    cur.execute(
        "SELECT index_name, column_name, sub_part FROM information_schema.statistics "
        "WHERE table_schema = COALESCE(%s, DATABASE()) AND table_name = %s AND non_unique = 0 "
        "ORDER BY index_name, seq_in_index",
        (schema, name),
    )
    indexes: dict[str, list[str]] = {}
    partial: set[str] = set()
    for index, column, sub_part in cur.fetchall():
        indexes.setdefault(index, []).append(column)
        if sub_part is not None:
            partial.add(index)
    return [(index, columns) for index, columns in indexes.items() if index not in partial]


def alter_offsets(cfg: JdbcSinkConfig, name: str, offsets: Mapping[TopicPartition, int | None] | None) -> None:
    """An offset reset or alteration through Connect, applied to the target's `connect_sink_offsets`."""
    dialect = dialect_for(cfg.connection_url)
    with _transaction(dialect.mysql_args(cfg.connection_user, cfg.connection_password), dialect.host) as cur:
        cur.execute(
            "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = 'connect_sink_offsets'"
        )
        if not cur.fetchone()[0]:
            return
        if offsets is None:
            cur.execute("DELETE FROM connect_sink_offsets WHERE connector = %s", (name,))
            return
        for tp, offset in offsets.items():
            if offset is None:
                cur.execute(
                    "DELETE FROM connect_sink_offsets WHERE connector = %s AND topic = %s AND `partition` = %s",
                    (name, tp.topic, tp.partition),
                )
            else:
                cur.execute(
                    "INSERT INTO connect_sink_offsets VALUES (%s, %s, %s, %s) "
                    "ON DUPLICATE KEY UPDATE next_offset = VALUES(next_offset)",
                    (name, tp.topic, tp.partition, offset),
                )
