"""Kafka's Cast: fields (or a primitive key or value) to another type, on both paths, failing a record
whose value does not convert (rather than wrapping or nulling it).

This module reads the config and decides what is cast; the casts themselves are Spark's
(`_cast_spark`) and Arrow's (`_cast_arrow`), which give the same values."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from pydantic import Field, field_validator

from connect_core.sdk.transforms import (
    KEY_COLUMN,
    DataError,
    Transformation,
    TransformConfig,
)
from connect_core.sdk.transforms import column as spark_column
from connect_core.transforms._cast_arrow import arrow_cast, arrow_kind
from connect_core.transforms._cast_spark import spark_cast, spark_kind
from connect_core.transforms._cast_types import CAST_TYPES, INT_BITS, SOURCES, WHOLE
from connect_core.transforms._parts import (
    Part,
    arrow_fields,
    arrow_key_type,
    arrow_replace,
    arrow_with,
    names_text,
    spark_fields,
    spark_key_type,
    spark_replace,
    spark_type,
    spark_with,
)
from connect_core.transforms.fields import FieldList

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import Column, DataFrame

__all__ = ["CAST_TYPES", "CastKey", "CastValue"]


def _parse_spec(entries: list[str]) -> dict[str, str]:
    """`field:type` entries (or one `type`) as {field: type} ({"": type} for the whole part)."""
    if not entries:
        raise ValueError("give `field:type` entries (`id:int64,price:float64`) or one type for the whole part")
    casts: dict[str, str] = {}
    for entry in entries:
        parts = [p.strip() for p in entry.split(":")]
        if len(parts) > 2 or (len(parts) == 2 and not parts[0]):
            raise ValueError(f"`{entry}` is not `field:type` (e.g. `price:float64`)")
        field, kind = (WHOLE, parts[0]) if len(parts) == 1 else (parts[0], parts[1])
        if kind.lower() not in CAST_TYPES:
            raise ValueError(f"`{entry}`: unknown type `{kind}`; the types are {', '.join(CAST_TYPES)}")
        if field in casts:
            raise ValueError(f"`{field or kind}` is cast twice; give each field one type")
        casts[field] = kind.lower()
    if WHOLE in casts and len(casts) > 1:
        raise ValueError("a type for the whole part (no `field:`) must be the only entry of `spec`")
    return casts


class CastConfig(TransformConfig):
    spec: FieldList = Field(
        ...,
        description=(
            "Casts: `field:type` entries (`id:int64,price:float64`), or a single type to cast a whole primitive "
            "key (or a value of one column). Types: int8, int16, int32, int64, float32, float64, boolean, string."
        ),
    )

    @field_validator("spec")
    @classmethod
    def _valid(cls, value: list[str]) -> list[str]:
        _parse_spec(value)
        return value

    def casts(self) -> dict[str, str]:
        return _parse_spec(self.spec)


def _check_cast(part: Part, field: str, source: str, target: str) -> None:
    supported = source in SOURCES and (source not in ("date", "timestamp") or target == "string")
    if not supported:
        where = f"field `{field}` of the record {part}" if field else f"the record {part}"
        raise DataError(
            f"cannot cast {where} from {source} to {target}: Cast reads numbers, booleans, strings and decimals "
            "(and dates and timestamps, to string only); drop it from `spec`"
        )


def _can_fail(source: str, target: str) -> bool:
    """Whether a non-null value may have no value of the target type (then the cast gives null)."""
    if source in ("null", "boolean") or source == target or target in ("string", "boolean"):
        return False
    if target in INT_BITS:
        return not (source in INT_BITS and INT_BITS[source] <= INT_BITS[target])
    return source == "string"  # to a float: only text can fail


class _Cast(Transformation[CastConfig]):
    """Casts fields (or a whole primitive key, or a value's single column) to Kafka's Cast types.

    What a cast gives, on both paths:

    - To an integer type: from an integer, the same number; from a float or decimal, the number
      truncated toward zero; from a boolean, 1 or 0; from a string, Java's `parseInt` syntax
      (`[+-]digits`, no blanks, no decimals). A number out of the type's range, NaN, infinity or any
      other text has no value. (Kafka wraps an out-of-range number around, as Java's narrowing does;
      here it fails instead of changing the number silently.)
    - To a float type: numbers and booleans (1.0/0.0) convert, rounding to the nearest float; a
      string must be Java's `parseDouble` syntax (blanks around it, an `f`/`d` suffix, `NaN`,
      `Infinity` allowed; hexadecimal floats are not).
    - To boolean: a string is true when it is `true` in any case, otherwise false (Java's
      `parseBoolean`: it never fails); a number is true when its integer part is not 0 (NaN is false).
    - To string: numbers as Java's `toString` (`1.0E10`, `0.001`, `1.0`: JDK 19+'s shortest digits),
      decimals in plain notation, booleans `true`/`false`, dates `yyyy-MM-dd`, timestamps
      `yyyy-MM-dd'T'HH:mm:ss.SSS'Z'` in UTC (Kafka's ISO 8601 format). On a JVM before 19 a few
      floats beyond 2^63 (`1.0E23`, which JDK 17 writes `9.999999999999999E22`) still differ in their
      last digit between Spark (the JVM's `toString`) and Arrow (the shortest digits).

    A value that has no value of the target type becomes null in `spark`/`arrow`, and
    `errors_spark`/`errors_arrow` flag its row (true where a non-null input gave null): the chain
    fails the record there, as Kafka does. Spec fields the part lacks are ignored,
    as Kafka ignores them.
    """

    config_model = CastConfig
    part: ClassVar[Part]
    doc = "Cast fields, or the whole key, to another primitive type (int8…int64, float32, float64, boolean, string)."

    # -- what is cast -------------------------------------------------------------------

    def _targets(self, fields: list[str], key_kind: str | None) -> dict[str, str]:
        """{field: target type} for the fields of the part this cast touches ("": the whole `__key`).
        `key_kind` is the key's Cast kind (`struct` for a struct), None when rows have no key."""
        casts = self.config.casts()
        whole = casts.get(WHOLE)
        if self.part == "key" and key_kind is None:
            return {}  # no key to cast
        if whole is None:
            if self.part == "key" and key_kind != "struct":
                raise DataError(f"the record key is a {key_kind}, not a struct: cast it whole (`spec=int64`)")
            return {name: kind for name, kind in casts.items() if name in fields}
        if self.part == "key":
            if key_kind == "struct":
                raise DataError("the record key is a struct: cast its fields (`spec=field:type`), not the whole key")
            return {WHOLE: whole}
        if len(fields) != 1:
            raise DataError(
                f"a whole-value cast needs a value of one column; the records have {len(fields)} "
                f"({names_text(fields)}): cast fields instead (`spec=field:{whole}`)"
            )
        return {fields[0]: whole}

    # -- Spark --------------------------------------------------------------------------

    def _spark_casts(self, df: DataFrame) -> tuple[dict[str, Column], list[Column]]:
        """The output columns, and per cast that may fail a column true where it did."""
        from pyspark.sql import functions as F
        from pyspark.sql.types import StructType

        key_type = spark_key_type(df)
        key_is_struct = isinstance(key_type, StructType)
        if self.part == "key" and not key_is_struct:
            fields: dict[str, Column] = {}
        else:
            fields = spark_fields(df, self.part)
        key_kind = None if key_type is None else "struct" if key_is_struct else spark_kind(key_type)
        targets = self._targets(list(fields), key_kind)
        failures: list[Column] = []
        for name, target in targets.items():
            column = F.col(KEY_COLUMN) if name == WHOLE else fields[name]
            source = spark_kind(key_type if name == WHOLE else spark_type(df, self.part, name))
            _check_cast(self.part, name, source, target)
            cast = spark_cast(column, source, target)
            if _can_fail(source, target):
                failures.append(column.isNotNull() & cast.isNull())
            if name == WHOLE:
                return spark_replace(df, KEY_COLUMN, cast), failures
            fields[name] = cast
        if self.part == "key" and not key_is_struct:
            return {n: spark_column(n) for n in df.columns}, failures
        return spark_with(df, self.part, fields), failures

    def spark(self, df: DataFrame) -> dict[str, Column]:
        return self._spark_casts(df)[0]

    def errors_spark(self, df: DataFrame) -> Column | None:
        """True for the rows where a non-null value had no value of its target type (and became null);
        None when no cast of this batch's types can fail."""
        failures = self._spark_casts(df)[1]
        if not failures:
            return None
        out = failures[0]
        for failure in failures[1:]:
            out = out | failure
        return out

    # -- Arrow --------------------------------------------------------------------------

    def _arrow_casts(self, batch: pa.RecordBatch) -> tuple[dict[str, pa.Array], list[pa.Array]]:
        import pyarrow as pa
        import pyarrow.compute as pc

        key_type = arrow_key_type(batch.schema)
        key_is_struct = key_type is not None and pa.types.is_struct(key_type)
        fields = {} if self.part == "key" and not key_is_struct else arrow_fields(batch, self.part)
        key_kind = None if key_type is None else "struct" if key_is_struct else arrow_kind(key_type)
        targets = self._targets(list(fields), key_kind)
        failures: list[pa.Array] = []
        for name, target in targets.items():
            column = batch.column(KEY_COLUMN) if name == WHOLE else fields[name]
            source = arrow_kind(column.type)
            _check_cast(self.part, name, source, target)
            cast = arrow_cast(column, source, target)
            if _can_fail(source, target):
                failures.append(pc.and_(pc.is_valid(column), pc.is_null(cast)))
            if name == WHOLE:
                return arrow_replace(batch, KEY_COLUMN, cast), failures
            fields[name] = cast
        if self.part == "key" and not key_is_struct:
            return {n: batch.column(n) for n in batch.schema.names}, failures
        return arrow_with(batch, self.part, fields), failures

    def arrow(self, batch: pa.RecordBatch) -> dict[str, pa.Array]:
        return self._arrow_casts(batch)[0]

    def errors_arrow(self, batch: pa.RecordBatch) -> pa.Array | None:
        """`errors_spark` over one Arrow record batch."""
        import pyarrow.compute as pc

        failures = self._arrow_casts(batch)[1]
        if not failures:
            return None
        out = failures[0]
        for failure in failures[1:]:
            out = pc.or_(out, failure)
        return out


class CastKey(_Cast):
    part = "key"


class CastValue(_Cast):
    part = "value"
