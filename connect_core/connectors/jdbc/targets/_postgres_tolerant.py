"""The JDBC sink under `errors.tolerance=all`: a bad row costs about itself, not its batch.

Bad rows are found where PostgreSQL finds them, without falling back to row-by-row writes:

* **While COPYing into the staging table** (whose columns have the target's types, so a value that
  is no number or too long for a `varchar(n)` fails here): each Spark partition COPYs its rows in
  chunks, each under a savepoint. A failed COPY names the line it failed on (`CONTEXT: COPY …, line
  N`): the rows before it go in again, the row is set aside, and the COPY goes on after it. Every
  row is COPYed at most twice, whatever the number of bad rows. (A failure without a line number
  is bisected.)
* **Before merging**, by set-based checks of the staging table: NULLs in the target's NOT NULL
  columns and, in insert mode, keys that are already in the target or twice in the batch (the
  first in offset order is written, as inserting the batch in order would). One statement each.
* **While merging**, anything else (a CHECK or foreign key, a trigger): the merge is redone by
  halves of the staging table, under savepoints, until each failing row is alone (rare errors: the
  cost is a few statements per bad row).

Each bad row is reported with PostgreSQL's error class and message, and its identity is written to
`connect_sink_errors` in the same target transaction as the offsets, so that a rerun after a crash
between the target's commit and the runtime's reports it again (the runtime's dead-letter topic
gets it once: its commit is the run's).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

__all__ = ["BAD_SCHEMA", "ERRORS_TABLE", "copy_chunks", "quarantine", "refused_record", "tolerant_copier"]

ERRORS_TABLE = "connect_sink_errors"
#: Rows a tolerant copier yields: per topic partition (p, o, n) counts, and one row per bad record.
BAD_SCHEMA = "p int, o long, n long, bp int, bo long, cls string, msg string"
CHUNK_ROWS = 20_000
AFTER_FAILURE_ROWS = 1_000
_LINE = re.compile(r"COPY [^,]{1,200}, line ([0-9]{1,12})")


_WORKER_ERROR = re.compile(r"psycopg2\.errors\.([A-Za-z]{1,60}): ([^\n]{0,500})(?:\nCONTEXT: +([^\n]{0,300}))?")


def refused_record(exc: BaseException) -> str | None:
    """PostgreSQL's message when it refused a record's data (SQLSTATE classes 22, data exception, and
    23, integrity constraint violation), from the error itself or from a Spark worker's text of it;
    None for any other failure."""
    import psycopg2
    import psycopg2.errors

    current: BaseException | None = exc
    while current is not None:
        if isinstance(current, psycopg2.DataError | psycopg2.IntegrityError):
            return _error(current)[1]
        current = current.__cause__
    found = _WORKER_ERROR.search(str(exc)[:50_000])
    if found is None:
        return None
    cls = getattr(psycopg2.errors, found.group(1), None)
    if not (isinstance(cls, type) and issubclass(cls, psycopg2.DataError | psycopg2.IntegrityError)):
        return None
    return found.group(2).strip() + (f" ({found.group(3).strip()})" if found.group(3) else "")


def _error(exc: BaseException) -> tuple[str, str]:
    """(class, message) of a database error, as a dead-letter record's context gives it."""
    cls = f"{type(exc).__module__}.{type(exc).__name__}"
    text = (getattr(exc, "pgerror", None) or str(exc)).strip()
    lines = [line for line in text.splitlines() if line.strip()]
    message = lines[0] if lines else cls
    return cls, message.removeprefix("ERROR:").strip()[:2000]


