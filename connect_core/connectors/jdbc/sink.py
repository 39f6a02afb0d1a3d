"""JdbcSinkConnector: topics into PostgreSQL tables, COPY-fast and exactly once.

A micro-batch goes, per topic, (1) by COPY from every Spark partition in
parallel (Arrow batches written as CSV by pyarrow, no row-by-row JDBC) into an
unlogged staging table with the target's column types, then (2) in one
transaction of the target: `INSERT`, `INSERT … ON CONFLICT DO UPDATE` (upsert,
the newest offset per key wins) or `UPDATE … FROM`, plus the topic offsets in a
table `connect_sink_offsets` of the target. A batch delivered again after a
crash skips every row at or past those offsets, so nothing is written twice,
whatever `insert.mode` is.
"""

from __future__ import annotations

import hashlib
import itertools
import time
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from connect_core.connectors.jdbc import _pgcopy, _staging, _tolerant
from connect_core.connectors.jdbc._driver_jar import DriverJars
from connect_core.connectors.jdbc._mariadb_target import MariaDbTarget
from connect_core.connectors.jdbc._mariadb_target import alter_offsets as mariadb_alter_offsets
from connect_core.connectors.jdbc._staging import (
    STAGE_DELETED,
    STAGE_OFFSET,
    STAGE_PARTITION,
    ArrowStaged,
    Layout,
    TombstoneSeen,
    copier,
    run_copy,
    stager,
    tombstones_refused,
    where_text,
)
from connect_core.connectors.jdbc.config import JdbcSinkConfig
from connect_core.connectors.jdbc.dialect import dialect_for, lineage_datasets
from connect_core.connectors.jdbc.types import postgres_type
from connect_core.runtime.execution import _faults
from connect_core.sdk import ArrowRecords, ErrantRecords, LineageDataset, SinkBatch, SinkConnector, SinkTask
from connect_core.sdk.errors import ConfigError, DataError
from connect_core.sdk.records import CommittedOffset, TopicPartition
from connect_core.sdk.transforms import TOMBSTONE_COLUMN

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["JdbcSinkConnector", "JdbcSinkTask"]

OFFSETS_TABLE = "connect_sink_offsets"
_P, _O, _D = STAGE_PARTITION, STAGE_OFFSET, STAGE_DELETED


