"""The JDBC sink into PostgreSQL: COPY-fast and exactly once.

A micro-batch goes, per topic, (1) by COPY from every Spark partition in parallel (Arrow batches
written as CSV by pyarrow, or binary through ADBC where every column's kind matches; no row-by-row
JDBC) into an unlogged staging table with the target's column types, then (2) in one transaction
of the target: `INSERT`, `INSERT … ON CONFLICT DO UPDATE` (upsert, the newest offset per key wins)
or `UPDATE … FROM`, plus the topic offsets in the target's `connect_sink_offsets`. An upsert into
an empty table COPYs straight into it. Under `errors.tolerance=all`, bad rows are set aside where
PostgreSQL finds them (`_postgres_tolerant`).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from contextlib import closing
from typing import TYPE_CHECKING, Any

from connect_core.connectors.jdbc import _pgcopy
from connect_core.connectors.jdbc._staging import (
    STAGE_DELETED,
    STAGE_OFFSET,
    STAGE_PARTITION,
    ArrowStaged,
    Layout,
    TombstoneSeen,
    copier,
    next_offsets,
    run_copy,
    stager,
    tombstones_refused,
    where_text,
)
from connect_core.connectors.jdbc.targets import OFFSETS_TABLE, BadRow, _postgres_replace, _postgres_tolerant, register
from connect_core.connectors.jdbc.targets._evolution import evolution
from connect_core.connectors.jdbc.targets._postgres_sql import (
    BINARY_KIND,
    KINDS,
    adbc_writer,
    csv_writer,
    merge,
    run_merge,
)
from connect_core.sdk.errors import ConfigError, DataError
from connect_core.sdk.records import CommittedOffset, TopicPartition
from connect_core.sdk.testing import faults
from connect_core.sdk.transforms import TOMBSTONE_COLUMN

if TYPE_CHECKING:
    import logging

    from pyspark.sql import DataFrame

    from connect_core.connectors.jdbc.config import JdbcSinkConfig
    from connect_core.connectors.jdbc.dialects.postgres import PostgresDialect
    from connect_core.sdk import ArrowRecords

__all__ = ["PostgresTarget"]

_P, _O, _D = STAGE_PARTITION, STAGE_OFFSET, STAGE_DELETED


@register("postgresql")
class PostgresTarget:
    """One sink task's PostgreSQL target: its offsets, staging table, COPYs and merges."""

    def __init__(
        self,
        dialect: PostgresDialect,
        cfg: JdbcSinkConfig,
        connector: str,
        stage: str,
        log: logging.Logger | logging.LoggerAdapter[Any],
    ) -> None:
        self.dialect, self.cfg, self.connector, self.stage, self.log = dialect, cfg, connector, stage, log
        self.dsn = dialect.libpq_dsn()
        self.host = dialect.host
        self.tolerant = False

    def open(self, committed: Mapping[TopicPartition, CommittedOffset], tolerant: bool) -> dict[TopicPartition, int]:
        self.tolerant = tolerant
        with self._connect() as conn, conn.cursor() as cur:
            cur.execute(
                f"CREATE TABLE IF NOT EXISTS {OFFSETS_TABLE} (connector text, topic text, partition int, "
                "next_offset bigint NOT NULL, PRIMARY KEY (connector, topic, partition))"
            )
            cur.execute(f"DROP TABLE IF EXISTS {self.stage}")  # left by a run that died mid-COPY
            if tolerant:
                _postgres_tolerant.open_errors(cur, self.connector, committed)
            cur.execute(
                f"SELECT topic, partition, next_offset FROM {OFFSETS_TABLE} WHERE connector = %s", (self.connector,)
            )
            return {TopicPartition(t, p): o for t, p, o in cur.fetchall()}

    def _connect(self) -> Any:
        return _pgcopy.connect(self.dsn, self.host)

    def set_aside(self, topic: str, applied: Mapping[int, int]) -> list[BadRow]:
        with self._connect() as conn, conn.cursor() as cur:
            return _postgres_tolerant.set_aside(cur, self.connector, topic, applied)

    def write(
        self, topic: str, layout: Layout, records: ArrowRecords | None, applied: dict[int, int]
    ) -> tuple[int, list[BadRow]]:
        try:
            return self._write(topic, layout, records, applied)
        except Exception as exc:
            refused = _postgres_tolerant.refused_record(exc)
            if refused is None:
                raise
            raise DataError(
                f"a record of topic `{topic}` could not be written to {self.host}: {refused} "
                "(errors.tolerance=none: nothing past the last commit is committed; `all` would skip it)"
            ) from exc

    def _write(
        self, topic: str, layout: Layout, records: ArrowRecords | None, applied: dict[int, int]
    ) -> tuple[int, list[BadRow]]:
        from psycopg2 import sql
        from pyspark.sql import functions as F
        from pyspark.sql.types import BinaryType

        cfg = self.cfg
        table, df, columns, keys = sql.Identifier(*layout.table), layout.df, layout.columns, layout.keys
        self._ensure_table(table, layout)
        tolerant = self.tolerant
        # Tolerating bad rows needs COPY's CSV path: its errors name the line (see `_postgres_tolerant`).
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
            return done or self._copy_and_merge_tolerant(topic, table, staged, columns, keys)
        if cfg.insert_mode == "upsert" and self._is_empty(table):
            direct = self._copy_direct(topic, table, staged, columns, plan, tombstones)
            if direct is not None:
                return direct, []
        return self._copy_and_merge(topic, table, staged, columns, keys, plan, tombstones), []

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
            kind = KINDS.get(type(df.schema[c].dataType).__name__)
            if kind is None or BINARY_KIND.get(types.get(c, "")) != kind:
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
        error names its line (see `_postgres_tolerant`). A key twice in the batch is no bad row: then, as
        in `_copy_direct`, the merge path runs instead (None)."""
        import psycopg2.errors
        from psycopg2 import sql

        with self._connect() as conn:
            copy_sql = (
                sql.SQL("COPY {} ({}) FROM STDIN WITH (FORMAT csv)")
                .format(table, sql.SQL(", ").join(map(sql.Identifier, columns)))
                .as_string(conn)
            )
        copy_tolerantly = _postgres_tolerant.tolerant_copier(
            self.dsn, _pgcopy.SESSION, copy_sql, len(columns) + 2, len(columns), unique_is_bad=False
        )
        try:
            found = run_copy(staged, copy_tolerantly, _postgres_tolerant.BAD_SCHEMA)
        except Exception as exc:
            if not isinstance(exc, psycopg2.errors.UniqueViolation) and "UniqueViolation" not in str(exc):
                raise
            self.log.warning("%s: a key twice in the batch; merging it instead of COPYing into the table", topic)
            return None
        reached = [r for r in found if r["p"] is not None]
        bad = [(r["bp"], r["bo"], r["cls"], r["msg"]) for r in found if r["bp"] is not None]
        with self._connect() as conn, conn.cursor() as cur:
            self._record_offsets(cur, topic, [{**r, "n": max(r["n"], 1)} for r in reached])
            _postgres_tolerant.remember(cur, self.connector, topic, bad)
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
            return adbc_writer(self.dsn, parts, plan)
        with self._connect() as conn:
            copy_sql = sql.SQL("COPY {} ({}) FROM STDIN WITH (FORMAT csv)").format(
                table, sql.SQL(", ").join(map(sql.Identifier, columns))
            )
            return csv_writer(self.dsn, copy_sql.as_string(conn))

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
        faults.checkpoint("mid_sink")  # staged in the target database, not merged
        with self._connect() as conn, conn.cursor() as cur:
            found = self._apply_tombstones(cur, topic, table, keys) if tombstones else 0
            copied -= found
            run_merge(cur, self.cfg.insert_mode, table, self.stage, columns, keys, found > 0)
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
        """`_copy_and_merge` setting bad rows aside (see `_postgres_tolerant`): (rows written, bad rows)."""
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
        copy_tolerantly = _postgres_tolerant.tolerant_copier(
            self.dsn, _pgcopy.SESSION, copy_sql, len(columns) + 2, len(columns) + 2
        )
        found = run_copy(staged, copy_tolerantly, _postgres_tolerant.BAD_SCHEMA)
        reached = [r for r in found if r["p"] is not None]
        bad = [(r["bp"], r["bo"], r["cls"], r["msg"]) for r in found if r["bp"] is not None]
        staged_rows = sum(r["n"] for r in reached)  # the good rows COPYed
        copy_bad = len(bad)
        faults.checkpoint("mid_sink")
        mode = self.cfg.insert_mode
        with self._connect() as conn, conn.cursor() as cur:
            bad += _postgres_tolerant.quarantine(cur, table, self.stage, columns, mode, _P, _O)
            cur.execute("SAVEPOINT connect_merge_all")
            try:
                run_merge(cur, mode, table, self.stage, columns, keys)
            except (psycopg2.DataError, psycopg2.IntegrityError):
                cur.execute("ROLLBACK TO SAVEPOINT connect_merge_all")
                bad += _postgres_tolerant.merge_by_halves(
                    cur,
                    lambda where: merge(mode, table, self.stage, columns, keys, dedupe=True, where=where),
                    self.stage,
                    _P,
                    _O,
                )
            # A partition whose every row was set aside is consumed all the same.
            self._record_offsets(cur, topic, [{**r, "n": max(r["n"], 1)} for r in reached])
            _postgres_tolerant.remember(cur, self.connector, topic, bad)
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
        for partition, end in next_offsets(reached).items():
            cur.execute(
                f"INSERT INTO {OFFSETS_TABLE} VALUES (%s, %s, %s, %s) ON CONFLICT (connector, topic, partition) "
                f"DO UPDATE SET next_offset = GREATEST({OFFSETS_TABLE}.next_offset, EXCLUDED.next_offset)",
                (self.connector, topic, partition, end),
            )

    def _ensure_table(self, table: Any, layout: Layout) -> None:
        """The table made (`auto.create`), or its columns evolved as `auto.evolve` and
        `schema.propagation` say (`_evolution`), in one transaction."""
        from psycopg2 import sql

        df, columns, keys = layout.df, layout.columns, layout.keys
        wanted = {c: self.dialect.column_type(df.schema[c]) for c in columns}  # raises on a type it cannot map
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
                "SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute "
                "WHERE attrelid = to_regclass(%s) AND attnum > 0 AND NOT attisdropped",
                (table.as_string(conn),),
            )
            declared = dict(cur.fetchall())
            have = set(declared)
            cur.execute(  # the table's key and unique columns: never dropped nor relaxed
                "SELECT DISTINCT a.attname FROM pg_index i JOIN pg_attribute a "
                "ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey) "
                "WHERE i.indrelid = to_regclass(%s) AND (i.indisprimary OR i.indisunique)",
                (table.as_string(conn),),
            )
            evolve = evolution(self.cfg, layout, declared, {r[0] for r in cur.fetchall()}, wanted)
            lacking = [c for c in columns if c not in have]
            if lacking and not evolve.add:
                raise ConfigError(
                    f"table {table.as_string(conn)} lacks column(s) {lacking}: add them or set `auto.evolve`",
                    {"auto.evolve": [f"missing columns {lacking}"]},
                )
            alter = [sql.SQL("ADD COLUMN {} {}").format(sql.Identifier(c), sql.SQL(wanted[c])) for c in lacking]
            alter += [sql.SQL("DROP COLUMN {}").format(sql.Identifier(c)) for c in evolve.drop]
            alter += [sql.SQL("ALTER COLUMN {} DROP NOT NULL").format(sql.Identifier(c)) for c in evolve.relax]
            alter += [
                sql.SQL("ALTER COLUMN {} TYPE {} USING {}::{}").format(
                    sql.Identifier(c), sql.SQL(wanted[c]), sql.Identifier(c), sql.SQL(wanted[c])
                )
                for c in evolve.widen
            ]
            if alter:
                cur.execute(sql.SQL("ALTER TABLE {} {}").format(table, sql.SQL(", ").join(alter)))
                self.log.info("table %s: %s", table.as_string(conn), sql.SQL(", ").join(alter).as_string(conn))

    def replica(self, table: tuple[str, ...], topic: str, generation: int) -> tuple[str, ...]:
        with closing(self._connect()) as conn, conn, conn.cursor() as cur:
            return _postgres_replace.replica(cur, self.connector, table, topic, generation, self.cfg.auto_create)

    def swap_in(self, table: tuple[str, ...] | None, topic: str, generation: int) -> str | None:
        started = time.monotonic()
        with closing(self._connect()) as conn, conn, conn.cursor() as cur:
            swapped = _postgres_replace.swap_in(cur, self.connector, table, topic, generation)
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
        with closing(self._connect()) as conn, conn, conn.cursor() as cur:
            return _postgres_replace.has_key(cur, table)

    @classmethod
    def alter_offsets(
        cls, dialect: PostgresDialect, connector: str, offsets: Mapping[TopicPartition, int | None] | None
    ) -> None:
        import psycopg2

        conn = psycopg2.connect(**dialect.libpq_dsn())
        try:
            with conn, conn.cursor() as cur:
                cur.execute("SELECT to_regclass(%s)", (OFFSETS_TABLE,))
                if cur.fetchone()[0] is None:
                    return
                if offsets is None:
                    cur.execute(f"DELETE FROM {OFFSETS_TABLE} WHERE connector = %s", (connector,))
                    return
                for tp, offset in offsets.items():
                    if offset is None:
                        cur.execute(
                            f"DELETE FROM {OFFSETS_TABLE} WHERE connector = %s AND topic = %s AND partition = %s",
                            (connector, tp.topic, tp.partition),
                        )
                    else:
                        cur.execute(
                            f"INSERT INTO {OFFSETS_TABLE} VALUES (%s, %s, %s, %s) ON CONFLICT "
                            "(connector, topic, partition) DO UPDATE SET next_offset = EXCLUDED.next_offset",
                            (connector, tp.topic, tp.partition, offset),
                        )
        finally:
            conn.close()