def copy_chunks(
    cur: Any, copy_sql: str, table: Any, partition_col: int, offset_col: int, sent: int, *, unique_is_bad: bool = True
) -> list[tuple[Any, ...]]:
    """COPY the rows of `table` (a pyarrow Table in the staging layout) through `cur`, setting
    aside the rows PostgreSQL refuses; returns (partition, offset, class, message) of each.

    A failed COPY is rolled back to its savepoint: the rows before the one it names are COPYed
    again, so each bad row costs the rows ahead of it in its chunk. Once a chunk has failed, the
    rest of it goes in chunks of `AFTER_FAILURE_ROWS`: where bad rows are dense, little is redone;
    where there are none, a chunk is one COPY. The first `sent` columns are COPYed. Without
    `unique_is_bad` a unique violation is raised (a COPY straight into the target: a key twice in
    an upsert's batch is no bad row, the merge path handles it)."""

    bad: list[tuple[Any, ...]] = []
    text = table.select(list(range(sent)))
    pending = [(0, table.num_rows)]  # [start, end) ranges still to COPY
    while pending:
        start, end = pending.pop(0)
        if start >= end:
            continue
        failure = _copy(cur, copy_sql, text.slice(start, end - start), unique_is_bad)
        if failure is None:
            continue
        row = _failed_row(failure, text.slice(start, end - start))
        if row is not None:
            alone = _copy(cur, copy_sql, text.slice(start + row, 1), unique_is_bad)
            if alone is None:  # the row named went in alone: not the bad one (never set a good row aside)
                pending[:0] = [*_halves(start, start + row), *_halves(start + row + 1, end)]
                continue
            row += start
            cls, message = _error(alone)
            bad.append((table.column(partition_col)[row].as_py(), table.column(offset_col)[row].as_py(), cls, message))
            rest = [(a, min(a + AFTER_FAILURE_ROWS, end)) for a in range(row + 1, end, AFTER_FAILURE_ROWS)]
            pending[:0] = [(start, row), *rest]
        elif end - start > 1:  # no row named: halves
            pending[:0] = _halves(start, end)
        else:
            cls, message = _error(failure)
            bad.append(
                (table.column(partition_col)[start].as_py(), table.column(offset_col)[start].as_py(), cls, message)
            )
    return bad


def _halves(start: int, end: int) -> list[tuple[int, int]]:
    middle = (start + end) // 2
    return [(start, middle), (middle, end)] if end - start > 1 else [(start, end)]


def _copy(cur: Any, copy_sql: str, rows: Any, unique_is_bad: bool) -> BaseException | None:
    """COPY `rows` under a savepoint; the database's refusal (rolled back), or None when they went in."""
    import psycopg2
    import psycopg2.errors

    cur.execute("SAVEPOINT connect_copy")
    try:
        cur.copy_expert(copy_sql, _Csv(rows), size=1 << 20)
    except (psycopg2.DataError, psycopg2.IntegrityError, psycopg2.ProgrammingError) as exc:
        cur.execute("ROLLBACK TO SAVEPOINT connect_copy")
        if not unique_is_bad and isinstance(exc, psycopg2.errors.UniqueViolation):
            raise
        return exc
    cur.execute("RELEASE SAVEPOINT connect_copy")
    return None


