"""Kafka's Cast: fields (or a primitive key or value) to another type, on both paths, failing a record
whose value does not convert (rather than wrapping or nulling it)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import Field, field_validator

from connect_core.sdk.transforms import (
    KEY_COLUMN,
    DataError,
    Transformation,
    TransformConfig,
)
from connect_core.sdk.transforms import column as spark_column
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


# -- Cast -------------------------------------------------------------------------

#: Kafka's Cast target types, by their spec names, with their Spark names.
CAST_TYPES = {
    "int8": "tinyint",
    "int16": "smallint",
    "int32": "int",
    "int64": "bigint",
    "float32": "float",
    "float64": "double",
    "boolean": "boolean",
    "string": "string",
}
_INT_BITS = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}
_FLOATS = ("float32", "float64")
#: Source kinds Cast reads, besides the targets: decimals (to anything), dates and timestamps (to string).
_SOURCES = (*CAST_TYPES, "decimal", "date", "timestamp", "null")
_WHOLE = ""  # the spec's key for a type that casts the whole part

# Java's number syntax (Integer.parseInt; Double.parseDouble without hex), each unambiguous so a
# match is linear in the text. Java trims characters up to U+0020 around a floating-point number.
# `\z`, not `$`: Java's `$` also matches before a final line break, RE2's (Arrow's) does not.
_INT_TEXT = r"^[+-]?[0-9]+\z"
_FLOAT_TEXT = r"^[\x00-\x20]*[+-]?(NaN|Infinity|([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?[fFdD]?)[\x00-\x20]*\z"
_FLOAT_NOISE = r"^[\x00-\x20]+|[fFdD]?[\x00-\x20]*\z"  # what Java ignores, and Spark and Arrow may not


def _parse_spec(entries: list[str]) -> dict[str, str]:
    """`field:type` entries (or one `type`) as {field: type} ({"": type} for the whole part)."""
    if not entries:
        raise ValueError("give `field:type` entries (`id:int64,price:float64`) or one type for the whole part")
    casts: dict[str, str] = {}
    for entry in entries:
        parts = [p.strip() for p in entry.split(":")]
        if len(parts) > 2 or (len(parts) == 2 and not parts[0]):
            raise ValueError(f"`{entry}` is not `field:type` (e.g. `price:float64`)")
        field, kind = (_WHOLE, parts[0]) if len(parts) == 1 else (parts[0], parts[1])
        if kind.lower() not in CAST_TYPES:
            raise ValueError(f"`{entry}`: unknown type `{kind}`; the types are {', '.join(CAST_TYPES)}")
        if field in casts:
            raise ValueError(f"`{field or kind}` is cast twice; give each field one type")
        casts[field] = kind.lower()
    if _WHOLE in casts and len(casts) > 1:
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


def _spark_kind(kind: Any) -> str:
    """The Cast source kind of a Spark type (a CAST_TYPES name, `decimal`, `date`, …)."""
    from pyspark.sql import types as T

    kinds = {
        T.ByteType: "int8",
        T.ShortType: "int16",
        T.IntegerType: "int32",
        T.LongType: "int64",
        T.FloatType: "float32",
        T.DoubleType: "float64",
        T.BooleanType: "boolean",
        T.StringType: "string",
        T.DecimalType: "decimal",
        T.DateType: "date",
        T.TimestampType: "timestamp",
        T.NullType: "null",
    }
    return next((name for cls, name in kinds.items() if isinstance(kind, cls)), kind.simpleString())


def _arrow_kind(kind: Any) -> str:
    import pyarrow as pa

    t = pa.types
    ints = {8: "int8", 16: "int16", 32: "int32", 64: "int64"}
    if t.is_signed_integer(kind):
        return ints[kind.bit_width]
    checks = [
        (t.is_float32, "float32"),
        (t.is_float64, "float64"),
        (t.is_boolean, "boolean"),
        (lambda k: t.is_string(k) or t.is_large_string(k), "string"),
        (t.is_decimal, "decimal"),
        (t.is_date32, "date"),
        (lambda k: t.is_timestamp(k) and k.tz is not None, "timestamp"),
        (t.is_null, "null"),
    ]
    return next((name for check, name in checks if check(kind)), str(kind))


def _check_cast(part: Part, field: str, source: str, target: str) -> None:
    supported = source in _SOURCES and (source not in ("date", "timestamp") or target == "string")
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
    if target in _INT_BITS:
        return not (source in _INT_BITS and _INT_BITS[source] <= _INT_BITS[target])
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
        whole = casts.get(_WHOLE)
        if self.part == "key" and key_kind is None:
            return {}  # no key to cast
        if whole is None:
            if self.part == "key" and key_kind != "struct":
                raise DataError(f"the record key is a {key_kind}, not a struct: cast it whole (`spec=int64`)")
            return {name: kind for name, kind in casts.items() if name in fields}
        if self.part == "key":
            if key_kind == "struct":
                raise DataError("the record key is a struct: cast its fields (`spec=field:type`), not the whole key")
            return {_WHOLE: whole}
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
        key_kind = None if key_type is None else "struct" if key_is_struct else _spark_kind(key_type)
        targets = self._targets(list(fields), key_kind)
        failures: list[Column] = []
        for name, target in targets.items():
            column = F.col(KEY_COLUMN) if name == _WHOLE else fields[name]
            source = _spark_kind(key_type if name == _WHOLE else spark_type(df, self.part, name))
            _check_cast(self.part, name, source, target)
            cast = _spark_cast(column, source, target)
            if _can_fail(source, target):
                failures.append(column.isNotNull() & cast.isNull())
            if name == _WHOLE:
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
        key_kind = None if key_type is None else "struct" if key_is_struct else _arrow_kind(key_type)
        targets = self._targets(list(fields), key_kind)
        failures: list[pa.Array] = []
        for name, target in targets.items():
            column = batch.column(KEY_COLUMN) if name == _WHOLE else fields[name]
            source = _arrow_kind(column.type)
            _check_cast(self.part, name, source, target)
            cast = _arrow_cast(column, source, target)
            if _can_fail(source, target):
                failures.append(pc.and_(pc.is_valid(column), pc.is_null(cast)))
            if name == _WHOLE:
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


# -- Cast on Spark ----------------------------------------------------------------


def _spark_cast(column: Column, source: str, target: str) -> Column:
    """`column` (of Cast kind `source`) as `target`: null where it has no such value."""
    from pyspark.sql import functions as F

    spark_name = CAST_TYPES[target]
    if source == target:
        return column
    if source == "null":
        return F.lit(None).cast(spark_name)
    if target == "string":
        if source in _FLOATS:
            return _spark_java_float_text(column, single=source == "float32")
        return _spark_iso_instant(column) if source == "timestamp" else column.cast("string")
    if target == "boolean":
        if source == "string":
            return F.lower(column) == F.lit("true")
        if source in _FLOATS:  # Spark orders NaN above every number: it would pass `>= 1`
            return F.when(F.isnan(column), F.lit(False)).otherwise(F.abs(column) >= 1)
        if source == "decimal":
            return F.abs(column) >= 1
        return column != 0  # not abs: the smallest integer has no absolute value of its type
    if source == "string":
        if target in _INT_BITS:
            return F.when(column.rlike(_INT_TEXT), column).try_cast(spark_name)
        clean = F.regexp_replace(column, _FLOAT_NOISE, "")
        return F.when(column.rlike(_FLOAT_TEXT), clean).try_cast(spark_name)
    return column.try_cast(spark_name)


def _spark_java_float_text(column: Column, *, single: bool) -> Column:
    """Floats as JDK 19+'s `Double/Float.toString` writes them, on any JVM.

    Spark's cast writes the JVM's `toString`. Up to JDK 18 that prints every digit of a whole number
    from 2^53 (2^24 for a float) to 2^63 (`7.6546404813290762E18`, not the shortest
    `7.654640481329076E18`), so those are written here from their exact integer instead: the
    multiple of the largest power of ten that still reads back as the same float."""
    from pyspark.sql import functions as F

    bits = 24 if single else 53  # significand bits: from 2^bits up, every float is a whole number
    big = (F.abs(column) >= float(2**bits)) & (F.abs(column) < float(2**63))
    whole = F.abs(column).cast("bigint")  # exact: whole numbers below 2^63
    # From 2^k up (k + 1 binary digits) a float's neighbours are 2^(k-bits+1) apart.
    ulp = F.call_function("shiftleft", F.lit(1).cast("bigint"), F.length(F.bin(whole)) - bits)
    digits = _let(F.struct(whole.cast("decimal(20,0)").alias("n"), ulp.cast("decimal(20,0)").alias("ulp")), _shortest)
    text = _let(
        digits.cast("string"),
        lambda t: _let(
            F.regexp_replace(t, "0+$", ""),
            lambda d: F.concat(
                F.when(column < 0, F.lit("-")).otherwise(F.lit("")),
                F.substring(d, 1, 1),
                F.lit("."),
                F.when(F.length(d) > 1, F.substring(d, 2, 100)).otherwise(F.lit("0")),
                F.lit("E"),
                (F.length(t) - 1).cast("string"),
            ),
        ),
    )
    return F.when(big, text).otherwise(column.cast("string"))


def _let(value: Column, body: Any) -> Column:
    """`body(value)`, with `value` computed once (a lambda variable: Column expressions have no `let`)."""
    from pyspark.sql import functions as F

    return F.transform(F.array(value), body).getItem(0)


def _shortest(v: Column) -> Column:
    """Of the decimals that read back as the float `v.n` (whose neighbours are `v.ulp` away), the one
    with the fewest digits (the closest of two): the coarsest power of ten with a multiple in reach."""
    from pyspark.sql import functions as F

    n, ulp = v["n"], v["ulp"]
    half, even = ulp / 2, F.pmod(n, ulp * 2) == 0  # a tie reads back as the float with an even significand

    def reads_back(distance: Column) -> Column:
        return (distance < half) | ((distance == half) & even)

    def candidate(step: Column) -> Column:
        low = n - F.pmod(n, step)
        high = low + step
        pick_low = reads_back(n - low) & (~reads_back(high - n) | (n - low <= high - n))
        return F.when(pick_low, low).when(reads_back(high - n), high)

    steps = F.array(*[F.lit(10**j).cast("decimal(20,0)") for j in range(18, -1, -1)])
    return F.filter(F.transform(steps, candidate), lambda c: c.isNotNull()).getItem(0)


def _spark_iso_instant(column: Column) -> Column:
    """A timestamp as `yyyy-MM-dd'T'HH:mm:ss.SSS'Z'` in UTC, whatever the session's time zone (from
    its microseconds since the epoch, as `date_format` would use the session's zone)."""
    from pyspark.sql import functions as F

    day = 86_400_000_000
    micros = F.unix_micros(column)
    of_day = F.pmod(micros, F.lit(day))
    days = F.round((micros - of_day) / F.lit(day)).cast("int")  # an exact multiple of a day
    millis = F.floor(of_day / F.lit(1000))
    text = F.format_string(
        "%sT%02d:%02d:%02d.%03dZ",
        F.date_from_unix_date(days).cast("string"),
        F.floor(millis / 3_600_000),
        F.pmod(F.floor(millis / 60_000), F.lit(60)),
        F.pmod(F.floor(millis / 1000), F.lit(60)),
        F.pmod(millis, F.lit(1000)),
    )
    return F.when(column.isNotNull(), text)  # format_string writes a null as `null`


