"""A topic schema as Avro, the shape Confluent Schema Registry's clients read (`GET /subjects/…`).

A record named after the topic (namespace `connect`), its value columns as fields in order:

| Spark type | Avro |
|---|---|
| boolean, int, bigint, float, double, string, binary | boolean, int, long, float, double, string, bytes |
| tinyint, smallint | int with `connect.type` int8 / int16 (as Confluent's AvroConverter writes them) |
| decimal(p,s) | bytes, logical type `decimal` with precision and scale |
| date | int, logical type `date` |
| timestamp | long, logical type `timestamp-micros` |
| timestamp_ntz | long, logical type `local-timestamp-micros` |
| array<T> | array of T |
| map<string,V> | map of V |
| map<K,V>, K not string | array of records {key: K, value: V} (Avro maps have string keys) |
| struct<…> | a nested record, named `<record>_<field>` (cut to 100 characters, unique in the schema) |
| void | null |
| char(n), varchar(n), collated strings, intervals, others | string, int or long with `connect.spark.type` |

A column that may be null is `["null", T]` with `"default": null`; so are array elements and map
values that may be null. Names are made valid Avro names (letters, digits, `_`; not starting with a
digit): a changed name keeps the column's own in `connect.column.name`. The key's columns are the
record's `connect.key`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

__all__ = ["NAMESPACE", "avro_name", "avro_schema", "avro_text"]

NAMESPACE = "connect"

#: Spark's simpleString of a primitive → its name in Spark's JSON, where the two differ.
_SIMPLE_TO_JSON = {"tinyint": "byte", "smallint": "short", "int": "integer", "bigint": "long"}
_PRIMITIVES: Mapping[str, Any] = {
    "boolean": "boolean",
    "byte": {"type": "int", "connect.type": "int8"},
    "short": {"type": "int", "connect.type": "int16"},
    "integer": "int",
    "long": "long",
    "float": "float",
    "double": "double",
    "string": "string",
    "binary": "bytes",
    "date": {"type": "int", "logicalType": "date"},
    "timestamp": {"type": "long", "logicalType": "timestamp-micros"},
    "timestamp_ntz": {"type": "long", "logicalType": "local-timestamp-micros"},
    "void": "null",
}
_DECIMAL = re.compile(r"decimal\((\d{1,3}),(-?\d{1,3})\)")
#: Characters of a nested record's name: each is its parent's name and a field's, so uncut they would
#: grow with the depth, and the schema with its square (long field names, many levels).
_RECORD_NAME_CHARS = 100


def avro_name(text: str) -> str:
    """`text` as an Avro name: every character other than an ASCII letter, digit or `_` becomes `_`,
    and a leading digit (or nothing) gets a `_` before it."""
    name = "".join(c if (c.isascii() and (c.isalnum() or c == "_")) else "_" for c in text)
    return name if name and not name[0].isdigit() else "_" + name


def avro_schema(topic: str, document: Mapping[str, Any]) -> dict[str, Any]:
    """The Avro record schema of a topic schema `document` (`topics.schemas.TopicSchema.document`)."""
    record_name = avro_name(topic)
    names = _Names(record_name)
    fields = _fields(
        [(c["name"], _json_type(c), bool(c["nullable"])) for c in document.get("columns", [])], record_name, names
    )
    schema: dict[str, Any] = {"type": "record", "name": record_name, "namespace": NAMESPACE, "fields": fields}
    if document.get("key"):
        schema["connect.key"] = list(document["key"])
    if document.get("key_type"):
        schema["connect.key.type"] = document["key_type"]
    return schema


def avro_text(topic: str, document: Mapping[str, Any]) -> str:
    """`avro_schema` as the compact JSON text a Schema Registry answers with."""
    return json.dumps(avro_schema(topic, document), separators=(",", ":"), ensure_ascii=False)


def _json_type(column: Mapping[str, Any]) -> Any:
    """A column's type as Spark's JSON names it (`nested` for structs, arrays and maps)."""
    if "nested" in column:
        return column["nested"]
    kind = str(column["type"])
    return _SIMPLE_TO_JSON.get(kind, kind)


def _fields(columns: list[tuple[str, Any, bool]], record: str, names: _Names) -> list[dict[str, Any]]:
    fields: list[dict[str, Any]] = []
    # a name valid as it is keeps it (its first column does: Spark allows two of one name); the others
    # are cleaned up around those
    kept: dict[str, int] = {}
    for i, (name, _, _) in enumerate(columns):
        if avro_name(name) == name:
            kept.setdefault(name, i)
    taken = _Names(*kept)
    for i, (name, kind, nullable) in enumerate(columns):
        field_name = name if kept.get(name) == i else taken.unique(avro_name(name))
        field: dict[str, Any] = {
            "name": field_name,
            "type": _nullable(_type(kind, f"{record}_{field_name}", names), nullable),
        }
        if nullable and field["type"] != "null":
            field["default"] = None
        if field_name != name:
            field["connect.column.name"] = name
        fields.append(field)
    return fields


def _nullable(avro: Any, nullable: bool) -> Any:
    return ["null", avro] if nullable and avro != "null" else avro


def _type(kind: Any, path: str, names: _Names) -> Any:
    """The Avro type of Spark JSON type `kind`; `path` names a record made for it, unique in `names`."""
    if isinstance(kind, dict):
        shape = kind.get("type")
        if shape == "struct":
            name = names.unique(avro_name(path)[:_RECORD_NAME_CHARS])
            inner = [(f["name"], f["type"], bool(f.get("nullable", True))) for f in kind.get("fields", [])]
            return {"type": "record", "name": name, "fields": _fields(inner, name, names)}
        if shape == "array":
            items = _type(kind["elementType"], f"{path}_element", names)
            return {"type": "array", "items": _nullable(items, bool(kind.get("containsNull", True)))}
        if shape == "map":
            values = _nullable(
                _type(kind["valueType"], f"{path}_value", names), bool(kind.get("valueContainsNull", True))
            )
            if kind["keyType"] == "string":
                return {"type": "map", "values": values}
            entry = names.unique(avro_name(f"{path}_entry")[:_RECORD_NAME_CHARS])
            key = _type(kind["keyType"], f"{path}_key", names)
            fields = [{"name": "key", "type": key}, {"name": "value", "type": values}]
            if isinstance(values, list):
                fields[1]["default"] = None
            return {
                "type": "array",
                "items": {"type": "record", "name": entry, "fields": fields},
                "connect.type": "map",
            }
        if shape == "udt" and "sqlType" in kind:
            return _type(kind["sqlType"], path, names)
        return {"type": "string", "connect.spark.type": json.dumps(kind, sort_keys=True)}
    return _primitive(str(kind))


def _primitive(kind: str) -> Any:
    if kind in _PRIMITIVES:
        return _PRIMITIVES[kind]
    decimal = _DECIMAL.fullmatch(kind)
    if decimal:
        precision, scale = int(decimal.group(1)), int(decimal.group(2))
        return {"type": "bytes", "logicalType": "decimal", "precision": precision, "scale": scale}
    if kind.startswith(("interval day", "interval hour", "interval minute", "interval second")):
        return {"type": "long", "connect.spark.type": kind}  # microseconds
    if kind.startswith(("interval year", "interval month")):
        return {"type": "int", "connect.spark.type": kind}  # months
    return {"type": "string", "connect.spark.type": kind}  # char(n), varchar(n), collated strings, variant …


class _Names:
    """Names handed out in one scope (a record's fields, or the schema's record names)."""

    def __init__(self, *taken: str) -> None:
        self._taken = set(taken)
        self._next: dict[str, int] = {}  # per name asked for: the suffix to try next

    def unique(self, name: str) -> str:
        """`name`, or `name_2`, `name_3` …: the first not handed out yet. The suffix tried next is
        kept per name, so many columns whose names clean up alike (`a b`, `a-b`, `a.b`) cost one
        try each, not one per column before them."""
        found, n = name, self._next.get(name, 1)
        if n > 1 or found in self._taken:
            n = max(n, 2)
            found = f"{name}_{n}"
            while found in self._taken:
                n += 1
                found = f"{name}_{n}"
        self._next[name] = n + 1
        self._taken.add(found)
        return found
