"""Debezium's signals, as a connector gets them (`TaskContext.signals`) and as the runtime checks
them before queueing one (`POST /connectors/{name}/signals`): the types, and the shape of their data.

An `execute-snapshot` may carry Debezium's options: `surrogate-key` (a column to read the tables in
chunks by instead of their primary key) and `additional-conditions` (`[{"data-collection":
"schema.table", "filter": "<SQL condition>"}]`: only the rows matching it are read). Their shape is
checked here; whether a table has that column, and whether the filter is a plain predicate over
its columns, is the connector's to check (`SourceConnector.check_signal`), and a connector that
takes neither refuses them (`SourceConnector.signal_options`)."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

__all__ = ["MAX_FILTER", "PROGRESS_KEY", "SIGNAL_OPTIONS", "SIGNAL_TYPES", "signal_problems"]

#: Where a source that acts on signals keeps its incremental snapshot's progress in its committed
#: position (the runtime reads it there for `/metrics` and the Connect view).
PROGRESS_KEY = "incremental"

SIGNAL_TYPES = ("execute-snapshot", "stop-snapshot", "pause-snapshot", "resume-snapshot")
#: The options of an `execute-snapshot` beyond its tables (Debezium's names).
SIGNAL_OPTIONS = ("additional-conditions", "surrogate-key")
#: The longest `additional-conditions` filter (Debezium's signal table keeps the data in a varchar(2048)).
MAX_FILTER = 2000
#: Where a problem of the signal's data is reported (`data.data-collections`): not a config key.
_IN_DATA = "data."
#: Tables one signal may name, and the characters of a name.
_MAX_COLLECTIONS, _MAX_NAME = 100, 300


def signal_problems(signal_type: Any, data: Any, options: Collection[str] = SIGNAL_OPTIONS) -> dict[str, list[str]]:
    """Every problem of a signal's `type` and `data`, by the key at fault (empty: fine). `options`:
    the `execute-snapshot` options (of `SIGNAL_OPTIONS`) the connector acts on; the others are refused."""
    problems: dict[str, list[str]] = {}
    if signal_type not in SIGNAL_TYPES:
        problems["type"] = [f"must be one of {', '.join(SIGNAL_TYPES)}"]
    if not isinstance(data, Mapping):
        problems["data"] = ["must be an object (Debezium's signal data)"]
        return problems
    meta: Mapping[str, Any] = data  # a signal's data, not a connector's config
    collections = meta.get("data-collections")
    if collections is not None and (
        not isinstance(collections, list)
        or len(collections) > _MAX_COLLECTIONS
        or any(not isinstance(c, str) or not 0 < len(c) <= _MAX_NAME or not c.isprintable() for c in collections)
    ):
        _add(problems, _IN_DATA + "data-collections", f"must be a list of at most {_MAX_COLLECTIONS} table names")
    if signal_type == "execute-snapshot":
        if not collections:
            _add(problems, _IN_DATA + "data-collections", "name the tables to snapshot (`schema.table`)")
        if str(meta.get("type", "incremental")).lower() != "incremental":
            problems["data.type"] = ["must be `incremental` (blocking snapshots are not run)"]
        for key in SIGNAL_OPTIONS:
            if meta.get(key) and key not in options:
                problems[_IN_DATA + key] = [
                    "not supported by this connector: it reads whole tables by their primary key"
                ]
        if "surrogate-key" in options and meta.get("surrogate-key") is not None:
            surrogate = meta["surrogate-key"]
            if not isinstance(surrogate, str) or not 0 < len(surrogate) <= _MAX_NAME or not surrogate.isprintable():
                _add(problems, _IN_DATA + "surrogate-key", "must be the name of one column of the tables")
        if "additional-conditions" in options and meta.get("additional-conditions") is not None:
            for problem in _conditions_problems(meta["additional-conditions"], collections):
                _add(problems, _IN_DATA + "additional-conditions", problem)
    return problems


def _conditions_problems(conditions: Any, collections: Any) -> list[str]:
    """What is wrong with the shape of `additional-conditions` (Debezium 2.x: a list of
    `{"data-collection": "schema.table", "filter": "<SQL condition>"}`, one per table)."""
    shape = 'must be a list of {"data-collection": "schema.table", "filter": "<SQL condition>"}'
    if not isinstance(conditions, list) or len(conditions) > _MAX_COLLECTIONS:
        return [shape + f" (at most {_MAX_COLLECTIONS})"]
    problems, seen = [], set()
    named = set(collections) if isinstance(collections, list) else set()
    for i, condition in enumerate(conditions):
        if not isinstance(condition, Mapping) or set(condition) != {"data-collection", "filter"}:
            problems.append(f"[{i}] {shape}")
            continue
        table, text = condition["data-collection"], condition["filter"]
        if not isinstance(table, str) or not 0 < len(table) <= _MAX_NAME or not table.isprintable():
            problems.append(f"[{i}] `data-collection` must be a table name")
        elif table not in named:
            problems.append(f"[{i}] `{table}` is not one of `data-collections`")
        elif table in seen:
            problems.append(f"[{i}] `{table}` has a filter already: one per table (AND the conditions)")
        seen.add(table)
        if not isinstance(text, str) or not text.strip():
            problems.append(f"[{i}] `filter` must be an SQL condition over the table's columns")
        elif len(text) > MAX_FILTER:
            problems.append(f"[{i}] `filter` is {len(text)} characters long: at most {MAX_FILTER}")
    return problems
    return problems


def _add(problems: dict[str, list[str]], key: str, problem: str) -> None:
    problems.setdefault(key, []).append(problem)
