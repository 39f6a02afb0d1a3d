"""The MariaDB target's SQL: the merge of the staging table into the target, and the search for
the rows it refuses (set-based checks first, then chunks halved until the bad row is alone)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, NamedTuple

from connect_core.connectors.jdbc._staging import STAGE_DELETED, STAGE_OFFSET, STAGE_PARTITION, Layout
from connect_core.connectors.jdbc.targets import BadRow

__all__ = ["CHUNK_ROWS", "REFUSED", "Column", "columns", "merge_in_chunks", "merge_sql", "quarantine", "refused"]

#: Rows per merge statement under `errors.tolerance=all` (a failing one is halved).
CHUNK_ROWS = 10_000
#: Server errors that refuse a row's data: a data exception or a constraint.
REFUSED = frozenset({1048, 1062, 1263, 1264, 1265, 1292, 1364, 1366, 1406, 1411, 1451, 1452, 1690, 3819, 4025})
_AT_ROW = re.compile(r" at row [0-9]+$")
_P, _O = f"`{STAGE_PARTITION}`", f"`{STAGE_OFFSET}`"


class Column(NamedTuple):
    nullable: bool
    data_type: str
    max_length: int | None


def columns(cur: Any, table: tuple[str, ...]) -> dict[str, Column]:
    schema, name = (table[0], table[1]) if len(table) == 2 else (None, table[0])
    cur.execute(
        "SELECT column_name, is_nullable, data_type, character_maximum_length FROM information_schema.columns "
        "WHERE table_schema = COALESCE(%s, DATABASE()) AND table_name = %s ORDER BY ordinal_position",
        (schema, name),
    )
    return {c: Column(n == "YES", str(t).lower(), m) for c, n, t, m in cur.fetchall()}


def column_types(cur: Any, table: tuple[str, ...]) -> dict[str, str]:
    """Each column's declared type (`varchar(255)`, `bigint(20) unsigned` …), as `MODIFY COLUMN` needs it."""
    schema, name = (table[0], table[1]) if len(table) == 2 else (None, table[0])
    cur.execute(
        "SELECT column_name, column_type FROM information_schema.columns "
        "WHERE table_schema = COALESCE(%s, DATABASE()) AND table_name = %s",
        (schema, name),
    )
    return {c: str(t) for c, t in cur.fetchall()}


def unique_columns(cur: Any, table: tuple[str, ...]) -> set[str]:
    """The columns of the table's primary key and unique indexes."""
    schema, name = (table[0], table[1]) if len(table) == 2 else (None, table[0])
    cur.execute(
        "SELECT DISTINCT column_name FROM information_schema.statistics "
        "WHERE table_schema = COALESCE(%s, DATABASE()) AND table_name = %s AND non_unique = 0",
        (schema, name),
    )
    return {str(r[0]) for r in cur.fetchall()}


def merge_sql(mode: str, table: str, stage: str, columns: list[str], keys: list[str], tombstones: bool = False) -> str:
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


def refused(exc: BaseException) -> tuple[str, str] | None:
    """(class, message) of a server error refusing a row's data; None for any other failure."""
    import pymysql

    if not isinstance(exc, pymysql.err.MySQLError) or not exc.args or exc.args[0] not in REFUSED:
        return None
    message = str(exc.args[1]) if len(exc.args) > 1 else str(exc)
    return f"{type(exc).__module__}.{type(exc).__name__}", _AT_ROW.sub("", message)[:2000]


def merge_in_chunks(cur: Any, merge: str, stage: str, *, first: bool = False) -> list[BadRow]:
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
            why = refused(exc)
            if why is None:
                raise
            if end - start > 1:
                middle = (start + end) // 2
                pending[:0] = [(start, middle), (middle, end)]
                continue
            bad.append((partition, low, *why))
            if first:
                break
    return bad


def quarantine(
    cur: Any, table: str, stage: str, layout: Layout, known: Mapping[str, Column], mode: str, quote: Any
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
