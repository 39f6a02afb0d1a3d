"""A `replace` re-read into PostgreSQL: the copy `CREATE TABLE … (LIKE target INCLUDING ALL)` takes
the re-read's rows; at its end one transaction marks the copy with the generation (`COMMENT ON
TABLE`), gives it the target's grants, drops the target and renames the copy to the target's name.
PostgreSQL's DDL is transactional: a reader sees the old table or the new one, never half (its
query waits for the swap's lock, then reads the table the name now names).

What a rename cannot carry is refused before a row is written, naming it: views (and materialized
views) over the target and foreign keys of other tables referencing it would be left on the old
table, which the swap drops. The copy gets the target's columns, defaults, constraints, indexes
and comments (`INCLUDING ALL`), its foreign keys, its table grants and its owned sequences; not its
triggers, row-level security policies, column grants or owner (the copy's owner is the sink's user,
as for a table the sink creates).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from connect_core.connectors.jdbc.targets._replace import COPY, base, held, is_side, mark, side_name
from connect_core.sdk.errors import ConfigError

__all__ = ["LIMIT", "replica", "swap_in"]

#: PostgreSQL's longest name (NAMEDATALEN - 1; the names here are ASCII).
LIMIT = 63
#: The privileges a table grant may name (`aclexplode`'s words), allow-listed before they become SQL.
_PRIVILEGES = frozenset({"SELECT", "INSERT", "UPDATE", "DELETE", "TRUNCATE", "REFERENCES", "TRIGGER", "MAINTAIN"})


class _Where(NamedTuple):
    schema: str
    name: str
    oid: int | None  # None: no such table


def _where(cur: Any, table: tuple[str, ...]) -> _Where:
    """The target's schema (its own, or the current one when it is unqualified and missing)."""
    from psycopg2 import sql

    cur.execute(
        "SELECT n.nspname, c.oid FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE c.oid = to_regclass(%s)",
        (sql.Identifier(*table).as_string(cur),),
    )
    found = cur.fetchone()
    if found is not None:
        return _Where(found[0], table[-1], found[1])
    if len(table) == 2:
        return _Where(table[0], table[1], None)
    cur.execute("SELECT current_schema()")
    return _Where(cur.fetchone()[0], table[0], None)


def _exists(cur: Any, schema: str, name: str) -> bool:
    from psycopg2 import sql

    cur.execute("SELECT to_regclass(%s) IS NOT NULL", (sql.Identifier(schema, name).as_string(cur),))
    return bool(cur.fetchone()[0])


def _comment(cur: Any, oid: int | None) -> str | None:
    if oid is None:
        return None
    cur.execute("SELECT obj_description(%s, 'pg_class')", (oid,))
    return cur.fetchone()[0]


def _drop_leftovers(cur: Any, where: _Where, keep: str | None) -> None:
    """Drop the side tables of the target but `keep`: copies of older re-reads a kill -9 left."""
    from psycopg2 import sql

    cur.execute(
        "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = %s AND c.relkind IN ('r', 'p') AND left(c.relname, %s) = %s",
        (where.schema, len(base(where.name, LIMIT)), base(where.name, LIMIT)),
    )
    for (name,) in cur.fetchall():
        if name != keep and is_side(where.name, name, LIMIT):
            cur.execute(sql.SQL("DROP TABLE {}").format(sql.Identifier(where.schema, name)))


def _refuse_dependents(cur: Any, where: _Where) -> None:
    """A ConfigError naming the views and foreign keys a rename swap would leave on the old table."""
    if where.oid is None:
        return
    cur.execute(
        "SELECT DISTINCT v.oid::regclass::text FROM pg_depend d JOIN pg_rewrite r ON r.oid = d.objid "
        "JOIN pg_class v ON v.oid = r.ev_class "
        "WHERE d.classid = 'pg_rewrite'::regclass AND d.refobjid = %s AND v.oid <> %s ORDER BY 1",
        (where.oid, where.oid),
    )
    views = [r[0] for r in cur.fetchall()]
    cur.execute(
        "SELECT conrelid::regclass::text || ' (' || conname || ')' FROM pg_constraint "
        "WHERE contype = 'f' AND confrelid = %s AND conrelid <> %s ORDER BY 1",
        (where.oid, where.oid),
    )
    keys = [r[0] for r in cur.fetchall()]
    if views or keys:
        parts = ([f"views {', '.join(views)}"] if views else []) + (
            [f"foreign keys of {', '.join(keys)}"] if keys else []
        )
        found = "; ".join(parts)
        raise ConfigError(
            f"table {where.schema}.{where.name} cannot be replaced by a re-read: a replace swaps a new table in "
            f"under its name, and {found} would stay on the old one. Drop them (recreate them after the re-read), "
            "or re-read with `--mode retain`"
        )


def _create_copy(cur: Any, where: _Where, copy: str) -> None:
    """The copy, made empty like the target: columns, defaults, constraints, indexes, comments, and
    the foreign keys `LIKE` does not copy."""
    from psycopg2 import sql

    target, made = sql.Identifier(where.schema, where.name), sql.Identifier(where.schema, copy)
    cur.execute(sql.SQL("CREATE TABLE {} (LIKE {} INCLUDING ALL)").format(made, target))
    cur.execute(
        "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid = %s AND contype = 'f'",
        (where.oid,),
    )
    for name, definition in cur.fetchall():
        # the definition is PostgreSQL's own text of the constraint (its names quoted by it)
        cur.execute(
            sql.SQL("ALTER TABLE {} ADD CONSTRAINT {} ").format(made, sql.Identifier(name)) + sql.SQL(definition)
        )


