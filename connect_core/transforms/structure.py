"""Transforms that reshape a record part: Kafka's ExtractField, HoistField, Flatten, Cast and
SetSchemaMetadata.

A record's value is always a row of columns here, never a bare number or string. Where Kafka's
value would become a primitive (ExtractField$Value of a non-struct field), the value is one column
named after the field; a whole-value Cast casts that single column. The key (`__key`) may be a
primitive.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from connect_core.sdk.transforms import (
    KEY_COLUMN,
    TOMBSTONE_COLUMN,
    DataError,
    Transformation,
    TransformConfig,
    is_value_column,
)
from connect_core.sdk.transforms import column as spark_column
from connect_core.transforms._parts import (
    Part,
    arrow_fields,
    arrow_key_type,
    arrow_replace,
    arrow_with,
    check_value_names,
    names_text,
    spark_fields,
    spark_key_type,
    spark_replace,
    spark_type,
    spark_with,
)

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import Column, DataFrame

__all__ = [
    "ExtractFieldKey",
    "ExtractFieldValue",
    "FlattenKey",
    "FlattenValue",
    "HoistFieldKey",
    "HoistFieldValue",
    "SetSchemaMetadataKey",
    "SetSchemaMetadataValue",
    "field_path",
]


def field_path(spec: str, version: str) -> tuple[str, ...]:
    """The steps of a field reference: V1 names one top-level field (dots and all); V2 is a dotted path
    into nested structs, where a step holding dots is written in backticks (`` `a.b`.c ``), and a
    backtick inside one is escaped by a backslash. ValueError for an unclosed backtick."""
    return (spec,) if version == "V1" else tuple(_v2_steps(spec))


def _v2_steps(path: str) -> list[str]:
    # A port of Kafka's SingleFieldPath.buildFieldPathV2, so a path means here what it means there.
    steps: list[str] = []
    i, n = 0, len(path)
    while i < n:
        if path[i] != "`":
            dot = path.find(".", i)
            steps.append(path[i:] if dot < 0 else path[i:dot])
            i = n if dot < 0 else dot + 1
            continue
        opened, i = i, i + 1
        start, parts = i, []
        while True:
            i = path.find("`", i)
            if i < 0:
                raise ValueError(f"field path `{path}` opens a backtick at {opened} and never closes it")
            escaped = path[i - 1] == "\\"
            if i >= n - 1:
                if escaped:
                    raise ValueError(f"field path `{path}` opens a backtick at {opened} and never closes it")
                parts.append(path[start:i])
                i += 1
                break
            if path[i + 1] != ".":  # a backtick inside the name: part of it
                i += 1
                continue
            if escaped:
                parts += [path[start : i - 1], "`"]
                i += 1
                start = i
                continue
            parts.append(path[start:i])
            i += 2
            break
        steps.append("".join(parts))
    if path.endswith("."):
        steps.append("")
    return steps


class _FieldPathConfig(TransformConfig):
    # Before `field`, whose validator reads it.
    field_syntax_version: Literal["V1", "V2"] = Field(
        "V1",
        alias="field.syntax.version",
        description="V1: `field` is a top-level field's name. V2: a dotted path into nested structs (`a.b`; "
        "backticks around a name holding dots).",
    )
    field: str = Field(..., min_length=1, description="The field (with `field.syntax.version=V2`, a dotted path).")

    @field_validator("field_syntax_version", mode="before")
    @classmethod
    def _upper(cls, value: Any) -> Any:
        return value.strip().upper() if isinstance(value, str) else value

    @field_validator("field")
    @classmethod
    def _parses(cls, value: str, info: ValidationInfo) -> str:
        field_path(value, info.data.get("field_syntax_version", "V1"))  # ValueError says what is wrong
        return value

    def path(self) -> tuple[str, ...]:
        return field_path(self.field, self.field_syntax_version)


def _unknown(part: Part, path: tuple[str, ...], depth: int, have: list[str]) -> DataError:
    where = f"the record {part}" if depth == 0 else f"`{'.'.join(path[:depth])}`"
    return DataError(f"no field `{path[depth]}` in {where} (its fields: {names_text(have)}); fix `field`")


def _spark_path(df: DataFrame, part: Part, path: tuple[str, ...]) -> tuple[Column, Any]:
    """The column at `path` in the part, and its Spark type; DataError if there is none."""
    from pyspark.sql.types import StructType

    fields = spark_fields(df, part)
    if path[0] not in fields:
        raise _unknown(part, path, 0, list(fields))
    column, kind = fields[path[0]], spark_type(df, part, path[0])
    for depth in range(1, len(path)):
        have = kind.fieldNames() if isinstance(kind, StructType) else []
        if path[depth] not in have:
            raise _unknown(part, path, depth, have)
        column, kind = column.getField(path[depth]), kind[path[depth]].dataType
    return column, kind


def _arrow_path(batch: pa.RecordBatch, part: Part, path: tuple[str, ...]) -> pa.Array:
    import pyarrow as pa
    import pyarrow.compute as pc

    fields = arrow_fields(batch, part)
    if path[0] not in fields:
        raise _unknown(part, path, 0, list(fields))
    column = fields[path[0]]
    for depth in range(1, len(path)):
        kind = column.type
        have = [kind.field(i).name for i in range(kind.num_fields)] if pa.types.is_struct(kind) else []
        if path[depth] not in have:
            raise _unknown(part, path, depth, have)
        column = pc.struct_field(column, path[depth])  # null where the struct is
    return column


# -- ExtractField -----------------------------------------------------------------


class ExtractFieldConfig(_FieldPathConfig):
    pass


class _ExtractField(Transformation[ExtractFieldConfig]):
    """The part becomes one of its fields. For the value: a struct field's fields become the value's
    columns; any other field becomes the value's only column (named as the field, the path's last
    step). For the key: `__key` becomes the field itself, whatever its type."""

    config_model = ExtractFieldConfig
    part: ClassVar[Part]
    doc = "Replace the record key or value with one of its fields."

    def spark(self, df: DataFrame) -> dict[str, Column]:
        from pyspark.sql.types import StructType

        path = self.config.path()
        column, kind = _spark_path(df, self.part, path)
        if self.part == "key":
            return spark_replace(df, KEY_COLUMN, column)
        if isinstance(kind, StructType):
            names = check_value_names(self.part, kind.fieldNames())
            return spark_with(df, self.part, {name: column.getField(name) for name in names})
        return spark_with(df, self.part, {path[-1]: column})

    def arrow(self, batch: pa.RecordBatch) -> dict[str, pa.Array]:
        import pyarrow as pa
        import pyarrow.compute as pc

        path = self.config.path()
        column = _arrow_path(batch, self.part, path)
        if self.part == "key":
            return arrow_replace(batch, KEY_COLUMN, column)
        if pa.types.is_struct(column.type):
            names = check_value_names(self.part, [f.name for f in column.type])
            return arrow_with(batch, self.part, {name: pc.struct_field(column, name) for name in names})
        return arrow_with(batch, self.part, {path[-1]: column})


class ExtractFieldKey(_ExtractField):
    part = "key"


class ExtractFieldValue(_ExtractField):
    part = "value"


# -- HoistField -------------------------------------------------------------------


class HoistFieldConfig(TransformConfig):
    field: str = Field(..., min_length=1, description="Name of the one field of the struct that wraps the part.")


class _HoistField(Transformation[HoistFieldConfig]):
    """The part becomes a struct with one field, `field`, holding the old part: for the value, the one
    column `field`, a struct of the value's columns (null for a tombstone, whose value is null); for
    the key, `__key` becomes `{field: old key}` (a null key gives `{field: null}`, as in Kafka). Rows
    without any key (no `__key` type) keep none."""

    config_model = HoistFieldConfig
    part: ClassVar[Part]
    doc = "Wrap the record key or value in a struct with one field."

    @staticmethod
    def _value(fields: dict[str, Any]) -> dict[str, Any]:
        if not fields:
            raise DataError("HoistField$Value needs a value with at least one field; the records have none")
        return fields

    def spark(self, df: DataFrame) -> dict[str, Column]:
        from pyspark.sql import functions as F

        name = self.config.field
        if self.part == "key":
            if spark_key_type(df) is None:
                return {n: spark_column(n) for n in df.columns}
            return spark_replace(df, KEY_COLUMN, F.struct(F.col(KEY_COLUMN).alias(name)))
        check_value_names(self.part, [name])
        fields = self._value(spark_fields(df, "value"))
        value = F.struct(*[column.alias(n) for n, column in fields.items()])
        if TOMBSTONE_COLUMN in df.columns:
            value = F.when(F.coalesce(F.col(TOMBSTONE_COLUMN), F.lit(False)), F.lit(None)).otherwise(value)
        return spark_with(df, "value", {name: value})

    def arrow(self, batch: pa.RecordBatch) -> dict[str, pa.Array]:
        import pyarrow as pa
        import pyarrow.compute as pc

        name = self.config.field
        if self.part == "key":
            if arrow_key_type(batch.schema) is None:
                return {n: batch.column(n) for n in batch.schema.names}
            key = pa.StructArray.from_arrays([batch.column(KEY_COLUMN)], names=[name])
            return arrow_replace(batch, KEY_COLUMN, key)
        check_value_names(self.part, [name])
        fields = self._value(arrow_fields(batch, "value"))
        tombstone = None
        if TOMBSTONE_COLUMN in batch.schema.names:
            tombstone = pc.fill_null(batch.column(TOMBSTONE_COLUMN), False)
        value = pa.StructArray.from_arrays(list(fields.values()), names=list(fields), mask=tombstone)
        return arrow_with(batch, "value", {name: value})


class HoistFieldKey(_HoistField):
    part = "key"


class HoistFieldValue(_HoistField):
    part = "value"


# -- Flatten ----------------------------------------------------------------------


class FlattenConfig(TransformConfig):
    delimiter: str = Field(".", description="Put between the names of a nested field and its struct's field.")


class _Flatten(Transformation[FlattenConfig]):
    """Fields of nested structs become top-level fields named `outer<delimiter>inner`, at every depth
    (a null struct gives nulls); arrays and maps are kept as they are, as Kafka does for records with
    a schema. A struct with no fields leaves nothing."""

    config_model = FlattenConfig
    part: ClassVar[Part]
    doc = "Flatten nested structs into top-level fields named with a delimiter."

    def _put(self, out: dict[str, Any], name: str, column: Any) -> None:
        if name in out:
            raise DataError(
                f"flattening gives the record {self.part} two fields named `{name}`; "
                "choose another `delimiter` or rename one first"
            )
        out[name] = column

    def spark(self, df: DataFrame) -> dict[str, Column]:
        from pyspark.sql.types import StructType

        out: dict[str, Column] = {}

        def walk(name: str, column: Column, kind: Any) -> None:
            if not isinstance(kind, StructType):
                self._put(out, name, column)
                return
            for f in kind.fields:
                walk(f"{name}{self.config.delimiter}{f.name}", column.getField(f.name), f.dataType)

        for name, column in spark_fields(df, self.part).items():
            walk(name, column, spark_type(df, self.part, name))
        return spark_with(df, self.part, out)

    def arrow(self, batch: pa.RecordBatch) -> dict[str, pa.Array]:
        import pyarrow as pa
        import pyarrow.compute as pc

        out: dict[str, pa.Array] = {}

        def walk(name: str, column: pa.Array) -> None:
            if not pa.types.is_struct(column.type):
                self._put(out, name, column)
                return
            for f in column.type:
                walk(f"{name}{self.config.delimiter}{f.name}", pc.struct_field(column, f.name))

        for name, column in arrow_fields(batch, self.part).items():
            walk(name, column)
        return arrow_with(batch, self.part, out)


class FlattenKey(_Flatten):
    part = "key"


class FlattenValue(_Flatten):
    part = "value"


# -- SetSchemaMetadata ------------------------------------------------------------

SCHEMA_NAME_KEY = "connect.schema.name"
SCHEMA_VERSION_KEY = "connect.schema.version"


class SetSchemaMetadataConfig(TransformConfig):
    schema_name: str | None = Field(None, alias="schema.name", description="Schema name to set.")
    schema_version: int | None = Field(None, alias="schema.version", description="Schema version to set.")

    @model_validator(mode="after")
    def _something(self) -> SetSchemaMetadataConfig:
        if self.schema_name is None and self.schema_version is None:
            raise ValueError("set `schema.name` or `schema.version` (or both): there is nothing to set")
        return self

    def metadata(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.schema_name is not None:
            out[SCHEMA_NAME_KEY] = self.schema_name
        if self.schema_version is not None:
            out[SCHEMA_VERSION_KEY] = self.schema_version
        return out


class _SetSchemaMetadata(Transformation[SetSchemaMetadataConfig]):
    """There is no schema registry: the name and version go into column metadata (Spark
    `StructField.metadata`; `connect.schema.name`, `connect.schema.version`), on `__key` for the key
    and on every value column for the value. Data is unchanged. Arrow arrays carry no metadata:
    `arrow` returns the columns as they are, and `arrow_metadata` gives the field metadata for a
    runtime to put on the batch's schema."""

    config_model = SetSchemaMetadataConfig
    part: ClassVar[Part]
    doc = "Set the schema name and/or version of the record key or value (as column metadata)."

    def _targets(self, names: list[str], key_kind: Any) -> list[str]:
        if self.part == "value":
            return [n for n in names if is_value_column(n)]
        if key_kind is None:
            raise DataError(
                "SetSchemaMetadata$Key needs a record key and the records have none; give them one "
                "(ValueToKey) or drop the transform"
            )
        return [KEY_COLUMN]

    def spark(self, df: DataFrame) -> dict[str, Column]:
        out = {n: spark_column(n) for n in df.columns}
        for name in self._targets(df.columns, spark_key_type(df)):
            metadata = {**df.schema[name].metadata, **self.config.metadata()}
            out[name] = spark_column(name).alias(name, metadata=metadata)
        return out

    def arrow(self, batch: pa.RecordBatch) -> dict[str, pa.Array]:
        self._targets(batch.schema.names, arrow_key_type(batch.schema))
        return {n: batch.column(n) for n in batch.schema.names}

    def arrow_metadata(self, schema: pa.Schema) -> dict[str, dict[bytes, bytes]]:
        """Field metadata to merge into the output schema of `arrow` (input `schema`), by column name."""
        targets = self._targets(schema.names, arrow_key_type(schema))
        encoded = {k.encode(): str(v).encode() for k, v in self.config.metadata().items()}
        return {name: {**(schema.field(name).metadata or {}), **encoded} for name in targets}


class SetSchemaMetadataKey(_SetSchemaMetadata):
    part = "key"


class SetSchemaMetadataValue(_SetSchemaMetadata):
    part = "value"