# -- Cast on Arrow ----------------------------------------------------------------


def _arrow_type(target: str) -> Any:
    import pyarrow as pa

    return {
        "int8": pa.int8(),
        "int16": pa.int16(),
        "int32": pa.int32(),
        "int64": pa.int64(),
        "float32": pa.float32(),
        "float64": pa.float64(),
        "boolean": pa.bool_(),
        "string": pa.string(),
    }[target]


def _arrow_cast(column: pa.Array, source: str, target: str) -> pa.Array:
    """`_spark_cast` on Arrow: the same values, null where Spark's `try_cast` gives null."""
    import pyarrow as pa
    import pyarrow.compute as pc

    kind = _arrow_type(target)
    if source == target:
        return column
    if source == "null":
        return pa.nulls(len(column), kind)
    if target == "string":
        return _arrow_to_string(column, source)
    if target == "boolean":
        if source == "string":
            return pc.equal(pc.utf8_lower(column), "true")
        if source in _INT_BITS:
            return pc.not_equal(column, 0)
        return pc.greater_equal(pc.abs(column), 1)  # NaN compares false
    if target in _INT_BITS:
        return _arrow_to_int(column, source, target)
    if source == "string":
        valid = pc.match_substring_regex(column, _FLOAT_TEXT)
        clean = pc.replace_substring_regex(column, _FLOAT_NOISE, "")
        return pc.cast(pc.if_else(valid, clean, pa.scalar(None, pa.string())), kind)
    if source == "decimal":  # Arrow's decimal→float is not correctly rounded; parsing the digits is
        return pc.cast(_arrow_decimal_text(column), kind)
    return pc.cast(column, kind, safe=False)  # int→float rounds, float64→float32 may give ±inf: as Spark


