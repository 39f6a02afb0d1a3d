"""A `replace` re-read into MariaDB/MySQL: the copy `CREATE TABLE copy LIKE target` takes the re-read's
rows; at its end the copy is marked with the generation (its table COMMENT), then `RENAME TABLE
target TO old, copy TO target` swaps it in (one atomic statement: a reader sees the old table or
the new one), then the old table is dropped. MariaDB's DDL commits on its own, so each step is one
that a batch given again after a kill -9 can redo or skip: a mark on a copy not yet renamed is
set again, an old table left by a kill before its DROP is dropped by the next re-read's first step.

Views and grants name tables by name, so they follow the swap to the new table. `LIKE` copies the
columns, indexes and table options (the comment too); not foreign keys: a target with foreign keys
of its own, or referenced by another table's, is refused before a row is written (InnoDB would
keep them on the old table), and so is a target with triggers (they would be dropped with the old
table). Side tables are entered in `_replace`'s register before they are made (an entry whose
table a kill left unmade is harmless: the next step makes or drops it), and leave it once dropped
or swapped in.
"""

from __future__ import annotations

from typing import Any

from connect_core.connectors.jdbc.targets._replace import (
    COPY,
    OLD,
    REGISTER,
    Side,
    claim,
    claimed,
    copy_of,
    held,
    mark,
    release,
    side_name,
)
from connect_core.sdk.errors import ConfigError

__all__ = ["LIMIT", "ensure_register", "replica", "swap_in"]

#: MariaDB's longest table name.
LIMIT = 64
#: MariaDB's longest table comment.
_COMMENT_MAX = 2048


def ensure_register(cur: Any) -> None:
    """The register of the side tables the sink made (`_replace`), made on a first re-read."""
    cur.execute(
        f"CREATE TABLE IF NOT EXISTS {REGISTER} (side_schema VARCHAR(64) NOT NULL, side_name VARCHAR(64) NOT NULL, "
        "connector VARCHAR(255) NOT NULL, topic VARCHAR(255) NOT NULL, generation BIGINT NOT NULL, "
        "target_name VARCHAR(64) NOT NULL, PRIMARY KEY (side_schema, side_name)) "
        "ENGINE=InnoDB DEFAULT CHARSET=utf8mb4"
    )


def _split(cur: Any, table: tuple[str, ...]) -> tuple[str, str]:
    """The table's database (the connection's when unqualified) and name."""
    if len(table) == 2:
        return table[0], table[1]
    cur.execute("SELECT DATABASE()")
    return str(cur.fetchone()[0]), table[0]


def _comment(cur: Any, table: tuple[str, str]) -> tuple[bool, str | None]:
    """Whether the table exists, and its comment."""
    cur.execute(
        "SELECT table_comment FROM information_schema.tables WHERE table_schema = %s AND table_name = %s", table
    )
    found = cur.fetchone()
    return (found is not None, found[0] if found is not None else None)


def _drop_leftovers(cur: Any, quote: Any, connector: str, table: tuple[str, str], keep: str | None) -> None:
    """Drop the side tables the sink entered for the target but `keep`: older copies and old targets
    a kill -9 left (never a table it did not make)."""
    for side in claimed(cur, connector, *table):
        if side.name != keep:
            cur.execute(f"DROP TABLE IF EXISTS {quote((side.schema, side.name))}")
            release(cur, side)


def _refuse_foreign_keys(cur: Any, table: tuple[str, str]) -> None:
    schema, name = table
    cur.execute(
        "SELECT CONCAT(table_name, ' (', constraint_name, ')') FROM information_schema.referential_constraints "
        "WHERE (constraint_schema = %s AND table_name = %s) "
        "OR (unique_constraint_schema = %s AND referenced_table_name = %s) ORDER BY 1",
        (schema, name, schema, name),
    )
    keys = [r[0] for r in cur.fetchall()]
    cur.execute(
        "SELECT trigger_name FROM information_schema.triggers WHERE event_object_schema = %s "
        "AND event_object_table = %s ORDER BY 1",
        (schema, name),
    )
    triggers = [r[0] for r in cur.fetchall()]
    found = ([f"the foreign keys {', '.join(keys)}"] if keys else []) + (
        [f"the triggers {', '.join(triggers)}"] if triggers else []
    )
    if found:
        raise ConfigError(
            f"table {name} cannot be replaced by a re-read: a replace swaps a new table in under its name, and "
            f"{' and '.join(found)} would stay on the old one. Drop them (recreate them after the re-read), or "
            "re-read with `--mode retain`"
        )


