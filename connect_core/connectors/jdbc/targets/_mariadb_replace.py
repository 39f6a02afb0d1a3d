"""A `replace` re-read into MariaDB/MySQL: the copy `CREATE TABLE copy LIKE target` takes the re-read's
rows; at its end the copy is marked with the generation (its table COMMENT), then `RENAME TABLE
target TO old, copy TO target` swaps it in (one atomic statement: a reader sees the old table or
the new one), then the old table is dropped. MariaDB's DDL commits on its own, so each step is one
that a batch given again after a kill -9 can redo or skip: a mark on a copy not yet renamed is
set again, an old table left by a kill before its DROP is dropped by the next re-read's first step.

Views and grants name tables by name, so they follow the swap to the new table. `LIKE` copies the
columns, indexes and table options (the comment too); not foreign keys: a target with foreign keys
of its own, or referenced by another table's, is refused before a row is written (InnoDB would
keep them on the old table). Triggers stay with the old table and are dropped with it.
"""

from __future__ import annotations

from typing import Any

from connect_core.connectors.jdbc.targets._replace import COPY, OLD, base, held, is_side, mark, side_name
from connect_core.sdk.errors import ConfigError

__all__ = ["LIMIT", "replica", "swap_in"]

#: MariaDB's longest table name.
LIMIT = 64
#: MariaDB's longest table comment.
_COMMENT_MAX = 2048


def _split(table: tuple[str, ...]) -> tuple[str | None, str]:
    return (table[0], table[1]) if len(table) == 2 else (None, table[0])


def _comment(cur: Any, table: tuple[str, ...]) -> tuple[bool, str | None]:
    """Whether the table exists, and its comment."""
    schema, name = _split(table)
    cur.execute(
        "SELECT table_comment FROM information_schema.tables "
        "WHERE table_schema = COALESCE(%s, DATABASE()) AND table_name = %s",
        (schema, name),
    )
    found = cur.fetchone()
    return (found is not None, found[0] if found is not None else None)


def _drop_leftovers(cur: Any, quote: Any, table: tuple[str, ...], keep: str | None) -> None:
    """Drop the side tables of the target but `keep`: older copies and old targets a kill -9 left."""
    schema, name = _split(table)
    start = base(name, LIMIT)
    cur.execute(
        "SELECT table_name FROM information_schema.tables "
        "WHERE table_schema = COALESCE(%s, DATABASE()) AND LEFT(table_name, %s) = %s",
        (schema, len(start), start),
    )
    for (found,) in cur.fetchall():
        if found != keep and is_side(name, found, LIMIT):
            cur.execute(f"DROP TABLE IF EXISTS {quote((*table[:-1], found))}")


def _refuse_foreign_keys(cur: Any, table: tuple[str, ...]) -> None:
    schema, name = _split(table)
    cur.execute(
        "SELECT CONCAT(table_name, ' (', constraint_name, ')') FROM information_schema.referential_constraints "
        "WHERE (constraint_schema = COALESCE(%s, DATABASE()) AND table_name = %s) "
        "OR (unique_constraint_schema = COALESCE(%s, DATABASE()) AND referenced_table_name = %s) ORDER BY 1",
        (schema, name, schema, name),
    )
    keys = [r[0] for r in cur.fetchall()]
    if keys:
        raise ConfigError(
            f"table {name} cannot be replaced by a re-read: a replace swaps a new table in under its name, and the "
            f"foreign keys {', '.join(keys)} would stay on the old one. Drop them (recreate them after the "
            "re-read), or re-read with `--mode retain`"
        )


def replica(
    cur: Any, quote: Any, table: tuple[str, ...], topic: str, generation: int, auto_create: bool
) -> tuple[str, ...]:
    """Where the rows of re-read `generation` of `topic` go (as PostgreSQL's `replica`): the target
    when it holds that generation already, else the copy (made like the target on first use)."""
    exists, comment = _comment(cur, table)
    if exists and (held(comment, topic) or 0) >= generation:
        _drop_leftovers(cur, quote, table, None)
        return table
    if not exists and not auto_create:
        raise ConfigError(f"table {quote(table)} does not exist: create it or set `auto.create`")
    copy = (*table[:-1], side_name(table[-1], COPY, generation, LIMIT))
    _drop_leftovers(cur, quote, table, copy[-1])
    if exists:
        _refuse_foreign_keys(cur, table)
        if not _comment(cur, copy)[0]:
            cur.execute(f"CREATE TABLE {quote(copy)} LIKE {quote(table)}")
    return copy


def swap_in(cur: Any, quote: Any, table: tuple[str, ...], topic: str, generation: int) -> bool:
    """Swap the copy of re-read `generation` in for the target; False when there is nothing to swap."""
    exists, comment = _comment(cur, table)
    if exists and (held(comment, topic) or 0) >= generation:
        _drop_leftovers(cur, quote, table, None)
        return False
    copy = (*table[:-1], side_name(table[-1], COPY, generation, LIMIT))
    if not _comment(cur, copy)[0]:
        if not exists:
            return False  # no rows were re-read into a table that never existed
        _refuse_foreign_keys(cur, table)
        cur.execute(f"CREATE TABLE {quote(copy)} LIKE {quote(table)}")  # a re-read of no rows: the target ends empty
    marked = mark(comment, topic, generation)
    if len(marked) > _COMMENT_MAX:  # a user's long comment gives way to the mark
        marked = mark(None, topic, generation)
    cur.execute(f"ALTER TABLE {quote(copy)} COMMENT = %s", (marked,))
    if exists:
        old = (*table[:-1], side_name(table[-1], OLD, generation, LIMIT))
        cur.execute(f"DROP TABLE IF EXISTS {quote(old)}")
        cur.execute(f"RENAME TABLE {quote(table)} TO {quote(old)}, {quote(copy)} TO {quote(table)}")
        cur.execute(f"DROP TABLE {quote(old)}")
    else:
        cur.execute(f"RENAME TABLE {quote(copy)} TO {quote(table)}")
    return True
