"""Column masks as Spark SQL expressions (`sha2`, `concat`, `substring`): columnar, in the JVM, no
Python per row. A hash's salt is a literal of the plan, as any constant is: the runtime's log masker
knows it (it hides it wherever a plan is printed), and a Spark UI is the pool's, behind its own access."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from connect_core.connectors._masks.options import HASH_ALGORITHMS, MaskRule
from connect_core.sdk._hashing import HASHABLE, spark_hash_input
from connect_core.sdk.errors import ConfigError
from connect_core.sdk.transforms import MASKED_METADATA
from connect_core.sdk.transforms import column as spark_column

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame
    from pyspark.sql.types import StructField

__all__ = ["masked_column", "masked_field", "masked_frame", "unhashable"]

#: Field metadata of a source column's database type (`connect.sql.type`, its precision, scale): a
#: sink creates its column from them, which a hash or mask no longer fits (`varchar(10)`, `int`).
_SQL_TYPE_PREFIX = "connect.sql."


def unhashable(rule: MaskRule, column: str, kind: str) -> ConfigError:
    problem = (
        f"`{rule.shown}` names column `{column}` of type {kind}: only {HASHABLE} columns are hashed (their "
        "text is the same on every path); leave it out, or mask it (`column.mask.with.<n>.chars`)"
    )
    return ConfigError(problem, {rule.shown: [problem]})


def masked_field(field: StructField, rule: MaskRule) -> StructField:
    """`field` as the topic's schema has it once `rule` is applied: a hash or mask is text (without
    the database type a sink would create it as), and the metadata says how it was hidden."""
    from pyspark.sql.types import StringType, StructField

    metadata = dict(field.metadata or {})
    kind = field.dataType
    if rule.kind != "truncate":
        metadata = {k: v for k, v in metadata.items() if not k.startswith(_SQL_TYPE_PREFIX)}
        kind = StringType()
    metadata[MASKED_METADATA] = rule.note
    return StructField(field.name, kind, True, metadata)


def masked_column(column: Column, kind: Any, rule: MaskRule, name: str) -> Column:
    """`column` (of Spark type `kind`) as `rule` hides it; null stays null."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    if rule.kind == "mask":
        return F.when(column.isNotNull(), F.lit("*" * rule.chars))
    if rule.kind == "truncate":
        if isinstance(kind, T.StringType | T.BinaryType):
            return F.substring(column, 1, rule.chars)  # characters of text, bytes of binary
        return column
    text = spark_hash_input(column, kind)
    if text is None:
        raise unhashable(rule, name, kind.simpleString())
    salt = F.lit(bytearray(rule.salt.encode())) if isinstance(kind, T.BinaryType) else F.lit(rule.salt)
    salted = F.concat(salt, text)
    function, bits, _ = HASH_ALGORITHMS[rule.algorithm]
    return F.sha2(salted, bits) if function == "sha2" else getattr(F, function)(salted)


def masked_frame(df: DataFrame, rules: Mapping[str, MaskRule]) -> DataFrame:
    """`df` with the columns `rules` names masked, each with its `masked_field` metadata."""
    if not rules:
        return df
    out = []
    for field in df.schema.fields:
        col = spark_column(field.name)
        rule = rules.get(field.name)
        if rule is not None:
            shown = masked_field(field, rule)
            col = masked_column(col, field.dataType, rule, field.name).alias(field.name, metadata=shown.metadata)
        out.append(col)
    return df.select(*out)
