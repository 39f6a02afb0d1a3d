"""A `replace` re-read into PostgreSQL: the copy `CREATE TABLE … (LIKE target INCLUDING ALL)` takes
the re-read's rows; at its end one transaction marks the copy with the generation (`COMMENT ON
TABLE`), gives it the target's grants, drops the target and renames the copy to the target's name.
PostgreSQL's DDL is transactional: a reader sees the old table or the new one, never half (its
query waits for the swap's lock, then reads the table the name now names).

What a rename cannot carry is refused before a row is written, naming it: views (and materialized
views) over the target and foreign keys of other tables referencing it would be left on the old
table, which the swap drops; its row-level security and policies, its publications (logical
replication of it would stop), its triggers, and partitioning or inheritance (a partitioned target
would become a plain table, its partitions dropped) would be lost. The copy gets the target's
columns, defaults, constraints, indexes and comments (`INCLUDING ALL`), its foreign keys, its table
grants and its owned sequences; not its column grants or owner (the copy's owner is the sink's
user, as for a table the sink creates). The side tables are entered in `_replace`'s register in
the transaction that makes them, and leave it in the one that drops or swaps them in.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from connect_core.connectors.jdbc.targets._replace import (
    COPY,
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

__all__ = ["LIMIT", "ensure_register", "has_key", "replica", "swap_in"]

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


def ensure_register(cur: Any) -> None:
    """The register of the side tables the sink made (`_replace`), made on a first re-read."""
    cur.execute(
        f"CREATE TABLE IF NOT EXISTS {REGISTER} (side_schema text, side_name text, connector text NOT NULL, "
        "topic text NOT NULL, generation bigint NOT NULL, target_name text NOT NULL, "
        "PRIMARY KEY (side_schema, side_name))"
    )


def _drop_leftovers(cur: Any, connector: str, where: _Where, keep: str | None) -> None:
    """Drop the side tables the sink entered for the target but `keep`: copies of older re-reads a
    kill -9 left (never a table it did not make)."""
    from psycopg2 import sql

    for side in claimed(cur, connector, where.schema, where.name):
        if side.name != keep:
            cur.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(sql.Identifier(side.schema, side.name)))
            release(cur, side)


def _refuse_dependents(cur: Any, where: _Where) -> None:
    """A ConfigError naming what a rename swap would leave on the old table, or lose: views and
    foreign keys over it, its row-level security, publications, triggers, partitions or inheritance."""
    if where.oid is None:
        return
    found = [f"{what} {', '.join(names)}" for what, query in _DEPENDENTS if (names := _names(cur, query, where.oid))]
    if found:
        raise ConfigError(
            f"table {where.schema}.{where.name} cannot be replaced by a re-read: a replace swaps a new table in "
            f"under its name, and {'; '.join(found)} would stay on the old one or be lost. Drop them (recreate "
            "them after the re-read), or re-read with `--mode retain`"
        )


def _names(cur: Any, query: str, oid: int) -> list[str]:
    cur.execute(query, {"oid": oid})
    return [str(r[0]) for r in cur.fetchall()]


#: What a swap cannot carry to the new table, and how to find it on the target (`%(oid)s`).
_DEPENDENTS = (
    (
        "views",
        "SELECT DISTINCT v.oid::regclass::text FROM pg_depend d JOIN pg_rewrite r ON r.oid = d.objid "
        "JOIN pg_class v ON v.oid = r.ev_class "
        "WHERE d.classid = 'pg_rewrite'::regclass AND d.refobjid = %(oid)s AND v.oid <> %(oid)s ORDER BY 1",
    ),
    (
        "foreign keys of",
        "SELECT conrelid::regclass::text || ' (' || conname || ')' FROM pg_constraint "
        "WHERE contype = 'f' AND confrelid = %(oid)s AND conrelid <> %(oid)s ORDER BY 1",
    ),
    (
        "row-level security (policies:",
        "SELECT coalesce(string_agg(p.polname, ', ' ORDER BY p.polname), 'none') || ')' FROM pg_class c "
        "LEFT JOIN pg_policy p ON p.polrelid = c.oid WHERE c.oid = %(oid)s "
        "GROUP BY c.relrowsecurity HAVING c.relrowsecurity OR count(p.polname) > 0",
    ),
    (
        "publications",
        "SELECT p.pubname FROM pg_publication_rel r JOIN pg_publication p ON p.oid = r.prpubid "
        "WHERE r.prrelid = %(oid)s ORDER BY 1",
    ),
    ("triggers", "SELECT tgname FROM pg_trigger WHERE tgrelid = %(oid)s AND NOT tgisinternal ORDER BY 1"),
    (
        "partitions",
        "SELECT inhrelid::regclass::text FROM pg_inherits WHERE inhparent = %(oid)s "
        "UNION ALL SELECT '(partitioned, none yet)' FROM pg_class WHERE oid = %(oid)s AND relkind = 'p' "
        "AND NOT EXISTS (SELECT 1 FROM pg_inherits WHERE inhparent = %(oid)s) ORDER BY 1",
    ),
    (
        "the parent table",
        "SELECT inhparent::regclass::text FROM pg_inherits WHERE inhrelid = %(oid)s ORDER BY 1",
    ),
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


def replica(
    cur: Any, connector: str, table: tuple[str, ...], topic: str, generation: int, auto_create: bool
) -> tuple[str, ...]:
    """Where the rows of re-read `generation` of `topic` go: the target itself when it already holds
    that generation (the batch is given again after the swap), else the copy, entered in the
    register and made on first use like the target (left for the sink's write to create when there
    is no target yet); the copies of older re-reads a kill left are dropped."""
    ensure_register(cur)
    where = _where(cur, table)
    if where.oid is not None and (held(_comment(cur, where.oid), topic) or 0) >= generation:
        _drop_leftovers(cur, connector, where, None)
        return table
    if where.oid is None and not auto_create:
        raise ConfigError(f"table {where.schema}.{where.name} does not exist: create it or set `auto.create`")
    _refuse_dependents(cur, where)
    copy = side_name(where.name, COPY, topic, generation, LIMIT)
    _drop_leftovers(cur, connector, where, copy)
    exists = _exists(cur, where.schema, copy)
    claim(cur, Side(where.schema, copy, connector, topic, generation, where.name), exists)
    if where.oid is not None and not exists:
        _create_copy(cur, where, copy)
    return (where.schema, copy)


def swap_in(cur: Any, connector: str, table: tuple[str, ...] | None, topic: str, generation: int) -> str | None:
    """Swap the copy of re-read `generation` of `topic` in for its target, in the caller's one
    transaction: the copy the register names (its target too), else, for `table` (None: not known),
    an empty one, when the re-read had no rows at all. The target swapped (`schema.name`), or None
    when there is nothing to swap (the target holds it already, neither table exists, or there is
    no copy and `table` is not known)."""
    from psycopg2 import sql

    ensure_register(cur)
    entered = copy_of(cur, connector, topic, generation)
    if entered is not None:
        table = (entered.schema, entered.target)
    if table is None:
        return None
    where = _where(cur, table)
    comment = _comment(cur, where.oid)
    if where.oid is not None and (held(comment, topic) or 0) >= generation:
        _drop_leftovers(cur, connector, where, None)
        return None
    copy = side_name(where.name, COPY, topic, generation, LIMIT)
    side = Side(where.schema, copy, connector, topic, generation, where.name)
    if not _exists(cur, where.schema, copy):
        if where.oid is None:
            _drop_leftovers(cur, connector, where, None)
            return None  # no rows were re-read into a table that never existed
        _refuse_dependents(cur, where)
        claim(cur, side, False)
        _create_copy(cur, where, copy)  # a re-read of no rows: the target ends empty
    claim(cur, side, True)
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
    release(cur, side)
    _rename_indexes(cur, where, copy)
    _drop_leftovers(cur, connector, where, None)
    return f"{where.schema}.{where.name}"


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


def has_key(cur: Any, table: tuple[str, ...]) -> bool | None:
    """Whether the table has a primary key or a unique index (None: no such table)."""
    where = _where(cur, table)
    if where.oid is None:
        return None
    cur.execute("SELECT EXISTS (SELECT 1 FROM pg_index WHERE indrelid = %s AND indisunique)", (where.oid,))
    return bool(cur.fetchone()[0])