def replica(cur: Any, table: tuple[str, ...], topic: str, generation: int, auto_create: bool) -> tuple[str, ...]:
    """Where the rows of re-read `generation` of `topic` go: the target itself when it already holds
    that generation (the batch is given again after the swap), else the copy, made on first use
    like the target (left for the sink's write to create when there is no target yet); the copies
    of older re-reads a kill left are dropped."""
    where = _where(cur, table)
    if where.oid is not None and (held(_comment(cur, where.oid), topic) or 0) >= generation:
        _drop_leftovers(cur, where, None)
        return table
    if where.oid is None and not auto_create:
        raise ConfigError(f"table {where.schema}.{where.name} does not exist: create it or set `auto.create`")
    _refuse_dependents(cur, where)
    copy = side_name(where.name, COPY, generation, LIMIT)
    _drop_leftovers(cur, where, copy)
    if where.oid is not None and not _exists(cur, where.schema, copy):
        _create_copy(cur, where, copy)
    return (where.schema, copy)


def swap_in(cur: Any, table: tuple[str, ...], topic: str, generation: int) -> bool:
    """Swap the copy of re-read `generation` in for the target, in the caller's one transaction;
    False when there is nothing to swap (the target holds it already, or neither table exists)."""
    from psycopg2 import sql

    where = _where(cur, table)
    comment = _comment(cur, where.oid)
    if where.oid is not None and (held(comment, topic) or 0) >= generation:
        _drop_leftovers(cur, where, None)
        return False
    copy = side_name(where.name, COPY, generation, LIMIT)
    if not _exists(cur, where.schema, copy):
        if where.oid is None:
            return False  # no rows were re-read into a table that never existed
        _refuse_dependents(cur, where)
        _create_copy(cur, where, copy)  # a re-read of no rows: the target ends empty
    target, made = sql.Identifier(where.schema, where.name), sql.Identifier(where.schema, copy)
    if where.oid is not None:
        cur.execute(sql.SQL("LOCK TABLE {} IN ACCESS EXCLUSIVE MODE").format(target))
        _refuse_dependents(cur, where)
        _copy_grants(cur, where.oid, made)
        _move_owned_sequences(cur, where.oid, made)
    cur.execute(sql.SQL("COMMENT ON TABLE {} IS %s").format(made), (mark(comment, topic, generation),))
    if where.oid is not None:
        cur.execute(sql.SQL("DROP TABLE {}").format(target))
    cur.execute(sql.SQL("ALTER TABLE {} RENAME TO {}").format(made, sql.Identifier(where.name)))
    _rename_indexes(cur, where, copy)
    _drop_leftovers(cur, where, None)
    return True


def _copy_grants(cur: Any, oid: int, made: Any) -> None:
    """The target's table grants, given on the copy (its owner's own are the copy owner's already)."""
    from psycopg2 import sql

    cur.execute(
        "SELECT CASE WHEN a.grantee = 0 THEN NULL ELSE r.rolname END, a.privilege_type, a.is_grantable "
        "FROM pg_class c, aclexplode(c.relacl) a LEFT JOIN pg_roles r ON r.oid = a.grantee "
        "WHERE c.oid = %s AND a.grantee <> c.relowner",
        (oid,),
    )
    for role, privilege, grantable in cur.fetchall():
        if privilege not in _PRIVILEGES:
            continue
        cur.execute(
            sql.SQL("GRANT {} ON {} TO {}{}").format(
                sql.SQL(privilege),
                made,
                sql.SQL("PUBLIC") if role is None else sql.Identifier(role),
                sql.SQL(" WITH GRANT OPTION" if grantable else ""),
            )
        )


def _move_owned_sequences(cur: Any, oid: int, made: Any) -> None:
    """Sequences owned by the target's columns (`serial`, identity is the copy's own) become the
    copy's: dropping the target would drop them under the copy's defaults."""
    from psycopg2 import sql

    cur.execute(
        "SELECT n.nspname, s.relname, a.attname FROM pg_depend d "
        "JOIN pg_class s ON s.oid = d.objid AND s.relkind = 'S' JOIN pg_namespace n ON n.oid = s.relnamespace "
        "JOIN pg_attribute a ON a.attrelid = d.refobjid AND a.attnum = d.refobjsubid "
        "WHERE d.classid = 'pg_class'::regclass AND d.refobjid = %s AND d.deptype = 'a'",
        (oid,),
    )
    for schema, sequence, column in cur.fetchall():
        cur.execute(
            sql.SQL("ALTER SEQUENCE {} OWNED BY {}.{}").format(
                sql.Identifier(schema, sequence), made, sql.Identifier(column)
            )
        )


def _rename_indexes(cur: Any, where: _Where, copy: str) -> None:
    """The swapped-in table's indexes (and their constraints) named after the table, as the target's
    were: `LIKE` named them after the copy."""
    from psycopg2 import sql

    cur.execute(
        "SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE i.indrelid = to_regclass(%s)",
        (sql.Identifier(where.schema, where.name).as_string(cur),),
    )
    for (index,) in cur.fetchall():
        wanted = where.name + index[len(copy) :]
        if index.startswith(copy) and len(wanted) <= LIMIT and not _exists(cur, where.schema, wanted):
            cur.execute(
                sql.SQL("ALTER INDEX {} RENAME TO {}").format(
                    sql.Identifier(where.schema, index), sql.Identifier(wanted)
                )
            )
