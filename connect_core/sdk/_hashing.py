"""What bytes a value is hashed as: one rule for the Spark and the Arrow path, so a value read one
way in one run and the other way in the next hashes alike (a source reads a small window as Arrow,
a big one through Spark).

Text hashes as its UTF-8 bytes and binary as itself; integers, decimals, dates and booleans as
their text, which Spark's and Arrow's casts write alike (`-5`, `1.50`, `2024-01-02`, `true`) but
for a decimal whose first digit is 7 or more places after the point: Arrow writes it as Java's
`BigDecimal.toString` does (`1.00E-8`, `0E-10`), Spark in plain notation (`0.0000000100`,
`0.0000000000`), which the Arrow path writes too (`_plain_decimals`). Other types (floats,
timestamps, nested values) have no text both agree on: they are not hashed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import Column

__all__ = ["HASHABLE", "arrow_digests", "arrow_hash_input", "spark_hash_input"]

#: What `arrow_hash_input` / `spark_hash_input` take, for messages.
HASHABLE = "text, binary, integer, decimal, date and boolean"


def arrow_hash_input(values: pa.Array) -> pa.Array | None:
    """`values` as text or binary to hash, or None for a type that is not hashed."""
    import pyarrow as pa

    t, kind = pa.types, values.type
    if t.is_string(kind) or t.is_binary(kind):
        return values
    if t.is_large_string(kind):
        return values.cast(pa.string())
    if t.is_large_binary(kind):
        return values.cast(pa.binary())
    if t.is_decimal(kind):
        return _plain_decimals(values)
    if t.is_integer(kind) or t.is_date32(kind) or t.is_boolean(kind):
        return values.cast(pa.string())
    return None


def _plain_decimals(values: pa.Array) -> pa.Array:
    """Decimals as text in plain notation, all their scale's digits written (`0.0000000100`), as
    Spark's cast writes them. Arrow's cast does so too but for an exponent (`1.00E-8`): those values
    alone are written again, from Python's `Decimal` (its `f` format keeps the scale's digits)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    text = values.cast(pa.string())
    exponent = pc.fill_null(pc.match_substring(text, "E"), False)
    if not pc.any(exponent).as_py():
        return text
    pairs = zip(values.to_pylist(), exponent.to_pylist(), strict=True)
    plain = [format(value, "f") if written_so else None for value, written_so in pairs]
    return pc.if_else(exponent, pa.array(plain, pa.string()), text)


def spark_hash_input(column: Column, kind: Any) -> Column | None:
    """The Spark column of type `kind` as text or binary to hash, or None for a type that is not hashed."""
    from pyspark.sql import types as T

    if isinstance(kind, T.StringType | T.BinaryType):
        return column
    if isinstance(kind, T.IntegralType | T.DecimalType | T.DateType | T.BooleanType):
        return column.cast("string")
    return None


def arrow_digests(values: pa.Array, digest: Callable[[bytes], str]) -> pa.Array:
    """`digest` of each non-null value of a text or binary array (text as UTF-8), as text; null stays null.

    One Python call per value: Arrow has no hash kernel. Measured (`bench/masking_bench.py`): a
    salted SHA-256 of 1M e-mail addresses in 0.42 s on one core, Arrow conversions included."""
    import pyarrow as pa

    t = pa.types
    raw = values.cast(pa.large_binary() if t.is_large_string(values.type) else pa.binary())
    return pa.array([None if v is None else digest(v) for v in raw.to_pylist()], pa.string())
