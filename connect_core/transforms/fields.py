"""Transforms that add, drop, rename or blank fields, or copy them into the key: Kafka's
InsertField, ReplaceField, MaskField and ValueToKey."""

from __future__ import annotations

import datetime as dt
import decimal
import math
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, TypeVar

from pydantic import AfterValidator, AliasChoices, BeforeValidator, Field, field_validator

from connect_core.sdk.config import split_list
from connect_core.sdk.records import OFFSET_COLUMN, PARTITION_COLUMN, TOPIC_COLUMN
from connect_core.sdk.transforms import (
    KEY_COLUMN,
    TIMESTAMP_COLUMN,
    TOMBSTONE_COLUMN,
    DataError,
    Transformation,
    TransformConfig,
    is_value_column,
)
from connect_core.sdk.transforms import column as spark_column
from connect_core.transforms._parts import Part, arrow_fields, arrow_with, spark_fields, spark_type, spark_with

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import Column, DataFrame

__all__ = [
    "FieldList",
    "InsertFieldKey",
    "InsertFieldValue",
    "MaskFieldKey",
    "MaskFieldValue",
    "ReplaceFieldKey",
    "ReplaceFieldValue",
    "ValueToKey",
]


def _field_name(spec: str | None) -> str | None:
    """Kafka's field spec: a name, optionally suffixed `!` (required) or `?` (optional)."""
    if spec is None:
        return None
    return spec[:-1] if spec.endswith(("!", "?")) else spec


class InsertFieldConfig(TransformConfig):
    topic_field: str | None = Field(None, alias="topic.field", description="Field for the record's topic.")
    partition_field: str | None = Field(
        None, alias="partition.field", description="Field for the record's partition (null before it is in a topic)."
    )
    offset_field: str | None = Field(
        None, alias="offset.field", description="Field for the record's offset (null before it is in a topic)."
    )
    timestamp_field: str | None = Field(None, alias="timestamp.field", description="Field for the record's timestamp.")
    static_field: str | None = Field(None, alias="static.field", description="Field for a fixed value.")
    static_value: str | None = Field(None, alias="static.value", description="The fixed value of `static.field`.")


class _InsertField(Transformation[InsertFieldConfig]):
    config_model = InsertFieldConfig
    part: ClassVar[Part]
    doc = "Insert the record's topic, partition, offset or timestamp, or a fixed value, as fields."

    def _wanted(self) -> list[tuple[str, str]]:
        """(field, source) pairs: source is a record column or `static`."""
        c = self.config
        pairs = [
            (c.topic_field, TOPIC_COLUMN),
            (c.partition_field, PARTITION_COLUMN),
            (c.offset_field, OFFSET_COLUMN),
            (c.timestamp_field, TIMESTAMP_COLUMN),
            (c.static_field, "static"),
        ]
        return [(name, src) for spec, src in pairs if (name := _field_name(spec))]

    def spark(self, df: DataFrame) -> dict[str, Column]:
        from pyspark.sql import functions as F

        fields = spark_fields(df, self.part)
        kinds = {
            TOPIC_COLUMN: "string",
            PARTITION_COLUMN: "int",
            OFFSET_COLUMN: "bigint",
            TIMESTAMP_COLUMN: "timestamp",
        }
        for name, src in self._wanted():
            if src == "static":
                fields[name] = F.lit(self.config.static_value).cast("string")
            elif src in df.columns:
                fields[name] = F.col(src).cast(kinds[src])
            else:
                fields[name] = F.lit(None).cast(kinds[src])
        return spark_with(df, self.part, fields)

    def arrow(self, batch: pa.RecordBatch) -> dict[str, pa.Array]:
        import pyarrow as pa

        fields = arrow_fields(batch, self.part)
        kinds: dict[str, Any] = {
            TOPIC_COLUMN: pa.string(),
            PARTITION_COLUMN: pa.int32(),
            OFFSET_COLUMN: pa.int64(),
            TIMESTAMP_COLUMN: pa.timestamp("us", tz="UTC"),
        }
        n = batch.num_rows
        for name, src in self._wanted():
            if src == "static":
                fields[name] = pa.array([self.config.static_value] * n, pa.string())
            elif src in batch.schema.names:
                fields[name] = batch.column(src).cast(kinds[src])
            else:
                fields[name] = pa.nulls(n, kinds[src])
        return arrow_with(batch, self.part, fields)


