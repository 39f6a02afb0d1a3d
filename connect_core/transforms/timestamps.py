"""Kafka's TimestampConverter: a field (or the whole key or value) converted between a string of a
Java date pattern, a Unix time, a date, a time of day and a timestamp.

The input's kind comes from the column's type: a string is parsed with `format`, an integer is a
Unix time in `unix.precision`, a date is its midnight, a timestamp is itself (one without a zone
is read as UTC). Every time is in UTC. The output is, by `target.type`:

| `target.type` | output                                                           |
|---------------|------------------------------------------------------------------|
| `string`      | string, formatted with `format`                                  |
| `unix`        | long, in `unix.precision` (floored: -0.5 s is -1 in seconds)      |
| `Date`        | date                                                             |
| `Time`        | timestamp on 1970-01-01 (Kafka's `Time` is a `java.util.Date` too) |
| `Timestamp`   | timestamp                                                        |

A string that does not parse is an error of its record, as in Kafka: `errors_spark`/`errors_arrow`
flag it, and the runtime fails the run or, with `errors.tolerance=all`, sets the record aside (its
converted value is null). Times keep microseconds (Kafka's `java.util.Date` has milliseconds). With `field` empty the whole
part is converted: the key column itself, or the value's one column (a value of several fields
needs `field`). Nested field paths (Kafka 3.8's `field.syntax.version=V2`) are not supported.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import Field, ValidationInfo, field_validator

from connect_core.sdk.transforms import (
    KEY_COLUMN,
    DataError,
    Transformation,
    TransformConfig,
    column,
    is_value_column,
)
from connect_core.transforms import _javatime
from connect_core.transforms._parts import Part, arrow_fields, arrow_with, spark_fields, spark_type, spark_with

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import Column, DataFrame

__all__ = ["TimestampConverterKey", "TimestampConverterValue"]

Target = Literal["string", "unix", "Date", "Time", "Timestamp"]
Precision = Literal["seconds", "milliseconds", "microseconds", "nanoseconds"]

_SPARK_TYPES = {"string": "string", "unix": "bigint", "Date": "date", "Time": "timestamp", "Timestamp": "timestamp"}
#: microseconds per unit of `unix.precision` (nanoseconds are divided instead)
_MICROS = {"seconds": 1_000_000, "milliseconds": 1_000, "microseconds": 1}
_DAY_MICROS = 86_400_000_000


class TimestampConverterConfig(TransformConfig):
    field: str = Field("", description="The field to convert; empty: the whole key or value is the timestamp.")
    target_type: Target = Field(
        alias="target.type", description="What to convert to: string, unix, Date, Time or Timestamp."
    )
    format: str | None = Field(
        None,
        validate_default=True,
        description=(
            "Java date pattern (yyyy, yy, MM, dd, HH, mm, ss, S…, quoted text) of string timestamps: how the "
            "input is parsed, or the output formatted. Needed when `target.type` is string."
        ),
    )
    unix_precision: Precision = Field(
        "milliseconds",
        alias="unix.precision",
        description="The unit of Unix times, read or written: seconds, milliseconds, microseconds or nanoseconds.",
    )

    @field_validator("format")
    @classmethod
    def _format(cls, value: str | None, info: ValidationInfo) -> str | None:
        if not value:
            if info.data.get("target_type") == "string":
                raise ValueError("a `format` is needed when `target.type` is string")
            return None
        return _javatime.check_pattern(value)


class _TimestampConverter(Transformation[TimestampConverterConfig]):
    config_model = TimestampConverterConfig
    part: ClassVar[Part]
    doc = "Convert a timestamp field between a formatted string, a Unix time, a Date, a Time and a Timestamp."

    def _need_format(self) -> str:
        if self.config.format is None:
            raise DataError(f"{self._what()} is a string: set `format` to parse it")
        return self.config.format

    def _what(self) -> str:
        return f"field `{self.config.field}`" if self.config.field else f"the record {self.part}"

    def _unsupported(self, kind: object) -> DataError:
        return DataError(
            f"{self._what()} is of type {kind}: TimestampConverter reads strings, integers (Unix times), "
            "dates and timestamps"
        )

    # -- Spark ------------------------------------------------------------------

    def _spark_target(self, df: DataFrame) -> tuple[Column, Any, Callable[[Column], dict[str, Column]]]:
        """(the column to convert, its type, the output columns given its converted value)."""

        field = self.config.field
        if field:
            fields = spark_fields(df, self.part)
            if field not in fields:
                raise DataError(f"the record {self.part} has no field `{field}`")
            return (
                fields[field],
                spark_type(df, self.part, field),
                lambda new: spark_with(df, self.part, {**fields, field: new}),
            )
        if self.part == "key":
            name = KEY_COLUMN
        else:
            names = [n for n in df.columns if is_value_column(n)]
            if len(names) != 1:
                raise DataError(f"the record value has {len(names)} fields: set `field` to the one to convert")
            name = names[0]
        return (
            column(name),
            df.schema[name].dataType,
            lambda new: {n: new if n == name else column(n) for n in df.columns},
        )

    def _spark_instant(self, col: Column, kind: Any) -> Column:
        from pyspark.sql import functions as F
        from pyspark.sql import types as T

        if isinstance(kind, T.StringType):
            return _javatime.parse_spark(col, self._need_format())
        if isinstance(kind, T.ByteType | T.ShortType | T.IntegerType | T.LongType):
            precision = self.config.unix_precision
            if precision == "seconds":
                return F.timestamp_seconds(col.cast("bigint"))
            if precision == "milliseconds":
                return F.timestamp_millis(col.cast("bigint"))
            if precision == "microseconds":
                return F.timestamp_micros(col.cast("bigint"))
            return F.timestamp_micros(F.floor(col.cast("decimal(20,0)") / 1000).cast("bigint"))
        if isinstance(kind, T.DateType):
            return F.timestamp_seconds(F.unix_date(col).cast("bigint") * 86_400)
        if isinstance(kind, T.TimestampType):
            return col
        if isinstance(kind, T.TimestampNTZType):
            return _javatime.from_utc_wall_spark(col.cast("timestamp"))
        raise self._unsupported(kind.simpleString())

    def _spark_output(self, t: Column) -> Column:
        from pyspark.sql import functions as F

        target = self.config.target_type
        if target == "Timestamp":
            return t
        if target == "Date":
            return F.to_date(_javatime.utc_wall_spark(t))
        if target == "Time":
            return F.timestamp_micros(F.pmod(F.unix_micros(t), F.lit(_DAY_MICROS)))
        if target == "string":
            return _javatime.format_spark(t, self._need_format())
        precision = self.config.unix_precision
        if precision == "seconds":
            return F.unix_seconds(t)
        if precision == "milliseconds":
            return F.unix_millis(t)
        if precision == "microseconds":
            return F.unix_micros(t)
        return F.unix_micros(t) * 1000

    def spark(self, df: DataFrame) -> dict[str, Column]:
        from pyspark.sql import functions as F
        from pyspark.sql import types as T

        col, kind, put = self._spark_target(df)
        if isinstance(kind, T.NullType):  # nothing to convert, but the type is the target's
            return put(F.lit(None).cast(_SPARK_TYPES[self.config.target_type]))
        return put(self._spark_output(self._spark_instant(col, kind)))

    def errors_spark(self, df: DataFrame) -> Column | None:
        """True for the records whose string did not parse (their result is null); None: none can fail."""
        from pyspark.sql import types as T

        col, kind, _ = self._spark_target(df)
        if not isinstance(kind, T.StringType):
            return None
        return col.isNotNull() & _javatime.parse_spark(col, self._need_format()).isNull()

    # -- Arrow ------------------------------------------------------------------

    def _arrow_target(self, batch: pa.RecordBatch) -> tuple[pa.Array, Callable[[pa.Array], dict[str, pa.Array]]]:
        field = self.config.field
        if field:
            fields = arrow_fields(batch, self.part)
            if field not in fields:
                raise DataError(f"the record {self.part} has no field `{field}`")
            return fields[field], lambda new: arrow_with(batch, self.part, {**fields, field: new})
        if self.part == "key":
            name = KEY_COLUMN
        else:
            names = [n for n in batch.schema.names if is_value_column(n)]
            if len(names) != 1:
                raise DataError(f"the record value has {len(names)} fields: set `field` to the one to convert")
            name = names[0]
        return batch.column(name), lambda new: {n: new if n == name else batch.column(n) for n in batch.schema.names}

    def _arrow_instant(self, array: pa.Array) -> pa.Array:
        import pyarrow as pa
        import pyarrow.compute as pc

        kind = array.type
        utc = pa.timestamp("us", tz="UTC")
        if pa.types.is_string(kind) or pa.types.is_large_string(kind):
            return _javatime.parse_arrow(array, self._need_format())
        if pa.types.is_signed_integer(kind):
            ints = array.cast(pa.int64())
            precision = self.config.unix_precision
            if precision != "nanoseconds":
                return pc.multiply_checked(ints, _MICROS[precision]).cast(utc)
            quotient = pc.divide(ints, 1000)  # truncates; floor it as Spark does
            below = pc.less(pc.subtract(ints, pc.multiply(quotient, 1000)), 0)
            return pc.subtract(quotient, pc.if_else(below, 1, 0)).cast(utc)
        if pa.types.is_date32(kind):
            return pc.multiply_checked(array.cast(pa.int32()).cast(pa.int64()), _DAY_MICROS).cast(utc)
        if pa.types.is_timestamp(kind):
            if kind.tz is None:  # a time without a zone is UTC
                return array.cast(pa.timestamp("us")).cast(utc)
            return array.cast(utc)
        raise self._unsupported(kind)

    def _arrow_output(self, t: pa.Array) -> pa.Array:
        import pyarrow as pa
        import pyarrow.compute as pc

        target = self.config.target_type
        if target == "Timestamp":
            return t
        if target == "Date":
            return t.cast(pa.date32())
        if target == "Time":
            day = pc.floor_temporal(t, unit="day")
            return pc.subtract(t.cast(pa.int64()), day.cast(pa.int64())).cast(t.type)
        if target == "string":
            return _javatime.format_arrow(t, self._need_format())
        precision = self.config.unix_precision
        if precision == "nanoseconds":
            return pc.multiply_checked(t.cast(pa.int64()), 1000)
        unit = {"seconds": "second", "milliseconds": "millisecond", "microseconds": "microsecond"}[precision]
        return pc.divide(pc.floor_temporal(t, unit=unit).cast(pa.int64()), _MICROS[precision])

    def arrow(self, batch: pa.RecordBatch) -> dict[str, pa.Array]:
        import pyarrow as pa

        array, put = self._arrow_target(batch)
        if pa.types.is_null(array.type):
            spark_to_arrow = {"string": pa.string(), "bigint": pa.int64(), "date": pa.date32()}
            kind = spark_to_arrow.get(_SPARK_TYPES[self.config.target_type], pa.timestamp("us", tz="UTC"))
            return put(pa.nulls(len(array), kind))
        return put(self._arrow_output(self._arrow_instant(array)))

    def errors_arrow(self, batch: pa.RecordBatch) -> pa.Array | None:
        """The same as `errors_spark` over one record batch."""
        import pyarrow as pa
        import pyarrow.compute as pc

        array, _ = self._arrow_target(batch)
        if not (pa.types.is_string(array.type) or pa.types.is_large_string(array.type)):
            return None
        return pc.and_(array.is_valid(), _javatime.parse_arrow(array, self._need_format()).is_null())


class TimestampConverterKey(_TimestampConverter):
    part = "key"


class TimestampConverterValue(_TimestampConverter):
    part = "value"