class JdbcSinkTask(SinkTask):
    def open(self, committed: Mapping[TopicPartition, CommittedOffset]) -> Mapping[str, Any] | None:
        self.cfg = JdbcSinkConfig.model_validate(self.config)
        dialect = dialect_for(self.cfg.connection_url)
        self.host = dialect.host
        self.stage = (
            "connect_stage_" + hashlib.md5(f"{self.context.connector}/{self.context.task_id}".encode()).hexdigest()[:16]
        )
        tolerant = self.context.errant is not None
        self.mariadb = None
        if dialect.name == "mariadb":
            self.mariadb = MariaDbTarget(self.cfg, self.context.connector, self.stage, self.log)
            self.applied = self.mariadb.open(committed, tolerant)
            return None
        self.dsn = dialect.libpq_dsn(self.cfg.connection_user, self.cfg.connection_password)
        with self._connect() as conn, conn.cursor() as cur:
            cur.execute(
                f"CREATE TABLE IF NOT EXISTS {OFFSETS_TABLE} (connector text, topic text, partition int, "
                "next_offset bigint NOT NULL, PRIMARY KEY (connector, topic, partition))"
            )
            cur.execute(f"DROP TABLE IF EXISTS {self.stage}")  # left by a run that died mid-COPY
            if tolerant:
                _tolerant.open_errors(cur, self.context.connector, committed)
            cur.execute(
                f"SELECT topic, partition, next_offset FROM {OFFSETS_TABLE} WHERE connector = %s",
                (self.context.connector,),
            )
            self.applied = {TopicPartition(t, p): o for t, p, o in cur.fetchall()}
        return None

    def _connect(self) -> Any:
        return _pgcopy.connect(self.dsn, self.host)

    def write(self, spark: SparkSession, batch: SinkBatch) -> Mapping[str, Any] | None:
        from pyspark.sql import functions as F

        written = 0
        for topic in sorted({tp.topic for tp in batch.partitions}):
            fresh = [
                (F.col("__partition") == tp.partition) & (F.col("__offset") >= self.applied.get(tp, 0))
                for tp in batch.partitions
                if tp.topic == topic
            ]
            keep = fresh[0]
            for cond in fresh[1:]:
                keep = keep | cond
            read, records = batch.topic(topic), batch.arrow(topic)
            applied = {tp.partition: self.applied.get(tp, 0) for tp in batch.partitions if tp.topic == topic}
            # the topic's records' name after the transforms (routers) picks the table
            layout = _staging.layout(topic, read.filter(keep), self.cfg, batch.destination(topic))
            if self.context.errant is not None:
                self._report_again(topic, read, applied, records)
            if self.mariadb is not None:
                staged = self.mariadb.staged(layout, records, applied)
                copied, bad = self.mariadb.write(topic, layout, staged, self.context.errant is not None)
                if bad:
                    self._report(topic, read, bad, records)
                written += copied
                continue
            try:
                written += self._write_topic(topic, layout, records, applied, read)
            except Exception as exc:
                refused = _tolerant.refused_record(exc)
                if refused is None:
                    raise
                raise DataError(
                    f"a record of topic `{topic}` could not be written to {self.host}: {refused} "
                    "(errors.tolerance=none: nothing past the last commit is committed; `all` would skip it)"
                ) from exc
        return {"rows_written": written}

    def _report_again(self, topic: str, df: DataFrame, applied: dict[int, int], records: ArrowRecords | None) -> None:
        """Rows an earlier run set aside and wrote past in the target, whose run did not commit:
        the runtime has not dead-lettered them, so they are reported again."""
        if self.mariadb is not None:
            earlier = self.mariadb.set_aside(topic, applied)
        else:
            with self._connect() as conn, conn.cursor() as cur:
                earlier = _tolerant.set_aside(cur, self.context.connector, topic, applied)
        if earlier:
            self._report(topic, df, earlier, records)

    def _report(
        self, topic: str, df: DataFrame, bad: list[tuple[Any, ...]], records: ArrowRecords | None = None
    ) -> None:
        """Send the bad rows (partition, offset, class, message) of `topic`, as read, to the runtime:
        picked from the topic's Arrow records where there are (no Spark job for a small batch)."""
        import pyarrow as pa
        from pyspark.sql import functions as F

        assert self.context.errant is not None
        index = {(p, o): (cls, msg) for p, o, cls, msg in bad}
        if records is not None:
            rows = records.collect_arrow(_picker(index))
        else:
            keys = df.sparkSession.createDataFrame([(p, o) for p, o in index], "__bp int, __bo long")
            condition = (F.col("__partition") == F.col("__bp")) & (F.col("__offset") == F.col("__bo"))
            rows = df.join(F.broadcast(keys), condition).drop("__bp", "__bo").toArrow()
        rows = rows.sort_by([("__partition", "ascending"), ("__offset", "ascending")])
        rows = rows.set_column(  # where it was read (a router may have renamed it)
            rows.column_names.index("__topic"), "__topic", pa.array([topic] * rows.num_rows, pa.string())
        )
        found = list(zip(rows.column("__partition").to_pylist(), rows.column("__offset").to_pylist(), strict=True))
        self.context.errant.report(
            ErrantRecords(rows, [index[k][0] for k in found], [index[k][1] for k in found], stage="TASK_PUT")
        )

    def _write_topic(
        self, topic: str, layout: Layout, records: ArrowRecords | None, applied: dict[int, int], read: DataFrame
    ) -> int:
        from psycopg2 import sql
        from pyspark.sql import functions as F
        from pyspark.sql.types import BinaryType

        cfg = self.cfg
        table, df, columns, keys = sql.Identifier(*layout.table), layout.df, layout.columns, layout.keys
        self._ensure_table(table, df, columns, keys)
        tolerant = self.context.errant is not None
        # Tolerating bad rows needs COPY's CSV path: its errors name the line (see `_tolerant`).
        plan = None if tolerant else self._binary_plan(table, df, columns)
        if plan is None:
            # CSV: BYTEA goes as \x-hex text; everything else as pyarrow writes it (exact for every other type).
            out = [
                F.concat(F.lit("\\x"), F.lower(F.hex(F.col(c)))).alias(c)
                if isinstance(df.schema[c].dataType, BinaryType)
                else F.col(c)
                for c in columns
            ]
        else:
            out = [F.col(c) for c in columns]
        # Tombstones are staged as such: deleted (`delete.enabled`) or refused. (Tolerating bad rows
        # and deleting cannot be configured together.)
        tombstones = TOMBSTONE_COLUMN in df.columns and not tolerant
        if tombstones:
            out.append(F.coalesce(F.col(TOMBSTONE_COLUMN), F.lit(False)).alias(_D))
        staged: Any = df.select(*out, F.col("__partition").alias(_P), F.col("__offset").alias(_O))
        binary_columns = any(isinstance(df.schema[c].dataType, BinaryType) for c in columns)
        if records is not None and (plan is not None or (tolerant and not binary_columns)):
            # COPY of the topic's files as pyarrow reads them (binary; CSV when tolerating bad rows,
            # unless BYTEA needs Spark's hex text): no JVM between file and database.
            staged = ArrowStaged(
                records, stager(columns, cfg.pk_mode == "kafka", applied, layout.from_key, deleted=tombstones)
            )
        if tolerant:
            done = None
            if cfg.insert_mode == "upsert" and self._is_empty(table):
                done = self._copy_direct_tolerant(topic, table, staged, columns)
            copied, bad = done or self._copy_and_merge_tolerant(topic, table, staged, columns, keys)
            if bad:
                self._report(topic, read, bad, records)
            return copied
        if cfg.insert_mode == "upsert" and self._is_empty(table):
            direct = self._copy_direct(topic, table, staged, columns, plan, tombstones)
            if direct is not None:
                return direct
        return self._copy_and_merge(topic, table, staged, columns, keys, plan, tombstones)

    def _binary_plan(self, table: Any, df: DataFrame, columns: list[str]) -> dict[str, str] | None:
        """Binary COPY (through ADBC) when every column's type has the same kind of value in the
        topic and in the table: {column: PostgreSQL type}; else None (the CSV path, where
        PostgreSQL's own casts apply)."""
        with self._connect() as conn, conn.cursor() as cur:
            cur.execute(
                "SELECT attname, format_type(atttypid, NULL) FROM pg_attribute "
                "WHERE attrelid = to_regclass(%s) AND attnum > 0 AND NOT attisdropped",
                (table.as_string(conn),),
            )
            types = dict(cur.fetchall())
        plan = {}
        for c in columns:
            kind = _KINDS.get(type(df.schema[c].dataType).__name__)
            if kind is None or _BINARY_KIND.get(types.get(c, "")) != kind:
                return None
            plan[c] = types[c]
        return plan

    def _is_empty(self, table: Any) -> bool:
        from psycopg2 import sql

        with self._connect() as conn, conn.cursor() as cur:
            cur.execute(sql.SQL("SELECT NOT EXISTS (SELECT 1 FROM {})").format(table))
            return bool(cur.fetchone()[0])

    def _copy_direct(
        self,
        topic: str,
        table: Any,
        staged: DataFrame | ArrowStaged,
        columns: list[str],
        plan: dict[str, str] | None,
        tombstones: bool,
    ) -> int | None:
        """An upsert into an empty table: every Spark partition COPYs straight into it, in its own
        transaction; then one transaction records the offsets. Nothing to merge with, so no staging.

        If a partition fails (a key twice in the batch, a row written meanwhile) or the run dies,
        the partitions that committed hold rows of this batch only, and the whole batch goes through
        the merge path next (this run, or the rerun, which finds the table no longer empty): an
        upsert of the whole batch overwrites them with each key's newest row, so nothing is lost
        or duplicated. A tombstone, too, sends the batch to the merge path, which deletes (or refuses)
        it. Returns None when the merge path must run."""
        writer = self._writer(table, columns, plan)
        started = time.monotonic()
        try:
            reached = run_copy(staged, copier(writer, len(columns), refuse_tombstones=tombstones))
        except Exception as exc:
            if isinstance(exc, TombstoneSeen) or TombstoneSeen.__name__ in str(exc):
                self.log.info("%s: the batch holds tombstones; merging it", topic)
            else:
                self.log.warning("%s: COPY into the empty table failed (%s); merging the batch instead", topic, exc)
            return None
        copied = sum(r["n"] for r in reached)
        with self._connect() as conn, conn.cursor() as cur:
            self._record_offsets(cur, topic, reached)
        self.log.info(
            "%s: %d row(s) COPYed (%s) into the empty table %s in %.1f s",
            topic,
            copied,
            "binary" if plan else "csv",
            where_text(staged),
            time.monotonic() - started,
        )
        return copied

    def _copy_direct_tolerant(
        self, topic: str, table: Any, staged: DataFrame | ArrowStaged, columns: list[str]
    ) -> tuple[int, list[tuple[Any, ...]]] | None:
        """`_copy_direct` setting bad rows aside: the target's own constraints refuse them, each COPY
        error names its line (see `_tolerant`). A key twice in the batch is no bad row: then, as
        in `_copy_direct`, the merge path runs instead (None)."""
        import psycopg2.errors
        from psycopg2 import sql

        with self._connect() as conn:
            copy_sql = (
                sql.SQL("COPY {} ({}) FROM STDIN WITH (FORMAT csv)")
                .format(table, sql.SQL(", ").join(map(sql.Identifier, columns)))
                .as_string(conn)
            )
        copy_tolerantly = _tolerant.tolerant_copier(
            self.dsn, _pgcopy.SESSION, copy_sql, len(columns) + 2, len(columns), unique_is_bad=False
        )
        try:
            found = run_copy(staged, copy_tolerantly, _tolerant.BAD_SCHEMA)
        except Exception as exc:
            if not isinstance(exc, psycopg2.errors.UniqueViolation) and "UniqueViolation" not in str(exc):
                raise
            self.log.warning("%s: a key twice in the batch; merging it instead of COPYing into the table", topic)
            return None
        reached = [r for r in found if r["p"] is not None]
        bad = [(r["bp"], r["bo"], r["cls"], r["msg"]) for r in found if r["bp"] is not None]
        with self._connect() as conn, conn.cursor() as cur:
            self._record_offsets(cur, topic, [{**r, "n": max(r["n"], 1)} for r in reached])
            _tolerant.remember(cur, self.context.connector, topic, bad)
        copied = sum(r["n"] for r in reached)
        self.log.info("%s: %d row(s) COPYed into the empty table, %d set aside", topic, copied, len(bad))
        return copied, bad

    def _writer(self, table: Any, columns: list[str], plan: dict[str, str] | None) -> Any:
        """How a partition's rows get into `table`: binary COPY through ADBC by `plan`, or CSV."""
        from psycopg2 import sql

        if isinstance(table, str):
            parts: tuple[str, ...] = (table,)
            table = sql.Identifier(table)
        else:
            parts = tuple(table.strings)
        if plan is not None:
            return _adbc_writer(self.dsn, parts, plan)
        with self._connect() as conn:
            copy_sql = sql.SQL("COPY {} ({}) FROM STDIN WITH (FORMAT csv)").format(
                table, sql.SQL(", ").join(map(sql.Identifier, columns))
            )
            return _csv_writer(self.dsn, copy_sql.as_string(conn))

    def _copy_and_merge(
        self,
        topic: str,
        table: Any,
        staged: DataFrame | ArrowStaged,
        columns: list[str],
        keys: list[str],
        plan: dict[str, str] | None,
        tombstones: bool = False,
    ) -> int:
        """COPY into an unlogged staging table from every partition, then one transaction merges it
        into the target (deleting the rows of tombstones' keys) and records the offsets."""
        from psycopg2 import sql

        ident = sql.Identifier
        with self._connect() as conn, conn.cursor() as cur:
            self._create_stage(cur, table, columns, tombstones)
        flags = [_D] if tombstones else []
        stage_plan = None if plan is None else {**plan, **dict.fromkeys(flags, "boolean"), _P: "integer", _O: "bigint"}
        writer = self._writer(self.stage, [*columns, *flags, _P, _O], stage_plan)
        started = time.monotonic()
        reached = run_copy(staged, copier(writer, len(columns) + len(flags) + 2))
        copied = sum(r["n"] for r in reached)
        copy_s = time.monotonic() - started
        _faults.checkpoint("mid_sink")  # staged in the target database, not merged
        with self._connect() as conn, conn.cursor() as cur:
            found = self._apply_tombstones(cur, topic, table, keys) if tombstones else 0
            copied -= found
            _run_merge(cur, self.cfg.insert_mode, table, self.stage, columns, keys, found > 0)
            self._record_offsets(cur, topic, reached)
            cur.execute(sql.SQL("DROP TABLE {}").format(ident(self.stage)))
        self.log.info(
            "%s: %d row(s) COPYed (%s) %s in %.1f s, merged in %.1f s",
            topic,
            copied,
            "binary" if plan else "csv",
            where_text(staged),
            copy_s,
            time.monotonic() - started - copy_s,
        )
        return copied

    def _copy_and_merge_tolerant(
        self, topic: str, table: Any, staged: DataFrame | ArrowStaged, columns: list[str], keys: list[str]
    ) -> tuple[int, list[tuple[Any, ...]]]:
        """`_copy_and_merge` setting bad rows aside (see `_tolerant`): (rows written, bad rows)."""
        import psycopg2
        from psycopg2 import sql

        ident = sql.Identifier
        with self._connect() as conn, conn.cursor() as cur:
            self._create_stage(cur, table, columns)
            copy_sql = (
                sql.SQL("COPY {} ({}) FROM STDIN WITH (FORMAT csv)")
                .format(ident(self.stage), sql.SQL(", ").join(map(ident, [*columns, _P, _O])))
                .as_string(conn)
            )
        copy_tolerantly = _tolerant.tolerant_copier(
            self.dsn, _pgcopy.SESSION, copy_sql, len(columns) + 2, len(columns) + 2
        )
        found = run_copy(staged, copy_tolerantly, _tolerant.BAD_SCHEMA)
        reached = [r for r in found if r["p"] is not None]
        bad = [(r["bp"], r["bo"], r["cls"], r["msg"]) for r in found if r["bp"] is not None]
        staged_rows = sum(r["n"] for r in reached)  # the good rows COPYed
        copy_bad = len(bad)
        _faults.checkpoint("mid_sink")
        mode = self.cfg.insert_mode
        with self._connect() as conn, conn.cursor() as cur:
            bad += _tolerant.quarantine(cur, table, self.stage, columns, mode, _P, _O)
            cur.execute("SAVEPOINT connect_merge_all")
            try:
                _run_merge(cur, mode, table, self.stage, columns, keys)
            except (psycopg2.DataError, psycopg2.IntegrityError):
                cur.execute("ROLLBACK TO SAVEPOINT connect_merge_all")
                bad += _tolerant.merge_by_halves(
                    cur,
                    lambda where: _merge(mode, table, self.stage, columns, keys, dedupe=True, where=where),
                    self.stage,
                    _P,
                    _O,
                )
            # A partition whose every row was set aside is consumed all the same.
            self._record_offsets(cur, topic, [{**r, "n": max(r["n"], 1)} for r in reached])
            _tolerant.remember(cur, self.context.connector, topic, bad)
            cur.execute(sql.SQL("DROP TABLE {}").format(ident(self.stage)))
        copied = staged_rows - (len(bad) - copy_bad)
        self.log.info("%s: %d row(s) written, %d set aside (errors.tolerance=all)", topic, copied, len(bad))
        return copied, bad

    def _create_stage(self, cur: Any, table: Any, columns: list[str], tombstones: bool = False) -> None:
        from psycopg2 import sql

        ident = sql.Identifier
        cur.execute(
            sql.SQL("CREATE UNLOGGED TABLE {} AS SELECT {} FROM {} WITH NO DATA").format(
                ident(self.stage), sql.SQL(", ").join(map(ident, columns)), table
            )
        )
        if tombstones:
            cur.execute(sql.SQL("ALTER TABLE {} ADD COLUMN {} boolean").format(ident(self.stage), ident(_D)))
        cur.execute(
            sql.SQL("ALTER TABLE {} ADD COLUMN {} int, ADD COLUMN {} bigint").format(
                ident(self.stage), ident(_P), ident(_O)
            )
        )

    def _apply_tombstones(self, cur: Any, topic: str, table: Any, keys: list[str]) -> int:
        """Delete the rows whose key's newest staged record is a tombstone (`delete.enabled`), in the
        merge's transaction; without `delete.enabled` a staged tombstone fails the batch, as Kafka's
        JDBC sink fails on a null value. Returns the number of tombstones staged."""
        from psycopg2 import sql

        ident = sql.Identifier
        cur.execute(sql.SQL("SELECT count(*) FROM {} WHERE {}").format(ident(self.stage), ident(_D)))
        found = int(cur.fetchone()[0])
        if not found:
            return 0
        if not self.cfg.delete_enabled:
            raise DataError(tombstones_refused(topic, found))
        key_list = sql.SQL(", ").join(map(ident, keys))
        cur.execute(
            sql.SQL(
                "DELETE FROM {} AS t USING (SELECT DISTINCT ON ({}) {}, {} FROM {} ORDER BY {}, {} DESC) AS s "
                "WHERE s.{} AND {}"
            ).format(
                table,
                key_list,
                key_list,
                ident(_D),
                ident(self.stage),
                key_list,
                ident(_O),
                ident(_D),
                sql.SQL(" AND ").join(sql.SQL("t.{} = s.{}").format(ident(k), ident(k)) for k in keys),
            )
        )
        self.log.info("%s: %d row(s) deleted for %d tombstone(s)", topic, cur.rowcount, found)
        return found

    def _record_offsets(self, cur: Any, topic: str, reached: list[Any]) -> None:
        """The next offset of every topic partition written, in the target's transaction."""
        for partition, end in _staging.next_offsets(reached).items():
            cur.execute(
                f"INSERT INTO {OFFSETS_TABLE} VALUES (%s, %s, %s, %s) ON CONFLICT (connector, topic, partition) "
                f"DO UPDATE SET next_offset = GREATEST({OFFSETS_TABLE}.next_offset, EXCLUDED.next_offset)",
                (self.context.connector, topic, partition, end),
            )

    def _ensure_table(self, table: Any, df: DataFrame, columns: list[str], keys: list[str]) -> None:
        from psycopg2 import sql

        wanted = {c: postgres_type(df.schema[c]) for c in columns}  # raises on a type it cannot map
        with self._connect() as conn, conn.cursor() as cur:
            cur.execute("SELECT to_regclass(%s)", (table.as_string(conn),))
            exists = cur.fetchone()[0] is not None
            if not exists:
                if not self.cfg.auto_create:
                    raise ConfigError(
                        f"table {table.as_string(conn)} does not exist at {self.host}: create it or set `auto.create`"
                    )
                defs = [sql.SQL("{} {}").format(sql.Identifier(c), sql.SQL(wanted[c])) for c in columns]
                if keys:
                    defs.append(sql.SQL("PRIMARY KEY ({})").format(sql.SQL(", ").join(map(sql.Identifier, keys))))
                cur.execute(sql.SQL("CREATE TABLE {} ({})").format(table, sql.SQL(", ").join(defs)))
                return
            cur.execute(
                "SELECT attname FROM pg_attribute WHERE attrelid = to_regclass(%s) AND attnum > 0 AND NOT attisdropped",
                (table.as_string(conn),),
            )
            have = {r[0] for r in cur.fetchall()}
            lacking = [c for c in columns if c not in have]
            if lacking and not self.cfg.auto_evolve:
                raise ConfigError(
                    f"table {table.as_string(conn)} lacks column(s) {lacking}: add them or set `auto.evolve`",
                    {"auto.evolve": [f"missing columns {lacking}"]},
                )
            for c in lacking:
                cur.execute(
                    sql.SQL("ALTER TABLE {} ADD COLUMN {} {}").format(table, sql.Identifier(c), sql.SQL(wanted[c]))
                )


