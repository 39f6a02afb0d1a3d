"""A topic's schema: the shape of the records a run committed to it, as its schema history keeps it.

The schema is computed in the driver from the Spark schema of what a run stages (a DataFrame's or
an `ArrowRecords`' `StructType`: no Spark job), as one canonical JSON document:

    {"columns": [{"name": "id", "type": "bigint", "nullable": false}, ...], "key": ["id"]}

* `columns`: the value columns (`sdk.transforms.is_value_column`: not `__key`, `__headers` …) in
  their order, each with Spark's `simpleString` of its type (`decimal(12,2)`, `timestamp`,
  `struct<a:int>` …) and whether it may be null. A struct, array or map column also has `nested`:
  Spark's JSON of its type (field metadata left out), which keeps what `simpleString` does not say:
  the nested fields' nullability and names of any spelling.
* `key`: the names of the key struct's fields (`__key`), or [] when the records have no key; a
  key that is not a struct (`ExtractField$Key` made one) is `key: []` with `key_type`.

The fingerprint is the sha256 of the document's compact JSON with sorted keys: two runs whose
records have the same shape have the same fingerprint, whatever order their batches came in.

Limits, so that recording a shape never fails a run whose data Spark wrote: a name's characters
that Postgres cannot store (NUL, an unpaired surrogate) are kept as U+FFFD, and a shape nested
deeper than `MAX_NESTING` levels is not a schema (`TooDeeplyNestedError`): every walk of the
document (the fingerprint, Avro, Postgres' JSON) stays far from Python's recursion limit.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from connect_core.runtime.security.limits import one_line
from connect_core.sdk.transforms import KEY_COLUMN, is_value_column

if TYPE_CHECKING:
    from pyspark.sql.types import DataType, StructType

__all__ = ["MAX_NESTING", "SchemaDiff", "TooDeeplyNestedError", "TopicSchema", "diff_schemas"]

_COMPLEX = frozenset({"struct", "array", "map"})
#: Levels of struct, array and map a column's type may have in a recorded schema. Spark's own schema
#: parsing gives up near 240; each level costs the recursive walks here (metadata, Avro, JSON) 2-4
#: frames, so 64 keeps every one of them under a few hundred.
MAX_NESTING = 64
#: What Postgres' JSON cannot hold: NUL, and a surrogate not paired (neither is UTF-8).
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


class TooDeeplyNestedError(ValueError):
    """A column's type is nested deeper than `MAX_NESTING` levels: its shape is not recorded."""


@dataclass(frozen=True)
class TopicSchema:
    """One shape of a topic's records: its canonical JSON document and that document's fingerprint."""

    document: Mapping[str, Any]
    fingerprint: str

    @classmethod
    def of(cls, struct: StructType) -> TopicSchema:
        """The schema of records whose Spark schema is `struct` (a staged segment's, record columns included).
        TooDeeplyNestedError when a column's type nests deeper than `MAX_NESTING` levels."""
        for f in struct.fields:
            _check_nesting(f.name, f.dataType)
        columns = [_column(f.name, f.dataType, f.nullable) for f in struct.fields if is_value_column(f.name)]
        document: dict[str, Any] = {"columns": columns, "key": []}
        key = next((f.dataType for f in struct.fields if f.name == KEY_COLUMN), None)
        if key is not None and key.typeName() == "struct":
            document["key"] = [f.name for f in key.fields]  # type: ignore[attr-defined]
        elif key is not None and key.typeName() not in ("void", "null"):
            document["key_type"] = key.simpleString()
        return cls.from_document(_storable(document))

    @classmethod
    def from_document(cls, document: Mapping[str, Any]) -> TopicSchema:
        return cls(document, fingerprint(document))

    @property
    def columns(self) -> list[dict[str, Any]]:
        return list(self.document.get("columns", []))

    @property
    def key(self) -> list[str]:
        return list(self.document.get("key", []))

    def envelope_rows(self) -> TopicSchema | None:
        """For change events in Debezium's envelope (`before` and `after` structs, `op`): the schema
        of the rows they carry, `after`'s fields as columns, with the events' key; None for other
        records. A table's column added or retyped shows here as a column, not as a new `after` type."""
        columns = {c["name"]: c for c in self.columns}
        after = columns.get("after")
        if after is None or "before" not in columns or "op" not in columns or "nested" not in after:
            return None
        from pyspark.sql.types import _parse_datatype_json_value

        rows = [
            _column(f["name"], _parse_datatype_json_value(f["type"]), f.get("nullable", True))
            for f in after["nested"].get("fields", [])
        ]
        document = {**{k: v for k, v in self.document.items() if k in ("key", "key_type")}, "columns": rows}
        return TopicSchema.from_document(document)