def _failed_row(failure: BaseException, rows: Any) -> int | None:
    """The index in `rows` of the record a COPY error names by line. PostgreSQL counts physical
    lines (a newline inside a quoted CSV value is one), and names the last line of the record."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    context = getattr(getattr(failure, "diag", None), "context", None) or ""
    found = _LINE.search(context)
    if found is None:
        return None
    line = int(found.group(1))
    newlines = np.zeros(rows.num_rows, dtype=np.int64)
    for column in rows.columns:
        if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
            counted = pc.fill_null(pc.count_substring(column, "\n"), 0)
            newlines += counted.to_numpy().astype(np.int64)
    last_lines = np.cumsum(newlines + 1)
    index = int(np.searchsorted(last_lines, line))
    return index if index < rows.num_rows else None


class _Csv:
    """A `read()` over one pyarrow Table as CSV (PostgreSQL's: all non-null values quoted)."""

    def __init__(self, table: Any) -> None:
        self._table = table
        self._done = False

    def read(self, size: int = -1) -> bytes:
        import pyarrow as pa
        import pyarrow.csv as pacsv

        if self._done:
            return b""
        self._done = True
        out = pa.BufferOutputStream()
        options = pacsv.WriteOptions(include_header=False, quoting_style="all_valid")
        pacsv.write_csv(self._table, out, write_options=options)
        return out.getvalue().to_pybytes()


def tolerant_copier(
    dsn: dict[str, str], options: str, copy_sql: str, width: int, sent: int, *, unique_is_bad: bool = True
) -> Any:
    """The function every Spark partition runs in tolerant mode: its rows (staging layout, the last
    two columns partition and offset; the first `sent` go to the COPY) COPYed in chunks in one
    transaction; yields the (p, o, n) of every topic partition seen (offsets of bad rows count as
    consumed) and a row per bad record."""

    def copy(batches: Iterator[Any]) -> Iterator[Any]:
        import psycopg2
        import pyarrow as pa

        seen: dict[int, tuple[int, int]] = {}
        bad: list[tuple[Any, ...]] = []
        conn = psycopg2.connect(**dsn, options=options)
        try:
            with conn, conn.cursor() as cur:
                pending: list[Any] = []
                rows = 0
                for batch in batches:
                    if not batch.num_rows:
                        continue
                    batch = batch.select(list(range(width)))
                    _note(batch, width, seen)
                    pending.append(batch)
                    rows += batch.num_rows
                    if rows >= CHUNK_ROWS:
                        table = pa.Table.from_batches(pending)
                        bad += copy_chunks(
                            cur, copy_sql, table, width - 2, width - 1, sent, unique_is_bad=unique_is_bad
                        )
                        pending, rows = [], 0
                if pending:
                    table = pa.Table.from_batches(pending)
                    bad += copy_chunks(cur, copy_sql, table, width - 2, width - 1, sent, unique_is_bad=unique_is_bad)
        finally:
            conn.close()
        for p, _o, _c, _m in bad:
            old_o, old_n = seen[p]
            seen[p] = (old_o, old_n - 1)
        out = {
            "p": list(seen) + [None] * len(bad),
            "o": [o for o, _ in seen.values()] + [None] * len(bad),
            "n": [n for _, n in seen.values()] + [None] * len(bad),
            "bp": [None] * len(seen) + [b[0] for b in bad],
            "bo": [None] * len(seen) + [b[1] for b in bad],
            "cls": [None] * len(seen) + [b[2] for b in bad],
            "msg": [None] * len(seen) + [b[3] for b in bad],
        }
        schema = pa.schema(
            [
                ("p", pa.int32()),
                ("o", pa.int64()),
                ("n", pa.int64()),
                ("bp", pa.int32()),
                ("bo", pa.int64()),
                ("cls", pa.string()),
                ("msg", pa.string()),
            ]
        )
        yield pa.RecordBatch.from_pydict(out, schema=schema)

    return copy


def _note(batch: Any, width: int, seen: dict[int, tuple[int, int]]) -> None:
    import pyarrow as pa

    table = pa.table({"p": batch.column(width - 2), "o": batch.column(width - 1)})
    grouped = table.group_by("p").aggregate([("o", "max"), ("o", "count")])
    for p, o, n in zip(
        grouped["p"].to_pylist(), grouped["o_max"].to_pylist(), grouped["o_count"].to_pylist(), strict=True
    ):
        old_o, old_n = seen.get(p, (-1, 0))
        seen[p] = (max(old_o, o), old_n + n)


def quarantine(
    cur: Any, table: Any, stage: str, columns: list[str], mode: str, partition_col: str, offset_col: str
) -> list[tuple[Any, ...]]:
    """Take out of the staging table the rows the merge would refuse, by set-based checks; returns
    (partition, offset, class, message) of each."""
    from psycopg2 import sql

    ident = sql.Identifier
    cur.execute(
        "SELECT a.attname FROM pg_attribute a WHERE a.attrelid = to_regclass(%s) AND a.attnum > 0 "
        "AND NOT a.attisdropped AND a.attnotnull",
        (table.as_string(cur),),
    )
    not_null = [r[0] for r in cur.fetchall() if r[0] in columns]
    bad: list[tuple[Any, ...]] = []
    for column in not_null:
        cur.execute(
            sql.SQL("DELETE FROM {} WHERE {} IS NULL RETURNING {}, {}").format(
                ident(stage), ident(column), ident(partition_col), ident(offset_col)
            )
        )
        message = f'null value in column "{column}" of relation "{table.strings[-1]}" violates not-null constraint'
        bad += [(p, o, "psycopg2.errors.NotNullViolation", message) for p, o in cur.fetchall()]
    if mode != "insert":
        return bad
    for name, keys in _unique_keys(cur, table):
        if not set(keys) <= set(columns):
            continue
        key_list = sql.SQL(", ").join(map(ident, keys))
        match = sql.SQL(" AND ").join(sql.SQL("t.{} = s.{}").format(ident(k), ident(k)) for k in keys)
        present = sql.SQL(" AND ").join(sql.SQL("{} IS NOT NULL").format(ident(k)) for k in keys)
        cur.execute(
            sql.SQL(
                "DELETE FROM {stage} s WHERE ({p}, {o}) IN ("
                " SELECT {p}, {o} FROM (SELECT {p}, {o}, row_number() OVER (PARTITION BY {keys} ORDER BY {p}, {o}) n"
                " FROM {stage} WHERE {present}) d WHERE n > 1)"
                " OR EXISTS (SELECT 1 FROM {table} t WHERE {match})"
                " RETURNING {p}, {o}"
            ).format(
                stage=ident(stage),
                p=ident(partition_col),
                o=ident(offset_col),
                keys=key_list,
                present=present,
                table=table,
                match=match,
            )
        )
        message = f'duplicate key value violates unique constraint "{name}"'
        bad += [(p, o, "psycopg2.errors.UniqueViolation", message) for p, o in cur.fetchall()]
    return bad


def _unique_keys(cur: Any, table: Any) -> list[tuple[str, list[str]]]:
    """The target's unique indexes (primary key included) on plain columns: (name, columns)."""
    cur.execute(
        "SELECT c.relname, array_agg(a.attname ORDER BY k.ord) FROM pg_index i "
        "JOIN pg_class c ON c.oid = i.indexrelid "
        "CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, ord) "
        "JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum "
        "WHERE i.indrelid = to_regclass(%s) AND i.indisunique AND i.indexprs IS NULL AND i.indpred IS NULL "
        "GROUP BY c.relname",
        (table.as_string(cur),),
    )
    return [(name, list(cols)) for name, cols in cur.fetchall()]


def merge_by_halves(cur: Any, merge: Any, stage: str, partition_col: str, offset_col: str) -> list[tuple[Any, ...]]:
    """Run `merge(where)` (a statement merging the staged rows `where` selects) over the staging
    table by halves, under savepoints, until each failing row is alone; returns the bad rows."""
    from psycopg2 import sql

    ident = sql.Identifier
    cur.execute(
        sql.SQL("SELECT {}, {} FROM {} ORDER BY 1, 2").format(ident(partition_col), ident(offset_col), ident(stage))
    )
    keys = cur.fetchall()
    bad: list[tuple[Any, ...]] = []
    pending = [(0, len(keys))]
    while pending:
        start, end = pending.pop(0)
        if start >= end:
            continue
        low, high = keys[start], keys[end - 1]
        where = sql.SQL("({p}, {o}) BETWEEN ({lp}, {lo}) AND ({hp}, {ho})").format(
            p=ident(partition_col),
            o=ident(offset_col),
            lp=sql.Literal(low[0]),
            lo=sql.Literal(low[1]),
            hp=sql.Literal(high[0]),
            ho=sql.Literal(high[1]),
        )
        cur.execute("SAVEPOINT connect_merge_part")
        try:
            cur.execute(merge(where))
            cur.execute("RELEASE SAVEPOINT connect_merge_part")
        except Exception as exc:
            import psycopg2

            if not isinstance(exc, psycopg2.DataError | psycopg2.IntegrityError | psycopg2.InternalError):
                raise
            cur.execute("ROLLBACK TO SAVEPOINT connect_merge_part")
            if end - start == 1:
                cls, message = _error(exc)
                bad.append((low[0], low[1], cls, message))
            else:
                middle = (start + end) // 2
                pending[:0] = [(start, middle), (middle, end)]
    return bad


def open_errors(cur: Any, connector: str, committed: Mapping[Any, Any]) -> None:
    """Make the set-aside table if needed and forget rows below the runtime's committed offsets
    (their run committed: the dead-letter topic has them)."""
    cur.execute(
        f"CREATE TABLE IF NOT EXISTS {ERRORS_TABLE} (connector text, topic text, partition int, "
        "record_offset bigint, error_class text, message text, "
        "PRIMARY KEY (connector, topic, partition, record_offset))"
    )
    for tp, offset in committed.items():
        cur.execute(
            f"DELETE FROM {ERRORS_TABLE} WHERE connector = %s AND topic = %s AND partition = %s AND record_offset < %s",
            (connector, tp.topic, tp.partition, offset.offset),
        )


def remember(cur: Any, connector: str, topic: str, bad: list[tuple[Any, ...]]) -> None:
    """Record the rows set aside, in the target transaction that writes past them."""
    if bad:
        cur.executemany(
            f"INSERT INTO {ERRORS_TABLE} VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
            [(connector, topic, p, o, cls, msg) for p, o, cls, msg in bad],
        )


def set_aside(cur: Any, connector: str, topic: str, applied: Mapping[int, int]) -> list[tuple[Any, ...]]:
    """Rows of `topic` an earlier run set aside below the target's offsets whose run did not commit."""
    cur.execute(
        f"SELECT partition, record_offset, error_class, message FROM {ERRORS_TABLE} "
        "WHERE connector = %s AND topic = %s ORDER BY 1, 2",
        (connector, topic),
    )
    return [row for row in cur.fetchall() if row[1] < applied.get(row[0], 0)]
