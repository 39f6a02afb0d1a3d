"""Debezium's signals, as a connector gets them (`TaskContext.signals`) and as the runtime checks
them before queueing one (`POST /connectors/{name}/signals`): the types, and the shape of their data."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["PROGRESS_KEY", "SIGNAL_TYPES", "signal_problems"]

#: Where a source that acts on signals keeps its incremental snapshot's progress in its committed
#: position (the runtime reads it there for `/metrics` and the Connect view).
PROGRESS_KEY = "incremental"

SIGNAL_TYPES = ("execute-snapshot", "stop-snapshot", "pause-snapshot", "resume-snapshot")
#: Where a problem of the signal's data is reported (`data.data-collections`): not a config key.
_IN_DATA = "data."
#: Tables one signal may name, and the characters of a name.
_MAX_COLLECTIONS, _MAX_NAME = 100, 300


def signal_problems(signal_type: Any, data: Any) -> dict[str, list[str]]:
    """Every problem of a signal's `type` and `data`, by the key at fault (empty: fine)."""
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
        for key in ("additional-conditions", "surrogate-key"):
            if meta.get(key):
                problems[f"data.{key}"] = ["not supported yet: the snapshot reads the whole table by its primary key"]
    return problems


def _add(problems: dict[str, list[str]], key: str, problem: str) -> None:
    problems.setdefault(key, []).append(problem)