def _picker(index: Mapping[tuple[int, int], Any]) -> Any:
    """A filter of topic batches down to the rows at `index`'s (partition, offset) pairs."""
    by_partition: dict[int, list[int]] = {}
    for p, o in index:
        by_partition.setdefault(p, []).append(o)

    def pick(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa
        import pyarrow.compute as pc

        for batch in batches:
            mask = None
            for p, offsets in by_partition.items():
                hit = pc.and_(
                    pc.equal(batch.column("__partition"), p), pc.is_in(batch.column("__offset"), pa.array(offsets))
                )
                mask = hit if mask is None else pc.or_(mask, hit)
            if mask is not None:
                picked = batch.filter(mask)
                if picked.num_rows:
                    yield picked

    return pick


def _table_ident(name: str) -> Any:
    from psycopg2 import sql

    from connect_core.connectors.jdbc.dialect import parse_identifier

    return sql.Identifier(*parse_identifier(name, "table"))


def _run_merge(
    cur: Any, mode: str, table: Any, stage: str, columns: list[str], keys: list[str], tombstones: bool = False
) -> None:
    """Merge the staged rows. An upsert first goes without de-duplicating (no sort of the batch);
    only when a key occurs twice in the batch (PostgreSQL refuses to update a row twice in one
    statement) is it redone keeping the newest offset per key. With tombstones staged, each key's
    newest record is merged unless it is a tombstone (its row was deleted)."""
    import psycopg2.errors

    if tombstones:
        cur.execute(_merge(mode, table, stage, columns, keys, dedupe=True, tombstones=True))
        return
    if mode != "upsert":
        cur.execute(_merge(mode, table, stage, columns, keys, dedupe=True))
        return
    cur.execute("SAVEPOINT connect_merge")
    try:
        cur.execute(_merge(mode, table, stage, columns, keys, dedupe=False))
    except psycopg2.errors.CardinalityViolation:
        cur.execute("ROLLBACK TO SAVEPOINT connect_merge")
        cur.execute(_merge(mode, table, stage, columns, keys, dedupe=True))


def _merge(
    mode: str,
    table: Any,
    stage: str,
    columns: list[str],
    keys: list[str],
    *,
    dedupe: bool,
    where: Any = None,
    tombstones: bool = False,
) -> Any:
    """The statement merging the staged rows (those `where` selects, if given) into `table`; with
    `tombstones`, each key's newest row unless that is a tombstone."""
    from psycopg2 import sql

    ident = sql.Identifier
    cols = sql.SQL(", ").join(map(ident, columns))
    rows = where if where is not None else sql.SQL("TRUE")
    key_list = sql.SQL(", ").join(map(ident, keys))
    if tombstones:
        latest = sql.SQL(
            "SELECT {} FROM (SELECT DISTINCT ON ({}) {}, {} FROM {} WHERE {} ORDER BY {}, {} DESC) AS n WHERE NOT {}"
        ).format(cols, key_list, cols, ident(_D), ident(stage), rows, key_list, ident(_O), ident(_D))
        if mode == "insert":
            return sql.SQL("INSERT INTO {} ({}) {}").format(table, cols, latest)
    elif mode == "insert":
        return sql.SQL("INSERT INTO {} ({}) SELECT {} FROM {} WHERE {}").format(table, cols, cols, ident(stage), rows)
    else:
        latest = (
            sql.SQL("SELECT DISTINCT ON ({}) {} FROM {} WHERE {} ORDER BY {}, {} DESC").format(
                key_list, cols, ident(stage), rows, key_list, ident(_O)
            )
            if dedupe
            else sql.SQL("SELECT {} FROM {} WHERE {}").format(cols, ident(stage), rows)
        )
    others = [c for c in columns if c not in keys]
    if mode == "upsert":
        action = (
            sql.SQL("DO UPDATE SET {}").format(
                sql.SQL(", ").join(sql.SQL("{} = EXCLUDED.{}").format(ident(c), ident(c)) for c in others)
            )
            if others
            else sql.SQL("DO NOTHING")
        )
        return sql.SQL("INSERT INTO {} ({}) {} ON CONFLICT ({}) {}").format(table, cols, latest, key_list, action)
    if not others:
        return sql.SQL("SELECT 1")
    return sql.SQL("UPDATE {} AS t SET {} FROM ({}) AS s WHERE {}").format(
        table,
        sql.SQL(", ").join(sql.SQL("{} = s.{}").format(ident(c), ident(c)) for c in others),
        latest,
        sql.SQL(" AND ").join(sql.SQL("t.{} = s.{}").format(ident(k), ident(k)) for k in keys),
    )


def _csv_writer(dsn: dict[str, str], copy_sql: str) -> Any:
    def write(batches: Iterator[Any]) -> None:
        import psycopg2

        conn = psycopg2.connect(**dsn, options="-c client_encoding=UTF8")
        try:
            with conn, conn.cursor() as cur:
                cur.copy_expert(copy_sql, _CsvStream(batches), size=1 << 20)
        finally:
            conn.close()

    return write


# Spark type → kind of value; PostgreSQL type → the kind its binary COPY format takes
_KINDS = {
    "ShortType": "int2",
    "IntegerType": "int4",
    "LongType": "int8",
    "FloatType": "float4",
    "DoubleType": "float8",
    "DecimalType": "numeric",
    "StringType": "text",
    "BinaryType": "bytea",
    "BooleanType": "bool",
    "DateType": "date",
    "TimestampNTZType": "timestamp",
    "TimestampType": "timestamptz",
}
_BINARY_KIND = {
    "smallint": "int2",
    "integer": "int4",
    "bigint": "int8",
    "real": "float4",
    "double precision": "float8",
    "numeric": "numeric",
    "text": "text",
    "character varying": "text",
    "character": "text",
    "json": "text",
    "jsonb": "text",
    "bytea": "bytea",
    "boolean": "bool",
    "date": "date",
    "timestamp without time zone": "timestamp",
    "timestamp with time zone": "timestamptz",
}


def _adbc_writer(dsn: dict[str, str], table: tuple[str, ...], plan: dict[str, str]) -> Any:
    """Binary COPY by ADBC's PostgreSQL driver (C++: no text formatting or parsing of values).
    jsonb's binary format is a version byte (1) before the JSON text."""
    from urllib.parse import quote

    auth = quote(dsn.get("user", ""), safe="") + (":" + quote(dsn["password"], safe="") if dsn.get("password") else "")
    uri = f"postgresql://{auth}@{dsn['host']}:{dsn['port']}/{quote(dsn['dbname'], safe='')}"
    jsonb = [c for c, t in plan.items() if t == "jsonb"]
    names = list(plan)

    def write(batches: Iterator[Any]) -> None:
        import adbc_driver_postgresql.dbapi as adbc
        import pyarrow as pa
        import pyarrow.compute as pc

        def encoded() -> Iterator[Any]:
            for batch in batches:
                columns = []
                for name, column in zip(names, batch.columns, strict=True):
                    if name in jsonb:
                        raw = column.cast(pa.binary())
                        column = pc.binary_join_element_wise(pa.scalar(b"\x01"), raw, pa.scalar(b""))
                    columns.append(column)
                yield pa.RecordBatch.from_arrays(columns, names=names)

        stream = iter(encoded())
        first = next(stream, None)
        if first is None:
            return
        reader = pa.RecordBatchReader.from_batches(first.schema, itertools.chain([first], stream))
        with adbc.connect(uri) as conn, conn.cursor() as cur:
            cur.adbc_ingest(table[-1], reader, mode="append", db_schema_name=table[0] if len(table) == 2 else None)
            conn.commit()

    return write


class _CsvStream:
    """A file-like `read()` over Arrow batches written as CSV by pyarrow, one batch per call.

    psycopg2 sends whatever a `read` returns as one COPY message, so a whole batch goes at
    once (no re-slicing of a buffer). `all_valid` quoting: every non-null value is quoted,
    so "" is an empty string and an unquoted empty field is NULL (PostgreSQL's CSV rules)."""

    def __init__(self, batches: Iterator[Any]) -> None:
        import pyarrow.csv as pacsv

        self._batches = batches
        self._options = pacsv.WriteOptions(include_header=False, quoting_style="all_valid")
        self.rows = 0

    def read(self, size: int = -1) -> bytes:
        import pyarrow as pa
        import pyarrow.csv as pacsv

        for batch in self._batches:
            if batch.num_rows:
                out = pa.BufferOutputStream()
                pacsv.write_csv(batch, out, write_options=self._options)
                self.rows += batch.num_rows
                return out.getvalue().to_pybytes()
        return b""


class JdbcSinkConnector(SinkConnector[JdbcSinkConfig]):
    """The offsets in the target's `connect_sink_offsets` are authoritative (as those of Kafka's
    HDFS/S3 sinks): an offset reset or alteration through Connect is applied there too."""

    config_model = JdbcSinkConfig
    task_class = JdbcSinkTask

    def validate(self, config: JdbcSinkConfig) -> dict[str, list[str]]:
        # The sink loads no jar today; its `connection.jar` is held to the source's rule all the same.
        return {**super().validate(config), **DriverJars.from_env().problems(config.connection_jar)}

    def lineage(self, config: JdbcSinkConfig) -> list[LineageDataset]:
        """The tables `table.name.format` names for the topics; unknown when a transform (a router)
        may rename the topics first."""
        if config.transforms:
            return []
        tables = list(dict.fromkeys(config.table_name_format.replace("${topic}", t) for t in config.topics))
        return lineage_datasets(config.connection_url, tables)

    def alter_offsets(
        self, name: str, config: JdbcSinkConfig, offsets: Mapping[TopicPartition, int | None] | None
    ) -> None:
        import psycopg2

        dialect = dialect_for(config.connection_url)
        if dialect.name == "mariadb":
            mariadb_alter_offsets(config, name, offsets)
            return
        conn = psycopg2.connect(**dialect.libpq_dsn(config.connection_user, config.connection_password))
        try:
            with conn, conn.cursor() as cur:
                cur.execute("SELECT to_regclass(%s)", (OFFSETS_TABLE,))
                if cur.fetchone()[0] is None:
                    return
                if offsets is None:
                    cur.execute(f"DELETE FROM {OFFSETS_TABLE} WHERE connector = %s", (name,))
                    return
                for tp, offset in offsets.items():
                    if offset is None:
                        cur.execute(
                            f"DELETE FROM {OFFSETS_TABLE} WHERE connector = %s AND topic = %s AND partition = %s",
                            (name, tp.topic, tp.partition),
                        )
                    else:
                        cur.execute(
                            f"INSERT INTO {OFFSETS_TABLE} VALUES (%s, %s, %s, %s) ON CONFLICT "
                            "(connector, topic, partition) DO UPDATE SET next_offset = EXCLUDED.next_offset",
                            (name, tp.topic, tp.partition, offset),
                        )
        finally:
            conn.close()

    def task_configs(self, config: JdbcSinkConfig, max_tasks: int) -> list[dict[str, Any]]:
        base = config.model_dump(by_alias=True, exclude_none=True, exclude={"name", "tasks_max"})
        return [{**base, "topics": list(config.topics)} for _ in range(max_tasks)]