class InsertFieldKey(_InsertField):
    part = "key"


class InsertFieldValue(_InsertField):
    part = "value"


# -- shared ---------------------------------------------------------------------

#: Kafka's LIST option type: a list, or a comma-separated string.
FieldList = Annotated[list[str], BeforeValidator(split_list)]

T = TypeVar("T")


def _check_value_names(part: Part, names: Iterable[str]) -> None:
    """A value field named as a record part (`__key`, `__topic`) would be read back as that part."""
    if part != "value":
        return
    reserved = [name for name in names if not is_value_column(name)]
    if reserved:
        raise DataError(
            f"value field name(s) {', '.join(f'`{n}`' for n in reserved)} are kept for record parts "
            "(`__key`, `__topic`, … and `__connect_…`); choose other names"
        )


def _missing(part: Part, wanted: Iterable[str], have: Iterable[str], option: str) -> DataError | None:
    """A DataError naming the fields of `wanted` the part lacks, or None."""
    present = set(have)
    absent = [name for name in wanted if name not in present]
    if not absent:
        return None
    listed = ", ".join(f"`{n}`" for n in present) or "none"
    return DataError(
        f"`{option}` names {', '.join(f'`{n}`' for n in absent)}, not a field of the record {part} "
        f"(its fields: {listed}); fix `{option}` or the records"
    )


# -- ReplaceField -----------------------------------------------------------------


def _check_renames(value: list[str]) -> list[str]:
    for mapping in value:
        old, sep, new = (s.strip() for s in mapping.partition(":"))
        if not sep or not old or not new or ":" in new:
            raise ValueError(f"invalid rename `{mapping}`: write `old:new` pairs, e.g. `id:user_id,ts:created_at`")
    return value


class ReplaceFieldConfig(TransformConfig):
    exclude: FieldList = Field(
        default_factory=list,
        alias="exclude",
        validation_alias=AliasChoices("exclude", "blacklist"),
        description="Fields to drop (Kafka's deprecated `blacklist` is accepted too). Takes precedence over `include`.",
    )
    include: FieldList = Field(
        default_factory=list,
        alias="include",
        validation_alias=AliasChoices("include", "whitelist"),
        description="Fields to keep (Kafka's deprecated `whitelist` is accepted too); empty keeps every field.",
    )
    renames: Annotated[FieldList, AfterValidator(_check_renames)] = Field(
        default_factory=list, description="Field renames, as `old:new` pairs (`id:user_id,ts:created_at`)."
    )

    def rename_map(self) -> dict[str, str]:
        return {old.strip(): new.strip() for old, _, new in (m.partition(":") for m in self.renames)}


class _ReplaceField(Transformation[ReplaceFieldConfig]):
    config_model = ReplaceFieldConfig
    part: ClassVar[Part]
    doc = "Drop, keep only, or rename fields (top-level ones); fields keep their order."

    def _replaced(self, fields: dict[str, T]) -> dict[str, T]:
        exclude, include, renames = set(self.config.exclude), set(self.config.include), self.config.rename_map()
        out: dict[str, T] = {}
        for name, value in fields.items():
            if name in exclude or (include and name not in include):
                continue
            new = renames.get(name, name)
            if new in out:
                raise DataError(f"`renames` gives two fields of the record {self.part} the name `{new}`; rename one")
            out[new] = value
        if self.part == "key" and not out:
            raise DataError("ReplaceField would leave the record key with no field; keep at least one")
        _check_value_names(self.part, out)
        return out

    def spark(self, df: DataFrame) -> dict[str, Column]:
        return spark_with(df, self.part, self._replaced(spark_fields(df, self.part)))

    def arrow(self, batch: pa.RecordBatch) -> dict[str, pa.Array]:
        return arrow_with(batch, self.part, self._replaced(arrow_fields(batch, self.part)))


class ReplaceFieldKey(_ReplaceField):
    part = "key"


class ReplaceFieldValue(_ReplaceField):
    part = "value"


# -- MaskField --------------------------------------------------------------------

# Unambiguous (each position has one way to match), so matching is linear in the text.
_INTEGER = re.compile(r"[+-]?[0-9]+")
_DECIMAL_NUMBER = re.compile(r"[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?")
_FLOAT_WORDS = {"NaN": math.nan, "Infinity": math.inf, "+Infinity": math.inf, "-Infinity": -math.inf}


