"""The record part a `$Key` or `$Value` transform works on, as named columns, on both paths.

The value's fields are the row's value columns; the key's are the fields of the `__key` struct.
A transform reads the part's fields (`*_fields`), computes new ones, and puts them back
(`*_with`): for the value they become the row's value columns, for the key the `__key` struct
(a null key stays null). Everything else in the row is kept as it is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from connect_core.sdk.transforms import KEY_COLUMN, DataError, is_value_column
from connect_core.sdk.transforms import column as spark_column

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import Column, DataFrame

__all__ = ["Part", "arrow_fields", "arrow_with", "spark_fields", "spark_type", "spark_with"]

Part = Literal["key", "value"]


def _not_struct(part: Part, kind: object) -> DataError:
    return DataError(f"the record {part} must be a struct of fields for this transform; it is {kind}")


# -- Spark ----------------------------------------------------------------------


def spark_fields(df: DataFrame, part: Part) -> dict[str, Column]:
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructType

    if part == "value":
        return {name: spark_column(name) for name in df.columns if is_value_column(name)}
    kind = df.schema[KEY_COLUMN].dataType if KEY_COLUMN in df.columns else None
    if not isinstance(kind, StructType):
        raise _not_struct(part, kind.simpleString() if kind is not None else "absent")
    return {f.name: F.col(KEY_COLUMN).getField(f.name) for f in kind.fields}


def spark_type(df: DataFrame, part: Part, field: str) -> Any:
    """The Spark type of one field of the part."""
    from pyspark.sql.types import StructType

    if part == "value":
        return df.schema[field].dataType
    kind = df.schema[KEY_COLUMN].dataType
    assert isinstance(kind, StructType)
    return kind[field].dataType


def spark_with(df: DataFrame, part: Part, fields: dict[str, Column]) -> dict[str, Column]:
    """The row's columns with the part's fields replaced by `fields` (in their order)."""
    from pyspark.sql import functions as F

    if part == "value":
        return {**fields, **{name: spark_column(name) for name in df.columns if not is_value_column(name)}}
    key = F.when(F.col(KEY_COLUMN).isNull(), F.lit(None)).otherwise(
        F.struct(*[col.alias(name) for name, col in fields.items()])
    )
    return {name: key if name == KEY_COLUMN else spark_column(name) for name in df.columns}


# -- Arrow ----------------------------------------------------------------------


def arrow_fields(batch: pa.RecordBatch, part: Part) -> dict[str, pa.Array]:
    import pyarrow as pa

    if part == "value":
        return {name: batch.column(name) for name in batch.schema.names if is_value_column(name)}
    index = batch.schema.get_field_index(KEY_COLUMN)
    kind = batch.schema.field(index).type if index >= 0 else None
    if not isinstance(kind, pa.StructType):
        raise _not_struct(part, kind if kind is not None else "absent")
    key = batch.column(index)
    return {kind.field(i).name: child for i, child in enumerate(key.flatten())}


def arrow_with(batch: pa.RecordBatch, part: Part, fields: dict[str, pa.Array]) -> dict[str, pa.Array]:
    import pyarrow as pa

    if part == "value":
        return {**fields, **{n: batch.column(n) for n in batch.schema.names if not is_value_column(n)}}
    old = batch.column(KEY_COLUMN)
    key = pa.StructArray.from_arrays(
        list(fields.values()), names=list(fields), mask=old.is_null() if old.null_count else None
    )
    return {name: key if name == KEY_COLUMN else batch.column(name) for name in batch.schema.names}


# -- shared by the field transforms ---------------------------------------------------------------------


def spark_replace(df: DataFrame, name: str, column: Column) -> dict[str, Column]:
    """Every column of `df` as is, except `name` (appended if `df` lacks it)."""
    out = {n: spark_column(n) for n in df.columns}
    out[name] = column
    return out


def arrow_replace(batch: pa.RecordBatch, name: str, column: pa.Array) -> dict[str, pa.Array]:
    out = {n: batch.column(n) for n in batch.schema.names}
    out[name] = column
    return out


def check_value_names(part: Part, names: list[str]) -> list[str]:
    """Value columns named as record parts (`__key`, `__topic`) would be read back as those parts."""
    reserved = [n for n in names if not is_value_column(n)] if part == "value" else []
    if reserved:
        raise DataError(
            f"the record value would get field(s) {', '.join(f'`{n}`' for n in reserved)}, names kept for "
            "record parts (`__key`, `__topic`, … and `__connect_…`): rename them first (ReplaceField `renames`)"
        )
    return names


def names_text(names: list[str]) -> str:
    return ", ".join(f"`{n}`" for n in names) or "none"


def spark_key_type(df: DataFrame) -> Any:
    """The Spark type of `__key`; None when rows have no key at all (none set: the column has no type)."""
    from pyspark.sql.types import NullType

    kind = df.schema[KEY_COLUMN].dataType if KEY_COLUMN in df.columns else None
    return None if isinstance(kind, NullType) else kind


def arrow_key_type(schema: pa.Schema) -> Any:
    import pyarrow as pa

    index = schema.get_field_index(KEY_COLUMN)
    kind = schema.field(index).type if index >= 0 else None
    return None if kind == pa.null() else kind


# -- field paths (Kafka's `field.syntax.version`) ---------------------------------------
