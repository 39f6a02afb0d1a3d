"""What a JDBC target does to its table when the topic's columns changed: `sdk.evolution`'s rules,
for the columns of the table the layout writes (`auto.evolve` is the sink's own evolve setting).

The table's own key and unique columns are never dropped nor relaxed, whatever the sink's
`pk.fields` say (dropping one would drop the table's primary key); a column is retyped only to a
type wider than the one it has *in the table* (`sql_widens`): a table made wider by hand (a
`double precision` where the topic has `bigint`) keeps its type, and its rows."""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING

from connect_core.sdk.evolution import Evolution
from connect_core.sdk.evolution import evolution as _evolution

if TYPE_CHECKING:
    from connect_core.connectors.jdbc._staging import Layout
    from connect_core.connectors.jdbc.config import JdbcSinkConfig

__all__ = ["Evolution", "evolution", "sql_widens"]


def evolution(
    cfg: JdbcSinkConfig,
    layout: Layout,
    declared: Mapping[str, str],
    table_keys: Collection[str],
    wanted: Mapping[str, str],
) -> Evolution:
    """What the table gets for `layout`'s records: `declared` its columns' SQL types as the database
    names them, `table_keys` its key and unique columns, `wanted` the records' columns' SQL types."""
    keys = {*layout.keys, *table_keys}
    found = _evolution(cfg.schema_propagation, cfg.auto_evolve, layout.changes, declared, keys)
    widen = tuple(c for c in found.widen if c in wanted and sql_widens(declared[c], wanted[c]))
    return Evolution(found.add, found.drop, found.relax, widen)


_INTEGERS = {"tinyint": 1, "smallint": 2, "mediumint": 3, "int": 4, "integer": 4, "bigint": 5}
_INTEGER_DIGITS = {1: 3, 2: 5, 3: 7, 4: 10, 5: 19}
_FLOATS = {"real": 1, "float": 1, "double": 2, "double precision": 2}
_DECIMAL = re.compile(r"(?:numeric|decimal)\((\d+),\s*(\d+)\)")


def sql_widens(current: str, wanted: str) -> bool:
    """Whether SQL type `wanted` holds every value of `current` and is not the same: integers to
    larger integers or a decimal with as many integer digits, `real` to `double precision`, decimals
    to as many integer and fraction digits, `date` to a timestamp. PostgreSQL's `format_type` or
    MariaDB's `COLUMN_TYPE` names; anything else (unsigned, text, a type of the table's own): no."""
    c, w = _plain(current), _plain(wanted)
    if c == w or "unsigned" in current.lower():
        return False
    if c in _INTEGERS and w in _INTEGERS:
        return _INTEGERS[w] > _INTEGERS[c]
    to_decimal = _DECIMAL.fullmatch(w)
    if c in _INTEGERS and to_decimal:
        return int(to_decimal[1]) - int(to_decimal[2]) >= _INTEGER_DIGITS[_INTEGERS[c]]
    from_decimal = _DECIMAL.fullmatch(c)
    if from_decimal and to_decimal:
        p1, s1, p2, s2 = (int(from_decimal[1]), int(from_decimal[2]), int(to_decimal[1]), int(to_decimal[2]))
        return s2 >= s1 and p2 - s2 >= p1 - s1
    if c in _FLOATS and w in _FLOATS:
        return _FLOATS[w] > _FLOATS[c]
    return c == "date" and (w.startswith("timestamp") or w.startswith("datetime"))


def _plain(kind: str) -> str:
    """A SQL type as compared: lower case, no display width (`int(11)`), no zone words."""
    text = kind.strip().lower()
    text = re.sub(r"^(tinyint|smallint|mediumint|int|integer|bigint)\(\d+\)", r"\1", text)
    return text.replace(" without time zone", "").replace(" with time zone", "")
