"""Cast on Arrow: the values `_cast_spark` gives on Spark, batch by batch."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from connect_core.transforms._cast_types import FLOAT_NOISE, FLOAT_TEXT, FLOATS, INT_BITS, INT_TEXT

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["arrow_cast", "arrow_kind"]


def arrow_kind(kind: Any) -> str:
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


def arrow_cast(column: pa.Array, source: str, target: str) -> pa.Array:
    """`_cast_spark.spark_cast` on Arrow: the same values, null where Spark's `try_cast` gives null."""
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
        if source in INT_BITS:
            return pc.not_equal(column, 0)
        return pc.greater_equal(pc.abs(column), 1)  # NaN compares false
    if target in INT_BITS:
        return _arrow_to_int(column, source, target)
    if source == "string":
        valid = pc.match_substring_regex(column, FLOAT_TEXT)
        clean = pc.replace_substring_regex(column, FLOAT_NOISE, "")
        return pc.cast(pc.if_else(valid, clean, pa.scalar(None, pa.string())), kind)
    if source == "decimal":  # Arrow's decimal→float is not correctly rounded; parsing the digits is
        return pc.cast(_arrow_decimal_text(column), kind)
    return pc.cast(column, kind, safe=False)  # int→float rounds, float64→float32 may give ±inf: as Spark


def _int_range(target: str) -> tuple[int, int]:
    bits = INT_BITS[target]
    return -(2 ** (bits - 1)), 2 ** (bits - 1) - 1


def _arrow_to_int(column: pa.Array, source: str, target: str) -> pa.Array:
    import pyarrow as pa
    import pyarrow.compute as pc

    kind = _arrow_type(target)
    low, high = _int_range(target)
    if source == "boolean":
        return pc.cast(column, kind)
    if source in INT_BITS:
        valid = pc.and_(pc.greater_equal(column, low), pc.less_equal(column, high))
        return pc.cast(pc.if_else(valid, column, pa.scalar(None, column.type)), kind)
    if source == "decimal":
        whole = pc.trunc(column)
        valid = pc.and_(pc.greater_equal(whole, low), pc.less_equal(whole, high))
        return pc.cast(pc.if_else(valid, whole, pa.scalar(None, whole.type)), kind)
    if source in FLOATS:
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
    syntax = pc.match_substring_regex(column, INT_TEXT)
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

    if source in FLOATS:
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
