"""The record parts every batch has before its transforms run: a topic row without a key, headers,
timestamp or tombstone flag (a source that sets none, a segment written before they existed) gets
them as nulls, so a transform can always refer to them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from connect_core.sdk.records import TOPIC_COLUMN
from connect_core.sdk.transforms import HEADERS_COLUMN, KEY_COLUMN, TIMESTAMP_COLUMN, TOMBSTONE_COLUMN

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame

__all__ = ["HEADERS_DDL", "arrow_headers_type", "with_record_parts_arrow", "with_record_parts_spark"]

HEADERS_DDL = "array<struct<key:string,value:string>>"


def arrow_headers_type() -> Any:
    import pyarrow as pa

    return pa.list_(pa.struct([("key", pa.string()), ("value", pa.string())]))


def with_record_parts_spark(df: DataFrame, topic: str | None = None) -> DataFrame:
    """`df` with every record part present: missing ones as nulls (`__topic` as `topic` if given)."""
    from pyspark.sql import functions as F

    have = set(df.columns)
    add: dict[str, Any] = {}
    if KEY_COLUMN not in have:
        add[KEY_COLUMN] = F.lit(None)
    if HEADERS_COLUMN not in have:
        add[HEADERS_COLUMN] = F.lit(None).cast(HEADERS_DDL)
    if TIMESTAMP_COLUMN not in have:
        add[TIMESTAMP_COLUMN] = F.lit(None).cast("timestamp")
    if TOMBSTONE_COLUMN not in have:
        add[TOMBSTONE_COLUMN] = F.lit(None).cast("boolean")
    if topic is not None and TOPIC_COLUMN not in have:
        add[TOPIC_COLUMN] = F.lit(topic)
    return df.withColumns(add) if add else df


def with_record_parts_arrow(batch: pa.RecordBatch, topic: str | None = None) -> pa.RecordBatch:
    """The same over one Arrow record batch."""
    import pyarrow as pa

    n = batch.num_rows
    names = list(batch.schema.names)
    arrays = list(batch.columns)
    wanted: list[tuple[str, Any]] = [
        (KEY_COLUMN, pa.null()),
        (HEADERS_COLUMN, arrow_headers_type()),
        (TIMESTAMP_COLUMN, pa.timestamp("us", tz="UTC")),
        (TOMBSTONE_COLUMN, pa.bool_()),
    ]
    for name, kind in wanted:
        if name not in names:
            names.append(name)
            arrays.append(pa.nulls(n, kind))
    if topic is not None and TOPIC_COLUMN not in names:
        names.append(TOPIC_COLUMN)
        arrays.append(pa.array([topic] * n, pa.string()))
    return pa.RecordBatch.from_arrays(arrays, names=names)
