"""The PostgreSQL target's SQL and writers: the merge of the staging table into the target, and
the COPY writers every Spark partition runs (CSV through psycopg2, binary through ADBC)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

from connect_core.connectors.jdbc._staging import STAGE_DELETED, STAGE_OFFSET

__all__ = ["BINARY_KIND", "KINDS", "adbc_writer", "csv_writer", "merge", "run_merge"]

_O, _D = STAGE_OFFSET, STAGE_DELETED


def run_merge(
    cur: Any, mode: str, table: Any, stage: str, columns: list[str], keys: list[str], tombstones: bool = False
) -> None:
    """Merge the staged rows. An upsert first goes without de-duplicating (no sort of the batch);
    only when a key occurs twice in the batch (PostgreSQL refuses to update a row twice in one
    statement) is it redone keeping the newest offset per key. With tombstones staged, each key's
    newest record is merged unless it is a tombstone (its row was deleted)."""
    import psycopg2.errors

    if tombstones:
        cur.execute(merge(mode, table, stage, columns, keys, dedupe=True, tombstones=True))
        return
    if mode != "upsert":
        cur.execute(merge(mode, table, stage, columns, keys, dedupe=True))
        return
    cur.execute("SAVEPOINT connect_merge")
    try:
        cur.execute(merge(mode, table, stage, columns, keys, dedupe=False))
    except psycopg2.errors.CardinalityViolation:
        cur.execute("ROLLBACK TO SAVEPOINT connect_merge")
        cur.execute(merge(mode, table, stage, columns, keys, dedupe=True))


def merge(
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


def csv_writer(dsn: dict[str, str], copy_sql: str) -> Any:
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
KINDS = {
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
BINARY_KIND = {
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


def adbc_writer(dsn: dict[str, str], table: tuple[str, ...], plan: dict[str, str]) -> Any:
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