def fingerprint(document: Mapping[str, Any]) -> str:
    """sha256 (hex) of `document` as compact JSON with sorted keys."""
    text = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def _check_nesting(column: str, kind: DataType) -> None:
    """TooDeeplyNestedError if `kind` has more than `MAX_NESTING` levels of struct, array and map
    (walked with a stack: a type of any depth is measured)."""
    stack = [(kind, 0)]
    while stack:
        current, depth = stack.pop()
        name = current.typeName()
        if name not in _COMPLEX:
            continue
        if depth >= MAX_NESTING:
            shown = one_line(column if len(column) <= 80 else column[:80] + "…")  # it goes to the log
            raise TooDeeplyNestedError(
                f"column `{shown}` nests structs, arrays and maps deeper than {MAX_NESTING} levels"
            )
        if name == "struct":
            stack.extend((f.dataType, depth + 1) for f in current.fields)  # type: ignore[attr-defined]
        elif name == "array":
            stack.append((current.elementType, depth + 1))  # type: ignore[attr-defined]
        else:
            stack += [(current.keyType, depth + 1), (current.valueType, depth + 1)]  # type: ignore[attr-defined]


def _storable(value: Any) -> Any:
    """`value` with each string's NUL and unpaired surrogates as U+FFFD: Postgres' JSON (and UTF-8)
    cannot hold them, and a commit must not fail on a column's name."""
    if isinstance(value, str):
        return _UNSTORABLE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {_storable(k): _storable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_storable(v) for v in value]
    return value


def _column(name: str, kind: DataType, nullable: bool) -> dict[str, Any]:
    column: dict[str, Any] = {"name": name, "type": kind.simpleString(), "nullable": bool(nullable)}
    if kind.typeName() in _COMPLEX:
        column["nested"] = _without_metadata(kind.jsonValue())
    return column


def _without_metadata(value: Any) -> Any:
    """Spark's JSON of a type without the fields' `metadata` (comments, a JDBC column's original type):
    two runs of one shape must fingerprint alike."""
    if isinstance(value, dict):
        return {k: _without_metadata(v) for k, v in value.items() if k != "metadata"}
    if isinstance(value, list):
        return [_without_metadata(v) for v in value]
    return value


@dataclass(frozen=True)
class SchemaDiff:
    """What changed from one version of a topic's schema to another, column by column."""

    added: list[dict[str, Any]]
    dropped: list[dict[str, Any]]
    #: {"name", "from", "to"}: the column's type (simpleString) changed
    retyped: list[dict[str, Any]]
    #: {"name", "from", "to"}: whether the column may be null changed
    nullability: list[dict[str, Any]]
    #: columns of one type whose nested fields changed in what `simpleString` does not show (nullability)
    nested: list[str]
    #: {"from": [...], "to": [...]} when the key columns (or the key's type) changed, else None
    key: dict[str, Any] | None

    @property
    def empty(self) -> bool:
        return not (self.added or self.dropped or self.retyped or self.nullability or self.nested or self.key)

    def to_dict(self) -> dict[str, Any]:
        return {
            "added": self.added,
            "dropped": self.dropped,
            "retyped": self.retyped,
            "nullability": self.nullability,
            "nested": self.nested,
            "key": self.key,
        }


def diff_schemas(old: Mapping[str, Any], new: Mapping[str, Any]) -> SchemaDiff:
    """The changes from document `old` to document `new` (columns matched by name)."""
    before = {c["name"]: c for c in old.get("columns", [])}
    after = {c["name"]: c for c in new.get("columns", [])}
    retyped, nullability, nested = [], [], []
    for name, column in after.items():
        was = before.get(name)
        if was is None:
            continue
        if was["type"] != column["type"]:
            retyped.append({"name": name, "from": was["type"], "to": column["type"]})
        elif was.get("nested") != column.get("nested"):
            nested.append(name)
        if bool(was["nullable"]) != bool(column["nullable"]):
            nullability.append({"name": name, "from": bool(was["nullable"]), "to": bool(column["nullable"])})
    key_before = (list(old.get("key", [])), old.get("key_type"))
    key_after = (list(new.get("key", [])), new.get("key_type"))
    key = None
    if key_before != key_after:
        key = {"from": key_before[1] or key_before[0], "to": key_after[1] or key_after[0]}
    return SchemaDiff(
        added=[c for n, c in after.items() if n not in before],
        dropped=[c for n, c in before.items() if n not in after],
        retyped=retyped,
        nullability=nullability,
        nested=nested,
        key=key,
    )
