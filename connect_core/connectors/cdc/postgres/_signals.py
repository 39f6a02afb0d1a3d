"""What an `execute-snapshot` signal asks of the PostgreSQL source's tables, checked against the
server: where the signal is sent (`check_signal`: a 400 naming every table it cannot act on) and
again where a run acts on it (a signal of the `source` channel is checked only there; the tables
may have changed since). One check, so the two never disagree.

A table can be read in chunks when it is captured and has an order to read it in: its primary key,
or a `surrogate-key`, one column that a unique index covers alone and that is NOT NULL (a NULL
sorts apart from every value a chunk compares with: such rows would be skipped). A table without a
primary key must also be `REPLICA IDENTITY FULL`: PostgreSQL refuses its updates and deletes
otherwise, and only then do its streamed changes carry the surrogate key's old value, which is
what tells a chunk row that a newer change touched it. A filter (`additional-conditions`) must be a
plain predicate over the table's columns (`_filter`) that the server can plan.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from connect_core.connectors.cdc.config import PostgresCdcConfig
from connect_core.connectors.cdc.postgres import _server
from connect_core.connectors.cdc.postgres._filter import RefusedFilter, checked_filter
from connect_core.sdk.errors import ConfigError

__all__ = ["Refused", "signal_problems", "snapshot_options"]

_TABLES, _SURROGATE, _CONDITIONS = "data.data-collections", "data.surrogate-key", "data.additional-conditions"


class Refused(ValueError):
    """A table the signal cannot be acted on for; `key`: the signal's data key at fault."""

    def __init__(self, message: str, key: str = _TABLES) -> None:
        super().__init__(message)
        self.key = key


def snapshot_options(
    conn: Any, cfg: PostgresCdcConfig, tables: Mapping[str, _server.Table], name: str, data: Mapping[str, Any]
) -> dict[str, Any]:
    """What an incremental snapshot of table `name` (as the signal names it) reads it with: its
    `surrogate-key` and its checked `filter`, when asked for. `tables`: the captured ones (the
    signal table left out). Refused (a ValueError) says why the table cannot be read so."""
    table = tables.get(name)
    if table is None:
        schema, _, relation = name.partition(".")
        if name == cfg.signal_data_collection:
            raise Refused("is the signal table: its rows are signals, not data")
        if relation and _server.relation_exists(conn, schema, relation):
            raise Refused("is not captured: it matches no `table.include.list` pattern, or a `table.exclude.list` one")
        raise Refused("does not exist (name it `schema.table`)")
    facts = _server.key_facts(conn, table.schema, table.name)
    if facts is None:
        raise Refused("does not exist any more")
    options: dict[str, Any] = {}
    surrogate = data.get("surrogate-key")
    if surrogate:
        _check_surrogate(table, facts, str(surrogate))
        options["surrogate-key"] = str(surrogate)
    elif not table.key:
        raise Refused(
            "has no primary key to read it in chunks by: name a `surrogate-key` (a NOT NULL column with a "
            "unique index over it alone)"
        )
    text = _filter_of(data, name)
    if text is not None:
        try:
            rendered = checked_filter(text, *filter_columns(cfg, table))
        except RefusedFilter as exc:
            raise Refused(f"filter {exc}", _CONDITIONS) from None
        _plan(conn, table, rendered)
        options["filter"] = rendered
    return options


def signal_problems(conn: Any, cfg: PostgresCdcConfig, data: Mapping[str, Any]) -> dict[str, list[str]]:
    """Every table of an `execute-snapshot`'s `data-collections` the source cannot act on, and why, by
    the signal's data key at fault (empty: it can act on all)."""
    try:
        captured = _server.captured_tables(conn, cfg)
    except ConfigError:  # no table captured (yet), or two going to one topic: none can be read
        captured = []
    tables = {t.qualified: t for t in captured if t.qualified != cfg.signal_data_collection}
    problems: dict[str, list[str]] = {}
    for name in data.get("data-collections") or []:
        try:
            snapshot_options(conn, cfg, tables, str(name), data)
        except Refused as exc:
            problems.setdefault(exc.key, []).append(f"`{name}` {exc}")
    return problems


def filter_columns(cfg: PostgresCdcConfig, table: _server.Table) -> tuple[list[str], list[str]]:
    """The columns a filter of `table` may name, and those it may not: the masked ones (a filter on a
    masked column would tell its values, a row at a time)."""
    names = [c.name for c in table.columns]
    return names, cfg.column_masks().masked([table.qualified, table.name], names)


def _check_surrogate(table: _server.Table, facts: _server.KeyFacts, column: str) -> None:
    if column not in {c.name for c in table.columns}:
        raise Refused(f"has no column `{column}` (the `surrogate-key`)", _SURROGATE)
    if column not in facts.unique:
        raise Refused(
            f"has no unique index over `{column}` alone: chunks are read in the order of unique values "
            f"(CREATE UNIQUE INDEX ON {_quoted(table)} ({_server.quote(column)}))",
            _SURROGATE,
        )
    if not facts.unique[column]:
        raise Refused(
            f"`{column}` may hold NULLs, which no chunk's key order reaches: make it NOT NULL "
            f"(ALTER TABLE {_quoted(table)} ALTER COLUMN {_server.quote(column)} SET NOT NULL)",
            _SURROGATE,
        )
    if not table.key and facts.replica_identity != "f":
        raise Refused(
            "has no primary key and is not REPLICA IDENTITY FULL: its updates and deletes do not carry the "
            f"`surrogate-key`'s old value (ALTER TABLE {_quoted(table)} REPLICA IDENTITY FULL)",
            _SURROGATE,
        )


def _filter_of(data: Mapping[str, Any], name: str) -> str | None:
    for condition in data.get("additional-conditions") or []:
        if isinstance(condition, Mapping) and condition.get("data-collection") == name:
            return str(condition.get("filter"))
    return None


def _plan(conn: Any, table: _server.Table, condition: str) -> None:
    """The server plans a read with `condition` (a literal its column's type cannot take, a type
    mismatch fail here, not in every run after): planned only, never run."""
    import psycopg2

    try:
        with conn.cursor() as cur:
            cur.execute(f"EXPLAIN SELECT 1 FROM {_quoted(table)} WHERE {condition}")  # no params: `%` as is
    except psycopg2.Error as exc:
        message = (exc.pgerror or str(exc)).strip().splitlines()[0]
        raise Refused(f"filter does not run on the server: {message}", _CONDITIONS) from None


def _quoted(table: _server.Table) -> str:
    return f"{_server.quote(table.schema)}.{_server.quote(table.name)}"
