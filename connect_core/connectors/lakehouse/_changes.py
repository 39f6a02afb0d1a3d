"""A batch of topic records as the changes a lakehouse table takes: rows to write, keys to drop.

Shared by the lakehouse sinks (Iceberg now, Delta next): their tables take one commit per batch,
so a key changed several times in the batch is written once, with its newest change (the last by
partition and offset). A record deletes its key when it is a tombstone (`__tombstone`: a null
value, as a CDC source sends after a delete), when the `cdc_field` column holds `d` (Debezium's
`op`, copied into the row by ExtractNewRecordState's `add.fields=op`), or when Debezium's rewrite
mode marked it `__deleted` = `true`. A key's fields come from the value's columns, or from the
record's key (`__key`) where the value has none (a tombstone has no value at all).

Pure pyarrow, no Spark: it runs on the rows the sink already holds in the driver.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from connect_core.sdk.errors import ConfigError, DataError
from connect_core.sdk.transforms import KEY_COLUMN, TOMBSTONE_COLUMN, is_value_column

__all__ = [
    "DELETED_FIELD",
    "DELETE_OPS",
    "ChangeSet",
    "changes",
    "key_fields",
    "next_offsets",
    "past",
    "refuse_envelope",
    "value_rows",
]

#: Debezium's rewrite-mode flag column (ExtractNewRecordState `delete.handling.mode=rewrite`).
DELETED_FIELD = "__deleted"
#: The values of a CDC op field that delete the key (Debezium's `d`; `delete` as some tools spell it).
DELETE_OPS = ("d", "D", "delete", "DELETE")
_INDEX = "__connect_change_index"


@dataclass(frozen=True)
class ChangeSet:
    """What one batch does to a keyed table: delete every key of `keys`, then write `rows`.

    `rows`: the newest row of each key that still exists (value columns only); `keys`: the key
    columns of every key the batch changed (written or deleted): a copy-on-write table drops their
    old rows first. `deleted`: how many of those keys the batch deletes."""

    rows: pa.Table
    keys: pa.Table
    deleted: int


def next_offsets(rows: pa.Table) -> dict[int, int]:
    """The next offset of each topic partition in `rows` (largest `__offset` + 1)."""
    if rows.num_rows == 0:
        return {}
    grouped = rows.select(["__partition", "__offset"]).group_by("__partition").aggregate([("__offset", "max")])
    return {
        int(p): int(o) + 1
        for p, o in zip(grouped["__partition"].to_pylist(), grouped["__offset_max"].to_pylist(), strict=True)
    }


def value_rows(rows: pa.Table) -> pa.Table:
    """The records' values (an append: every record but the tombstones, which have none)."""
    if TOMBSTONE_COLUMN in rows.column_names:
        rows = rows.filter(pc.invert(pc.fill_null(rows[TOMBSTONE_COLUMN], False)))
    return rows.select([c for c in rows.column_names if is_value_column(c)])


def changes(rows: pa.Table, keys: Sequence[str], cdc_field: str | None = None) -> ChangeSet:
    """The newest change per key of `rows` (a topic's records, in any order), by the `keys` columns."""
    if not keys:
        raise ValueError("changes() needs key columns")
    rows = rows.sort_by([("__partition", "ascending"), ("__offset", "ascending")])
    key_arrays = {k: _key_array(rows, k) for k in keys}
    for k, array in key_arrays.items():
        if array.null_count:
            at = pc.index(pc.is_null(array), True).as_py()
            where = f"{rows['__partition'][at].as_py()}/{rows['__offset'][at].as_py()}"
            raise DataError(
                f"the record at partition/offset {where} has no value for id column `{k}` (in its value or its key): "
                "an upsert or delete needs every id column"
            )
    deleted = _deleted(rows, cdc_field)
    indexed = pa.table({**key_arrays, _INDEX: pa.array(range(rows.num_rows), pa.int64())})
    newest = indexed.group_by(list(keys), use_threads=False).aggregate([(_INDEX, "max")])[f"{_INDEX}_max"]
    picked = pc.take(newest, pc.sort_indices(newest))  # the kept rows in the batch's order
    gone = pc.take(deleted, picked)
    kept = pc.filter(picked, pc.invert(gone))
    values = rows.select([c for c in rows.column_names if is_value_column(c)])
    for k, array in key_arrays.items():  # a key field only in the record's key becomes a column too
        if k in values.column_names:
            values = values.set_column(values.column_names.index(k), k, array)
        else:
            values = values.append_column(k, array)
    key_table = pa.table({k: pc.take(a, picked) for k, a in key_arrays.items()})
    return ChangeSet(values.take(kept), key_table, int(pc.sum(gone).as_py() or 0))