def replica(
    cur: Any, quote: Any, connector: str, table: tuple[str, ...], topic: str, generation: int, auto_create: bool
) -> tuple[str, ...]:
    """Where the rows of re-read `generation` of `topic` go (as PostgreSQL's `replica`): the target
    when it holds that generation already, else the copy (entered in the register, then made like
    the target on first use)."""
    ensure_register(cur)
    where = _split(cur, table)
    exists, comment = _comment(cur, where)
    if exists and (held(comment, topic) or 0) >= generation:
        _drop_leftovers(cur, quote, connector, where, None)
        return table
    if not exists and not auto_create:
        raise ConfigError(f"table {quote(table)} does not exist: create it or set `auto.create`")
    if exists:
        _refuse_foreign_keys(cur, where)
    copy = (where[0], side_name(where[1], COPY, topic, generation, LIMIT))
    _drop_leftovers(cur, quote, connector, where, copy[1])
    made = _comment(cur, copy)[0]
    claim(cur, Side(*copy, connector, topic, generation, where[1]), made)
    if exists and not made:
        cur.execute(f"CREATE TABLE {quote(copy)} LIKE {quote(where)}")  # commits the entry first
    return copy


def swap_in(
    cur: Any, quote: Any, connector: str, table: tuple[str, ...] | None, topic: str, generation: int
) -> str | None:
    """Swap the copy of re-read `generation` of `topic` in for its target (the register's, else
    `table`'s, as PostgreSQL's `swap_in`): the target swapped, or None when there is nothing to do."""
    ensure_register(cur)
    entered = copy_of(cur, connector, topic, generation)
    where = (entered.schema, entered.target) if entered is not None else None
    if where is None and table is not None:
        where = _split(cur, table)
    if where is None:
        return None
    exists, comment = _comment(cur, where)
    if exists and (held(comment, topic) or 0) >= generation:
        _drop_leftovers(cur, quote, connector, where, None)
        return None
    copy = (where[0], side_name(where[1], COPY, topic, generation, LIMIT))
    side = Side(*copy, connector, topic, generation, where[1])
    if not _comment(cur, copy)[0]:
        if not exists:
            _drop_leftovers(cur, quote, connector, where, None)
            return None  # no rows were re-read into a table that never existed
        _refuse_foreign_keys(cur, where)
        claim(cur, side, False)
        cur.execute(f"CREATE TABLE {quote(copy)} LIKE {quote(where)}")  # a re-read of no rows: the target ends empty
    claim(cur, side, True)
    marked = mark(comment, topic, generation)
    if len(marked) > _COMMENT_MAX:  # a user's long comment gives way to the mark
        marked = mark(None, topic, generation)
    cur.execute(f"ALTER TABLE {quote(copy)} COMMENT = %s", (marked,))
    if exists:
        old = (where[0], side_name(where[1], OLD, topic, generation, LIMIT))
        old_side = Side(*old, connector, topic, generation, where[1])
        claim(cur, old_side, _comment(cur, old)[0])
        cur.execute(f"DROP TABLE IF EXISTS {quote(old)}")
        cur.execute(f"RENAME TABLE {quote(where)} TO {quote(old)}, {quote(copy)} TO {quote(where)}")
        cur.execute(f"DROP TABLE {quote(old)}")
        release(cur, old_side)
    else:
        cur.execute(f"RENAME TABLE {quote(copy)} TO {quote(where)}")
    release(cur, side)
    return f"{where[0]}.{where[1]}"
