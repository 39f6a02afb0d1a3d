"""A `pgoutput` row's values as Python values, by column type, from the server's text output."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, date, datetime, time
from decimal import Decimal
from typing import Any

from connect_core.connectors.cdc.postgres._pgmessages import Column, ColumnValue, PgOutputError, Relation, TupleData
from connect_core.sdk.errors import DataError

__all__ = ["values_of"]


def values_of(relation: Relation, data: TupleData) -> dict[str, Any]:
    """`{column: value}` of a row of `relation` in text form (as `Decoder.values`; also for rows read
    with `::text` casts, as a snapshot reads them)."""
    if len(data) != len(relation.columns):
        raise PgOutputError(
            f"a row of {len(data)} columns for `{relation.namespace}.{relation.name}`, "
            f"described with {len(relation.columns)}"
        )
    return {column.name: _python(relation, column, value) for column, value in zip(relation.columns, data, strict=True)}


def _boolean(text: str) -> bool:
    return {"t": True, "f": False}[text]


def _bytea(text: str) -> bytes:
    if not text.startswith("\\x"):
        raise ValueError("not in hex format (is the server's `bytea_output` `escape`?)")
    return bytes.fromhex(text[2:])


def _timestamptz(text: str) -> datetime:
    value = datetime.fromisoformat(text)
    if value.tzinfo is None:
        raise ValueError("no UTC offset")
    return value.astimezone(UTC)


# By type OID (pg_type.oid of the built-in types): its name, and its text output to a Python value.
_FROM_TEXT: dict[int, tuple[str, Callable[[str], Any]]] = {
    16: ("boolean", _boolean),
    17: ("bytea", _bytea),
    20: ("bigint", int),
    21: ("smallint", int),
    23: ("integer", int),
    26: ("oid", int),
    700: ("real", float),
    701: ("double precision", float),
    1700: ("numeric", Decimal),
    1082: ("date", date.fromisoformat),
    1083: ("time", time.fromisoformat),
    1114: ("timestamp", datetime.fromisoformat),
    1184: ("timestamptz", _timestamptz),
}


def _python(relation: Relation, column: Column, value: ColumnValue) -> Any:
    if not isinstance(value, str) or column.type_oid not in _FROM_TEXT:
        return value
    type_name, convert = _FROM_TEXT[column.type_oid]
    try:
        return convert(value)
    except (ValueError, KeyError, ArithmeticError) as exc:  # Decimal's InvalidOperation is an ArithmeticError
        shown = value if len(value) <= 40 else f"{value[:40]}…"
        raise DataError(
            f"`{relation.namespace}.{relation.name}`.`{column.name}`: {shown!r} is no {type_name} Python reads "
            f"({type(exc).__name__}: {exc})"
        ) from exc
