"""Cast on Spark: Column expressions giving the values `_cast_arrow` gives on Arrow."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from connect_core.transforms._cast_types import CAST_TYPES, FLOAT_NOISE, FLOAT_TEXT, FLOATS, INT_BITS, INT_TEXT

if TYPE_CHECKING:
    from pyspark.sql import Column

__all__ = ["spark_cast", "spark_kind"]


def spark_kind(kind: Any) -> str:
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


def spark_cast(column: Column, source: str, target: str) -> Column:
    """`column` (of Cast kind `source`) as `target`: null where it has no such value."""
    from pyspark.sql import functions as F

    spark_name = CAST_TYPES[target]
    if source == target:
        return column
    if source == "null":
        return F.lit(None).cast(spark_name)
    if target == "string":
        if source in FLOATS:
            return _spark_java_float_text(column, single=source == "float32")
        return _spark_iso_instant(column) if source == "timestamp" else column.cast("string")
    if target == "boolean":
        if source == "string":
            return F.lower(column) == F.lit("true")
        if source in FLOATS:  # Spark orders NaN above every number: it would pass `>= 1`
            return F.when(F.isnan(column), F.lit(False)).otherwise(F.abs(column) >= 1)
        if source == "decimal":
            return F.abs(column) >= 1
        return column != 0  # not abs: the smallest integer has no absolute value of its type
    if source == "string":
        if target in INT_BITS:
            return F.when(column.rlike(INT_TEXT), column).try_cast(spark_name)
        clean = F.regexp_replace(column, FLOAT_NOISE, "")
        return F.when(column.rlike(FLOAT_TEXT), clean).try_cast(spark_name)
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
