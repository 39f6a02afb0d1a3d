"""Column masks over change events: the columns the masks name are hidden in `before`, `after` and
the key (`__key`), before the events are records of a topic.

A column's fully qualified name is Debezium's: `<schema>.<table>.<column>` for PostgreSQL,
`<database>.<table>.<column>` for MariaDB / MySQL, the table as the events' `source` names it (a
topic's events may name several: a partition's, its table's; a column one of them names is hidden
in all). Debezium leaves a masked key column in clear in the key; here a hashed one is hashed there
too, so the topic holds the value nowhere (and masking or truncating a key column is refused)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from connect_core.connectors._masks import ColumnMasks, MaskRule, masked_field, masked_struct

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

__all__ = ["annotated", "masked_events"]

#: The event columns that hold a row of the table (or its key).
ROWS, KEY = ("before", "after"), "__key"


def masked_events(table: pa.Table, masks: ColumnMasks, keep: str) -> tuple[pa.Table, dict[str, MaskRule]]:
    """`table` (one topic's events) with the columns `masks` names hidden, and those columns' rules.
    `keep`: the stand-in of a value the log did not carry, which stays as it is (a sink keeps the
    value it has for it)."""
    if not masks or not table.num_rows or "after" not in table.schema.names:
        return table, {}
    row_type = table.schema.field("after").type
    columns = [row_type.field(i).name for i in range(row_type.num_fields)]
    key_type = table.schema.field(KEY).type if KEY in table.schema.names else None
    key = [key_type.field(i).name for i in range(key_type.num_fields)] if key_type is not None else []
    rules = masks.for_columns(_tables(table), columns, key)
    if not rules:
        return table, {}
    for name in (*ROWS, KEY):
        if name in table.schema.names:
            at = table.schema.get_field_index(name)
            hidden = masked_struct(table.column(name).combine_chunks(), rules, keep=keep if name != KEY else None)
            table = table.set_column(at, pa.field(name, hidden.type), hidden)
    return table, rules


def _tables(table: pa.Table) -> list[str]:
    """The tables the events' `source` names, as `<schema or database>.<table>`."""
    source = table.column("source").combine_chunks()
    names = [source.type.field(i).name for i in range(source.type.num_fields)]
    owner = pc.struct_field(source, "schema" if "schema" in names else "db")
    qualified = pc.binary_join_element_wise(owner, pc.struct_field(source, "table"), ".")
    return [t for t in pc.unique(qualified).to_pylist() if t is not None]


def annotated(schema: StructType, rules: Mapping[str, MaskRule]) -> StructType:
    """The events' Spark schema with each hidden column of `before`, `after` and `__key` saying how
    (`masked_field`): the topic's schema carries it, and lineage reports it."""
    from pyspark.sql.types import StructField, StructType

    if not rules:
        return schema
    fields = []
    for field in schema.fields:
        kind = field.dataType
        if field.name in (*ROWS, KEY) and isinstance(kind, StructType):
            inner = [masked_field(f, rules[f.name]) if f.name in rules else f for f in kind.fields]
            field = StructField(field.name, StructType(inner), field.nullable, field.metadata)
        fields.append(field)
    return StructType(fields)