def _int_range(target: str) -> tuple[int, int]:
    bits = _INT_BITS[target]
    return -(2 ** (bits - 1)), 2 ** (bits - 1) - 1


def _arrow_to_int(column: pa.Array, source: str, target: str) -> pa.Array:
    import pyarrow as pa
    import pyarrow.compute as pc

    kind = _arrow_type(target)
    low, high = _int_range(target)
    if source == "boolean":
        return pc.cast(column, kind)
    if source in _INT_BITS:
        valid = pc.and_(pc.greater_equal(column, low), pc.less_equal(column, high))
        return pc.cast(pc.if_else(valid, column, pa.scalar(None, column.type)), kind)
    if source == "decimal":
        whole = pc.trunc(column)
        valid = pc.and_(pc.greater_equal(whole, low), pc.less_equal(whole, high))
        return pc.cast(pc.if_else(valid, whole, pa.scalar(None, whole.type)), kind)
    if source in _FLOATS:
        return _arrow_float_to_int(pc.cast(column, pa.float64()), target)
    return _arrow_text_to_int(column, target)


def _arrow_float_to_int(column: pa.Array, target: str) -> pa.Array:
    """Spark's rule: the value fits when floor(x) <= max and ceil(x) >= min, compared as doubles (so
    2^63 fits int64, and becomes its maximum as Java's conversion saturates); then truncated."""
    import pyarrow as pa
    import pyarrow.compute as pc

    low, high = _int_range(target)
    valid = pc.and_(pc.less_equal(pc.floor(column), float(high)), pc.greater_equal(pc.ceil(column), float(low)))
    top = float(high) >= 2.0**63  # only int64's maximum is not a double: it rounds up to 2^63
    whole = pc.trunc(column)
    if top:
        whole = pc.min_element_wise(whole, math.nextafter(2.0**63, 0))
    out = pc.cast(pc.if_else(valid, whole, pa.scalar(None, pa.float64())), _arrow_type(target), safe=False)
    if top:
        saturated = pc.and_(valid, pc.greater_equal(column, 2.0**63))
        out = pc.if_else(saturated, pa.scalar(high, pa.int64()), out)
    return out