def _key_array(rows: pa.Table, name: str) -> Any:
    """Column `name` of the values, its nulls filled from the record key's field of that name."""
    from_key = None
    if KEY_COLUMN in rows.column_names and pa.types.is_struct(rows[KEY_COLUMN].type):
        struct = rows[KEY_COLUMN].type
        if struct.get_field_index(name) >= 0:
            from_key = pc.struct_field(rows[KEY_COLUMN], name)
    in_value = rows[name] if name in rows.column_names else None
    if in_value is None and from_key is None:
        raise DataError(
            f"id column `{name}` is neither a column of the records nor a field of their key "
            f"(columns: {', '.join(c for c in rows.column_names if is_value_column(c))})"
        )
    if in_value is None:
        return from_key.combine_chunks() if isinstance(from_key, pa.ChunkedArray) else from_key
    if from_key is not None:
        in_value = pc.coalesce(in_value, pc.cast(from_key, in_value.type))
    return in_value.combine_chunks() if isinstance(in_value, pa.ChunkedArray) else in_value


def _deleted(rows: pa.Table, cdc_field: str | None) -> Any:
    """True for each record that deletes its key (never null)."""
    flags = pa.repeat(pa.scalar(False), rows.num_rows)
    if TOMBSTONE_COLUMN in rows.column_names:
        flags = pc.or_(flags, pc.fill_null(rows[TOMBSTONE_COLUMN], False))
    if cdc_field and cdc_field in rows.column_names:
        op = pc.cast(rows[cdc_field], pa.string())
        flags = pc.or_(flags, pc.fill_null(pc.is_in(op, pa.array(DELETE_OPS)), False))
    if DELETED_FIELD in rows.column_names:
        flag = pc.utf8_lower(pc.cast(rows[DELETED_FIELD], pa.string()))
        flags = pc.or_(flags, pc.fill_null(pc.equal(flag, "true"), False))
    return flags.combine_chunks() if isinstance(flags, pa.ChunkedArray) else flags


def past(rows: pa.Table, held: Mapping[int, int]) -> pa.Table:
    """The rows at or past the offsets a table holds (`held`, by partition): what it has not taken."""
    old = None
    for partition, below in held.items():
        cond = pc.and_(pc.equal(rows["__partition"], partition), pc.less(rows["__offset"], below))
        old = cond if old is None else pc.or_(old, cond)
    return rows if old is None else rows.filter(pc.invert(old))


def key_fields(rows: pa.Table) -> list[str] | None:
    """The fields of the records' struct key (the default id columns), None without one."""
    if KEY_COLUMN in rows.column_names and pa.types.is_struct(rows[KEY_COLUMN].type):
        return [f.name for f in rows[KEY_COLUMN].type]
    return None


def refuse_envelope(topic: str, rows: pa.Table, cdc_field_key: str) -> None:
    """A ConfigError when `topic` holds Debezium's envelope (before/after/op) rather than rows: a
    table takes rows; the unwrap transform (and the sink's `cdc_field_key`) says how."""
    values = [c for c in rows.column_names if is_value_column(c)]
    if {"before", "after", "op"} <= set(values) and pa.types.is_struct(rows["after"].type):
        raise ConfigError(
            f"topic `{topic}` holds change events in Debezium's envelope (before/after/op), not rows: add the "
            "ExtractNewRecordState transform (`transforms.unwrap.type=io.debezium.transforms.ExtractNewRecordState`, "
            f"`transforms.unwrap.add.fields=op`) and `{cdc_field_key}=__op`"
        )
