"""Change events in Debezium's envelope, as Arrow: one topic per table.

A record's value is `before`, `after` (rows of the table, or null), `source` (where and when the
change was made), `op` (`r` snapshot read, `c` create, `u` update, `d` delete, `t` truncate) and
`ts_ms` (when the connector saw it); its key (`__key`) is the table's primary key. A delete is
followed by a tombstone: the same key, a null value (`__tombstone`), so a compacting or
deleting sink can drop the key.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from connect_core.sdk import ArrowRecords

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["UNAVAILABLE", "ChangeTable", "arrow_type"]

#: Debezium's stand-in for a value the log did not carry (an unchanged TOAST column).
UNAVAILABLE = "__debezium_unavailable_value"

_SOURCE = pa.struct(
    [
        ("version", pa.string()),
        ("connector", pa.string()),
        ("name", pa.string()),
        ("ts_ms", pa.int64()),
        ("snapshot", pa.string()),
        ("db", pa.string()),
        ("schema", pa.string()),
        ("table", pa.string()),
        ("txId", pa.int64()),
        ("lsn", pa.int64()),
    ]
)

# PostgreSQL type OID → Arrow type of its value (the others travel as their text)
_ARROW = {
    16: pa.bool_(),
    17: pa.binary(),
    20: pa.int64(),
    21: pa.int16(),
    23: pa.int32(),
    26: pa.int64(),
    700: pa.float32(),
    701: pa.float64(),
    1082: pa.date32(),
    1114: pa.timestamp("us"),
    1184: pa.timestamp("us", tz="UTC"),
}


def arrow_type(type_oid: int, typmod: int) -> pa.DataType:
    """The Arrow type a column's values take: numeric with a precision as a decimal, without one
    (any scale) as its exact text, as Debezium's `decimal.handling.mode=string`."""
    if type_oid == 1700:
        if typmod >= 4:
            precision, scale = ((typmod - 4) >> 16) & 0xFFFF, (typmod - 4) & 0xFFFF
            if 0 < precision <= 38:
                return pa.decimal128(precision, scale)
        return pa.string()
    return _ARROW.get(type_oid, pa.string())


@dataclass
class ChangeTable:
    """The change events of one table in one run, in commit order, as rows of the envelope."""

    topic: str
    columns: Sequence[tuple[str, pa.DataType]]
    key: Sequence[str]
    rows: list[dict[str, Any]] = field(default_factory=list)

    def add(
        self,
        op: str,
        before: dict[str, Any] | None,
        after: dict[str, Any] | None,
        source: dict[str, Any],
        ts_ms: int,
        tombstone: bool = False,
    ) -> None:
        row = after if after is not None else before
        key = {k: row[k] for k in self.key} if self.key and row is not None else None
        self.rows.append(
            {
                "before": self._typed(before),
                "after": self._typed(after),
                "source": source,
                "op": op,
                "ts_ms": ts_ms,
                "__key": key,
                "__tombstone": False,
            }
        )
        if tombstone and key is not None:
            self.rows.append(
                {
                    "before": None,
                    "after": None,
                    "source": None,
                    "op": None,
                    "ts_ms": None,
                    "__key": key,
                    "__tombstone": True,
                }
            )

    def _typed(self, row: dict[str, Any] | None) -> dict[str, Any] | None:
        if row is None:
            return None
        out = {}
        for name, kind in self.columns:
            value = row.get(name)
            if value is not None and pa.types.is_string(kind) and not isinstance(value, str):
                value = str(value)  # numeric without precision: its exact text
            out[name] = value
        return out

    @property
    def schema(self) -> pa.Schema:
        value = pa.struct([(name, kind) for name, kind in self.columns])
        kinds = dict(self.columns)
        key = pa.struct([(k, kinds[k]) for k in self.key]) if self.key else pa.struct([("__none", pa.null())])
        return pa.schema(
            [
                ("before", value),
                ("after", value),
                ("source", _SOURCE),
                ("op", pa.string()),
                ("ts_ms", pa.int64()),
                ("__key", key),
                ("__tombstone", pa.bool_()),
            ]
        )

    def records(self, spark: SparkSession) -> ArrowRecords:
        """The events as records the runtime writes from the driver (no Spark job)."""
        from pyspark.sql.pandas.types import from_arrow_schema
        from pyspark.sql.types import LongType, StructField, StructType

        table = pa.Table.from_pylist(self.rows, schema=self.schema)
        if not self.key:
            table = table.drop_columns(["__key"])
        batches = table.to_batches()
        units = StructType([StructField("unit", LongType())])
        return ArrowRecords(
            spark, [(0,)], units, lambda _: iter(batches), from_arrow_schema(table.schema), partitions=1, in_driver=True
        )