class MaskFieldConfig(TransformConfig):
    fields: FieldList = Field(..., description="Fields to mask: a non-null value becomes its type's empty value.")
    replacement: str | None = Field(
        None,
        description=(
            "Mask with this value instead of the empty one, converted to the field's type (numeric and string "
            "fields only, as in Kafka)."
        ),
    )

    @field_validator("fields")
    @classmethod
    def _some_fields(cls, value: list[str]) -> list[str]:
        if not value:
            raise ValueError("name at least one field to mask (`fields=ssn,card`)")
        return value

    @field_validator("replacement")
    @classmethod
    def _non_empty(cls, value: str | None) -> str | None:
        if value == "":
            raise ValueError("`replacement` must not be empty; leave it unset to mask with the type's empty value")
        return value


def _empty_value(kind: pa.DataType) -> Any:
    """Kafka's mask of a value of Arrow type `kind`: its type's empty value (epoch for dates and times)."""
    import pyarrow as pa

    t = pa.types
    if t.is_integer(kind):
        return 0
    if t.is_floating(kind):
        return 0.0
    if t.is_decimal(kind):
        return decimal.Decimal(0)
    if t.is_boolean(kind):
        return False
    if t.is_string(kind) or t.is_large_string(kind):
        return ""
    if t.is_binary(kind) or t.is_large_binary(kind):
        return b""
    if t.is_date(kind):
        return dt.date(1970, 1, 1)
    if t.is_timestamp(kind):
        return 0
    if t.is_list(kind) or t.is_large_list(kind) or t.is_map(kind):
        return []
    raise ValueError(f"cannot mask a value of type {kind}")


def _replacement_value(kind: pa.DataType, text: str) -> Any:
    """`text` as a value of the numeric or string Arrow type `kind`; ValueError if it is not one."""
    import pyarrow as pa

    text = text.strip() if not pa.types.is_string(kind) else text
    if pa.types.is_integer(kind):
        bits = kind.bit_width
        if _INTEGER.fullmatch(text) and -(2 ** (bits - 1)) <= int(text) < 2 ** (bits - 1):
            return int(text)
        raise ValueError(f"`{text}` is not a {bits}-bit integer")
    if pa.types.is_floating(kind):
        if text in _FLOAT_WORDS:
            return _FLOAT_WORDS[text]
        if _DECIMAL_NUMBER.fullmatch(text):
            return float(text)
        raise ValueError(f"`{text}` is not a number")
    if pa.types.is_decimal(kind):
        return _decimal_value(kind, text)
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return text
    raise ValueError(f"a custom replacement only masks numeric and string fields, not {kind}")


def _decimal_value(kind: Any, text: str) -> decimal.Decimal:
    if not _DECIMAL_NUMBER.fullmatch(text):
        raise ValueError(f"`{text}` is not a number")
    value = decimal.Decimal(text)
    scaled = value.quantize(decimal.Decimal(1).scaleb(-kind.scale), context=decimal.Context(prec=80))
    if scaled != value or len(scaled.as_tuple().digits) > kind.precision:
        raise ValueError(f"`{text}` does not fit decimal({kind.precision},{kind.scale}) without rounding")
    return scaled