def _arrow_text_to_int(column: pa.Array, target: str) -> pa.Array:
    """Text in `parseInt` syntax as an integer; null where it is not, or out of range (decided on
    the digits, as Arrow's cast fails the whole array on one out-of-range number)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    low, high = _int_range(target)
    syntax = pc.match_substring_regex(column, _INT_TEXT)
    negative = pc.starts_with(column, "-")
    digits = pc.replace_substring_regex(column, r"^[+-]?0*", "")  # the magnitude, without leading zeros
    limit = pc.if_else(negative, str(-low), str(high))
    length = pc.utf8_length(digits)
    fits = pc.or_(
        pc.less(length, pc.utf8_length(limit)),
        pc.and_(pc.equal(length, pc.utf8_length(limit)), pc.less_equal(digits, limit)),
    )
    digits = pc.if_else(pc.equal(digits, ""), "0", digits)
    text = pc.if_else(negative, pc.binary_join_element_wise("-", digits, ""), digits)
    return pc.cast(pc.if_else(pc.and_(syntax, fits), text, pa.scalar(None, pa.string())), _arrow_type(target))


def _arrow_to_string(column: pa.Array, source: str) -> pa.Array:
    import pyarrow as pa
    import pyarrow.compute as pc

    if source in _FLOATS:
        return _arrow_java_floats(column, single=source == "float32")
    if source == "decimal":
        return _arrow_decimal_text(column)
    if source == "timestamp":
        utc = pc.cast(column, pa.timestamp(column.type.unit, tz="UTC"))
        millis = pc.cast(pc.floor_temporal(utc, unit="millisecond"), pa.timestamp("ms", tz="UTC"))
        return pc.binary_join_element_wise(pc.strftime(millis, format="%Y-%m-%dT%H:%M:%S"), "Z", "")
    return pc.cast(column, pa.string())


def _arrow_decimal_text(column: pa.Array) -> pa.Array:
    """Decimals in plain notation, as Spark writes them. Arrow writes Java's `BigDecimal.toString`,
    scientific below 1e-6 (`1.0E-7`): those few are rewritten one by one."""
    import pyarrow as pa
    import pyarrow.compute as pc

    text = pc.cast(column, pa.string())
    scientific = pc.fill_null(pc.match_substring(text, "E"), False)
    if not pc.any(scientific).as_py():
        return text
    # Per-row Python, only for the rows Arrow wrote in scientific notation (values below 1e-6).
    values, flags = column.to_pylist(), scientific.to_pylist()
    plain = [format(value, "f") if flag else None for value, flag in zip(values, flags, strict=True)]
    return pc.if_else(scientific, pa.array(plain, pa.string()), text)


def _arrow_java_floats(column: pa.Array, *, single: bool) -> pa.Array:
    """Floats as Java's `Float/Double.toString` writes them, as Spark's cast does. Arrow has no such
    format: each distinct value is formatted in Python (once, through a dictionary encoding)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    encoded = column.dictionary_encode()
    texts = [_java_float_text(v, single=single) for v in encoded.dictionary.to_pylist()]
    return pc.take(pa.array(texts, pa.string()), encoded.indices)


def _java_float_text(value: float, *, single: bool) -> str:
    """Java's `Double.toString` (`Float.toString` if `single`), JDK 19+: the shortest digits that read
    back as the value (two when one would do and another is closer), plain between 1e-3 and 1e7,
    else `d.dddE<exp>`."""
    import numpy as np

    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    number = np.float32(value) if single else np.float64(value)
    mantissa, _, exponent = np.format_float_scientific(number, unique=True, trim="-").partition("e")
    digits, exp = mantissa.lstrip("-").replace(".", ""), int(exponent)
    if len(digits) == 1:  # Java picks, of the two-digit decimals, the closest
        closest, _, closest_exp = f"{abs(float(number)):.1e}".partition("e")
        digits, exp = closest.replace(".", "").rstrip("0") or "0", int(closest_exp)
    sign = "-" if value < 0 else ""
    if 1e-3 <= abs(float(number)) < 1e7:
        if exp >= 0:
            whole, fraction = digits[: exp + 1].ljust(exp + 1, "0"), digits[exp + 1 :]
        else:
            whole, fraction = "0", "0" * (-exp - 1) + digits
        return f"{sign}{whole}.{fraction or '0'}"
    return f"{sign}{digits[0]}.{digits[1:] or '0'}E{exp}"
