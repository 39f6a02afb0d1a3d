"""Transforms of a record's headers: Kafka's DropHeaders, HeaderFrom and InsertHeader.

Headers are the `__headers` column, a list of (key, value) strings in order; a null list is a
record without headers. Headers keep their order and new ones are appended, as Kafka's
`Headers.add` does; a key may occur more than once.

A header's value is a string here (Kafka's headers carry typed values): `HeaderFrom` writes a
field's value as Kafka's `Values.convertToString` does for a primitive (`42`, `true`, a date as
`2024-01-31`, a timestamp as `2024-01-31T12:00:00.000Z`). Fields of other types (floats, decimals,
bytes, structs, arrays, maps) are refused with a DataError: their text differs between Spark and
Arrow (`1.0` against `1`, `1E-10` against `0.0000000001`, JSON layouts), and a header must be the
same whichever path wrote it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import Field, ValidationInfo, field_validator

from connect_core.sdk.config import TopicList
from connect_core.sdk.transforms import (
    HEADERS_COLUMN,
    KEY_COLUMN,
    TOMBSTONE_COLUMN,
    DataError,
    Transformation,
    TransformConfig,
    column,
)
from connect_core.transforms import _javatime
from connect_core.transforms._parts import Part, arrow_fields, arrow_with, spark_fields, spark_type, spark_with

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa
    from pyspark.sql import Column, DataFrame

__all__ = ["DropHeaders", "HeaderFromKey", "HeaderFromValue", "InsertHeader"]

#: Kafka's text of a Timestamp (`Values.ISO_8601_TIMESTAMP_FORMAT`), always in UTC.
_TIMESTAMP_TEXT = "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'"


def _not_empty(value: list[str]) -> list[str]:
    if not value:
        raise ValueError("must list at least one name")
    return value


# -- the headers column, on Arrow -------------------------------------------------


def _as_list(headers: pa.Array) -> pa.ListArray:
    import pyarrow as pa

    if isinstance(headers, pa.ListArray):
        return headers
    return headers.cast(pa.list_(headers.type.value_field))


def _rows(headers: pa.ListArray) -> tuple[pa.Array, np.ndarray, np.ndarray]:
    """(the headers of every row, in order; the row of each; each row's header count, 0 when null)."""
    import numpy as np
    import pyarrow.compute as pc

    counts = pc.fill_null(pc.list_value_length(headers), 0).to_numpy(zero_copy_only=False).astype(np.int64)
    return headers.flatten(), np.repeat(np.arange(len(headers)), counts), counts


def _offsets(counts: np.ndarray) -> pa.Array:
    import numpy as np
    import pyarrow as pa

    offsets = np.zeros(len(counts) + 1, dtype=np.int32)
    np.cumsum(counts, out=offsets[1:])
    return pa.array(offsets, pa.int32())


def _drop_arrow(headers: pa.Array, names: list[str]) -> pa.Array:
    """`headers` without those whose key is one of `names` (a null list stays null)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    headers = _as_list(headers)
    flat, row, _ = _rows(headers)
    keep = pc.invert(pc.fill_null(pc.is_in(pc.struct_field(flat, "key"), pa.array(names, pa.string())), False))
    kept = keep.to_numpy(zero_copy_only=False)
    counts = np.bincount(row[kept], minlength=len(headers))
    return pa.ListArray.from_arrays(
        _offsets(counts), flat.filter(keep), type=headers.type, mask=headers.is_null() if headers.null_count else None
    )


def _append_arrow(headers: pa.Array, new: list[tuple[str, pa.Array]], where: pa.Array | None) -> pa.Array:
    """`headers` with a header (key, value of the row) appended per pair of `new`, in rows where `where` holds."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    headers = _as_list(headers)
    flat, _, old = _rows(headers)
    n, k = len(headers), len(new)
    rows = np.arange(n) if where is None else np.flatnonzero(pc.fill_null(where, False).to_numpy(zero_copy_only=False))
    added = np.zeros(n, dtype=np.int64)
    added[rows] = k
    # the new headers, row by row: `values` holds header j of row i at j * n + i
    values = pa.concat_arrays([v.cast(pa.string()) for _, v in new])
    keys = pa.concat_arrays([pa.repeat(pa.scalar(key, pa.string()), n) for key, _ in new])
    appended = pa.StructArray.from_arrays([keys, values], fields=list(flat.type)).take(
        pa.array((np.arange(k)[None, :] * n + rows[:, None]).ravel(), pa.int64())
    )
    # where each output header comes from: row i's old ones, then its new ones
    counts = old + added
    total = int(counts.sum())
    row = np.repeat(np.arange(n), counts)
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    old_starts = np.concatenate(([0], np.cumsum(old)[:-1]))
    new_starts = np.concatenate(([0], np.cumsum(added)[:-1]))
    within = np.arange(total) - starts[row]
    source = np.where(within < old[row], old_starts[row] + within, len(flat) + new_starts[row] + within - old[row])
    merged = pa.concat_arrays([flat, appended]).take(pa.array(source, pa.int64()))
    still_null = headers.is_null().to_numpy(zero_copy_only=False) & (added == 0)
    return pa.ListArray.from_arrays(
        _offsets(counts), merged, type=headers.type, mask=pa.array(still_null) if still_null.any() else None
    )


def _append_spark(headers: Column, kind: Any, new: list[tuple[str, Column]]) -> Column:
    from pyspark.sql import functions as F

    structs = [F.struct(F.lit(key).alias("key"), value.cast("string").alias("value")) for key, value in new]
    return F.concat(F.coalesce(headers, F.array().cast(kind)), F.array(*structs))


# -- DropHeaders ------------------------------------------------------------------


class DropHeadersConfig(TransformConfig):
    headers: TopicList = Field(description="The keys of the headers to remove (every header with such a key).")

    _check = field_validator("headers")(_not_empty)


class DropHeaders(Transformation[DropHeadersConfig]):
    config_model = DropHeadersConfig
    doc = "Remove every header whose key is one of `headers`."

    def spark(self, df: DataFrame) -> dict[str, Column]:
        from pyspark.sql import functions as F

        names = list(self.config.headers)
        kept = F.filter(F.col(HEADERS_COLUMN), lambda h: ~F.coalesce(h["key"].isin(names), F.lit(False)))
        return {name: kept if name == HEADERS_COLUMN else column(name) for name in df.columns}

    def arrow(self, batch: pa.RecordBatch) -> dict[str, pa.Array]:
        kept = _drop_arrow(batch.column(HEADERS_COLUMN), list(self.config.headers))
        return {name: kept if name == HEADERS_COLUMN else batch.column(name) for name in batch.schema.names}


# -- InsertHeader -----------------------------------------------------------------


class InsertHeaderConfig(TransformConfig):
    header: str = Field(description="The key of the header to add.")
    value_literal: str = Field(alias="value.literal", description="The header's value (a string).")


class InsertHeader(Transformation[InsertHeaderConfig]):
    config_model = InsertHeaderConfig
    doc = "Append a header with a fixed key and value to every record."

    def spark(self, df: DataFrame) -> dict[str, Column]:
        from pyspark.sql import functions as F

        kind = df.schema[HEADERS_COLUMN].dataType
        added = _append_spark(F.col(HEADERS_COLUMN), kind, [(self.config.header, F.lit(self.config.value_literal))])
        return {name: added if name == HEADERS_COLUMN else column(name) for name in df.columns}

    def arrow(self, batch: pa.RecordBatch) -> dict[str, pa.Array]:
        import pyarrow as pa

        value = pa.repeat(pa.scalar(self.config.value_literal, pa.string()), batch.num_rows)
        added = _append_arrow(batch.column(HEADERS_COLUMN), [(self.config.header, value)], None)
        return {name: added if name == HEADERS_COLUMN else batch.column(name) for name in batch.schema.names}


# -- HeaderFrom -------------------------------------------------------------------


class HeaderFromConfig(TransformConfig):
    fields: TopicList = Field(description="The fields whose values become headers.")
    headers: TopicList = Field(description="The header keys, one per field of `fields`, in the same order.")
    operation: Literal["move", "copy"] = Field(
        description="`move` removes the fields from the record, `copy` keeps them."
    )

    _check = field_validator("fields")(_not_empty)

    @field_validator("headers")
    @classmethod
    def _same_length(cls, value: list[str], info: ValidationInfo) -> list[str]:
        fields = info.data.get("fields")
        if fields is not None and len(fields) != len(value):
            raise ValueError(f"lists {len(value)} header(s) for {len(fields)} field(s): give one header per field")
        return value


def _spark_text(value: Column, kind: Any, field: str) -> Column:
    """A field's value as a header's text (Kafka's `Values.convertToString` of a primitive)."""
    from pyspark.sql import types as T

    if isinstance(kind, T.TimestampType):
        return _javatime.format_spark(value, _TIMESTAMP_TEXT)
    if isinstance(kind, T.StringType | T.ByteType | T.ShortType | T.IntegerType | T.LongType | T.BooleanType):
        return value.cast("string")
    if isinstance(kind, T.DateType | T.NullType):
        return value.cast("string")
    raise _no_text(field, kind.simpleString())


def _arrow_text(value: pa.Array, field: str) -> pa.Array:
    import pyarrow as pa

    kind = value.type
    if pa.types.is_timestamp(kind):
        return _javatime.format_arrow(value, _TIMESTAMP_TEXT)
    plain = (pa.types.is_string, pa.types.is_large_string, pa.types.is_signed_integer, pa.types.is_boolean)
    if any(test(kind) for test in plain) or pa.types.is_date32(kind) or pa.types.is_null(kind):
        return value.cast(pa.string())
    raise _no_text(field, str(kind))


def _no_text(field: str, kind: str) -> DataError:
    return DataError(
        f"field `{field}` is of type {kind}: HeaderFrom takes strings, integers, booleans, dates and "
        "timestamps (cast the field to a string first, e.g. with Cast)"
    )


def _missing(part: Part, fields: list[str], have: dict[str, Any]) -> None:
    absent = [f for f in fields if f not in have]
    if absent:
        raise DataError(f"the record {part} has no field {', '.join(f'`{f}`' for f in absent)}")


class _HeaderFrom(Transformation[HeaderFromConfig]):
    config_model = HeaderFromConfig
    part: ClassVar[Part]
    doc = "Copy or move fields of the record into headers (appended, one per field, as text)."

    def spark(self, df: DataFrame) -> dict[str, Column]:
        from pyspark.sql import functions as F

        c = self.config
        fields = spark_fields(df, self.part)
        _missing(self.part, c.fields, fields)
        new = [
            (header, _spark_text(fields[field], spark_type(df, self.part, field), field))
            for field, header in zip(c.fields, c.headers, strict=True)
        ]
        # a record without this part (a null key, a tombstone) is left as it is
        present = (
            F.col(KEY_COLUMN).isNotNull() if self.part == "key" else ~F.coalesce(F.col(TOMBSTONE_COLUMN), F.lit(False))
        )
        headers = F.col(HEADERS_COLUMN)
        added = F.when(present, _append_spark(headers, df.schema[HEADERS_COLUMN].dataType, new)).otherwise(headers)
        if c.operation == "move":
            fields = {name: col for name, col in fields.items() if name not in c.fields}
        out = spark_with(df, self.part, fields)
        out[HEADERS_COLUMN] = added
        return out

    def arrow(self, batch: pa.RecordBatch) -> dict[str, pa.Array]:
        import pyarrow.compute as pc

        c = self.config
        fields = arrow_fields(batch, self.part)
        _missing(self.part, c.fields, fields)
        new = [(header, _arrow_text(fields[field], field)) for field, header in zip(c.fields, c.headers, strict=True)]
        present = (
            batch.column(KEY_COLUMN).is_valid()
            if self.part == "key"
            else pc.invert(pc.fill_null(batch.column(TOMBSTONE_COLUMN), False))
        )
        added = _append_arrow(batch.column(HEADERS_COLUMN), new, present)
        if c.operation == "move":
            fields = {name: array for name, array in fields.items() if name not in c.fields}
        out = arrow_with(batch, self.part, fields)
        out[HEADERS_COLUMN] = added
        return out


class HeaderFromKey(_HeaderFrom):
    part = "key"


class HeaderFromValue(_HeaderFrom):
    part = "value"