class _MaskField(Transformation[MaskFieldConfig]):
    config_model = MaskFieldConfig
    part: ClassVar[Part]
    doc = 'Replace the values of fields with their type\'s empty value (0, false, "", epoch) or a replacement.'

    def _mask_value(self, name: str, kind: pa.DataType) -> Any:
        """What a non-null `name` of Arrow type `kind` becomes; DataError if it cannot be masked so."""
        try:
            if self.config.replacement is None:
                return _empty_value(kind)
            return _replacement_value(kind, self.config.replacement)
        except ValueError as exc:
            raise DataError(
                f"cannot mask field `{name}` of the record {self.part}: {exc}; remove it from `fields`"
                + (" or change `replacement`" if self.config.replacement is not None else "")
            ) from exc

    def _check(self, have: Iterable[str]) -> None:
        problem = _missing(self.part, self.config.fields, have, "fields")
        if problem is not None:
            raise problem

    def spark(self, df: DataFrame) -> dict[str, Column]:
        from pyspark.sql import functions as F
        from pyspark.sql.pandas.types import to_arrow_type

        fields = spark_fields(df, self.part)
        self._check(fields)
        for name in dict.fromkeys(self.config.fields):
            kind = spark_type(df, self.part, name)
            try:
                arrow_kind = to_arrow_type(kind, timezone="UTC")
            except Exception as exc:  # a Spark type Arrow has no counterpart for
                raise DataError(f"cannot mask field `{name}` of type {kind.simpleString()}") from exc
            value = self._mask_value(name, arrow_kind)
            fields[name] = F.when(fields[name].isNotNull(), _spark_literal(value, kind))
        return spark_with(df, self.part, fields)

    def arrow(self, batch: pa.RecordBatch) -> dict[str, pa.Array]:
        import pyarrow as pa
        import pyarrow.compute as pc

        fields = arrow_fields(batch, self.part)
        self._check(fields)
        for name in dict.fromkeys(self.config.fields):
            column = fields[name]
            value = self._mask_value(name, column.type)
            fields[name] = pc.if_else(pc.is_valid(column), pa.scalar(value, column.type), pa.scalar(None, column.type))
        return arrow_with(batch, self.part, fields)


def _spark_literal(value: Any, kind: Any) -> Column:
    """`value` (as `_empty_value` or `_replacement_value` gave it) as a Spark literal of type `kind`."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import ArrayType, BinaryType, MapType, TimestampNTZType, TimestampType

    if isinstance(kind, ArrayType):
        return F.array().cast(kind)
    if isinstance(kind, MapType):
        return F.create_map().cast(kind)
    if isinstance(kind, TimestampType):
        return F.timestamp_micros(F.lit(value))
    if isinstance(kind, TimestampNTZType):
        return F.lit("1970-01-01 00:00:00").cast(kind)
    if isinstance(kind, BinaryType):
        return F.lit(bytearray(value)).cast(kind)
    return F.lit(value).cast(kind)


class MaskFieldKey(_MaskField):
    part = "key"


class MaskFieldValue(_MaskField):
    part = "value"


# -- ValueToKey -------------------------------------------------------------------


class ValueToKeyConfig(TransformConfig):
    fields: FieldList = Field(..., description="Value fields that make up the new key (a struct), in this order.")

    @field_validator("fields")
    @classmethod
    def _some_distinct_fields(cls, value: list[str]) -> list[str]:
        if not value:
            raise ValueError("name at least one value field for the key (`fields=id`)")
        twice = sorted({name for name in value if value.count(name) > 1})
        if twice:
            raise ValueError(f"{', '.join(f'`{n}`' for n in twice)} listed twice; a key field appears once")
        return value


class ValueToKey(Transformation[ValueToKeyConfig]):
    """The key becomes a struct of value fields. A tombstone (`__tombstone`: its value is null) gets a
    null key: Kafka fails such a record, as it has no value to take the key from."""

    config_model = ValueToKeyConfig
    doc = "Replace the record key with a struct of fields of the value."

    def _check(self, have: Iterable[str]) -> None:
        problem = _missing("value", self.config.fields, have, "fields")
        if problem is not None:
            raise problem

    def spark(self, df: DataFrame) -> dict[str, Column]:
        from pyspark.sql import functions as F

        value = spark_fields(df, "value")
        self._check(value)
        key = F.struct(*[value[name].alias(name) for name in self.config.fields])
        if TOMBSTONE_COLUMN in df.columns:
            key = F.when(F.coalesce(F.col(TOMBSTONE_COLUMN), F.lit(False)), F.lit(None)).otherwise(key)
        out = {name: spark_column(name) for name in df.columns if not is_value_column(name)}
        return {**value, **out, KEY_COLUMN: key}

    def arrow(self, batch: pa.RecordBatch) -> dict[str, pa.Array]:
        import pyarrow as pa
        import pyarrow.compute as pc

        value = arrow_fields(batch, "value")
        self._check(value)
        tombstone = None
        if TOMBSTONE_COLUMN in batch.schema.names:
            tombstone = pc.fill_null(batch.column(TOMBSTONE_COLUMN), False)
        key = pa.StructArray.from_arrays(
            [value[name] for name in self.config.fields], names=list(self.config.fields), mask=tombstone
        )
        out = {name: batch.column(name) for name in batch.schema.names if not is_value_column(name)}
        return {**value, **out, KEY_COLUMN: key}
