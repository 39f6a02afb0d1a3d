"""Column masks over Arrow: a batch's columns, a struct's fields (a change event's `before`, `after`,
`__key`), and `ArrowRecords` whose producer then masks each batch it makes."""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Iterator, Mapping
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from connect_core.connectors._masks.options import HASH_ALGORITHMS, MaskRule
from connect_core.connectors._masks.spark import masked_field, unhashable
from connect_core.sdk import ArrowRecords
from connect_core.sdk._hashing import arrow_digests, arrow_hash_input

__all__ = ["masked_array", "masked_batch", "masked_records", "masked_struct"]


def masked_array(values: pa.Array, rule: MaskRule, column: str, *, keep: str | None = None) -> pa.Array:
    """`values` of `column` as `rule` hides them; null stays null, and so does `keep` where the column
    holds it (a change event's stand-in for a value the log did not carry)."""
    if rule.kind == "mask":
        out = pc.if_else(pc.is_valid(values), pa.scalar("*" * rule.chars), pa.scalar(None, pa.string()))
    elif rule.kind == "truncate":
        if pa.types.is_string(values.type) or pa.types.is_large_string(values.type):
            out = pc.utf8_slice_codeunits(values, 0, rule.chars)  # characters, as Spark's substring
        elif pa.types.is_binary(values.type) or pa.types.is_large_binary(values.type):
            out = pc.binary_slice(values, 0, rule.chars)
        else:
            return values  # a number or a date has no length to cut (Debezium leaves them too)
    else:
        text = arrow_hash_input(values)
        if text is None:
            raise unhashable(rule, column, str(values.type))
        out = arrow_digests(text, _hex_digest(rule))
    return _kept(values, out, keep)


def _hex_digest(rule: MaskRule) -> Any:
    salted = hashlib.new(HASH_ALGORITHMS[rule.algorithm][2], rule.salt.encode())

    def digest(value: bytes) -> str:
        h = salted.copy()
        h.update(value)
        return h.hexdigest()

    return digest


def _kept(values: pa.Array, out: pa.Array, keep: str | None) -> pa.Array:
    text, binary = pa.types.is_string(values.type), pa.types.is_binary(values.type)
    if keep is None or not (text or binary) or not len(values):
        return out
    same = pc.fill_null(pc.equal(values, pa.scalar(keep if text else keep.encode(), values.type)), False)
    if not pc.any(same).as_py():
        return out
    return pc.if_else(same, pa.scalar(keep if pa.types.is_string(out.type) else keep.encode(), out.type), out)


def masked_batch(batch: pa.RecordBatch, rules: Mapping[str, MaskRule]) -> pa.RecordBatch:
    """`batch` with the columns `rules` names masked (the others as they are)."""
    if not rules:
        return batch
    names = batch.schema.names
    arrays = [masked_array(batch.column(n), rules[n], n) if n in rules else batch.column(n) for n in names]
    return pa.RecordBatch.from_arrays(arrays, names=names)


def masked_struct(struct: pa.Array, rules: Mapping[str, MaskRule], *, keep: str | None = None) -> pa.Array:
    """A struct array with the fields `rules` names masked; a null struct stays null."""
    kind = struct.type
    names = [kind.field(i).name for i in range(kind.num_fields)]
    if not rules or not set(rules) & set(names):
        return struct
    children = [
        masked_array(child, rules[name], name, keep=keep) if name in rules else child
        for name, child in zip(names, struct.flatten(), strict=True)
    ]
    mask = struct.is_null() if struct.null_count else None
    return pa.StructArray.from_arrays(children, names=names, mask=mask)


def masked_records(records: ArrowRecords, rules: Mapping[str, MaskRule]) -> ArrowRecords:
    """`records` whose producer masks the columns `rules` names in each batch it makes (in the Spark
    worker that makes them, or the driver), with the schema saying so (`masked_field`)."""
    if not rules:
        return records
    from pyspark.sql.types import StructType

    produce, wanted = records.produce, dict(rules)

    def masked(batches: Iterator[Any]) -> Iterator[Any]:
        for batch in produce(batches):
            yield masked_batch(batch, wanted)

    schema = StructType([masked_field(f, wanted[f.name]) if f.name in wanted else f for f in records.schema.fields])
    return dataclasses.replace(records, produce=masked, schema=schema)
