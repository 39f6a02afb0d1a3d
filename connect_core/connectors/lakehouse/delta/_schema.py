"""Tables' columns against the records': evolve the table where allowed, else a clear error.

A batch's columns are compared with the table's by name and Delta type. A new column is added
(`alter.add_columns`, its own commit); a type the table can be widened to (byte→short→int→long,
float→double, decimal precision up at the same scale) widens it; a narrower value (an int into a
long column) is cast on write. Anything else is a `DataError` naming the column and both types.

delta-rs writes no type change in place (`schema_mode="merge"` even casts a long into an int
column, losing digits), so a widening rewrites the table once: every row, cast, in one overwrite
commit that keeps the partitioning and the app transactions. It costs the table's size, once per
widened column. Either evolution commit is safe to repeat: a rerun finds it done.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from connect_core.connectors.lakehouse.delta.config import DeltaSinkConfig
from connect_core.sdk.errors import ConfigError, DataError
from connect_core.sdk.evolution import cast, evolution, numbers_fit

if TYPE_CHECKING:
    from deltalake import DeltaTable

__all__ = ["check_partitions", "conform", "delta_types"]

_INTEGERS = ("byte", "short", "integer", "long")
_DECIMAL = re.compile(r"decimal\((\d+),(\d+)\)")


def delta_types(schema: pa.Schema) -> dict[str, str]:
    """Column → its Delta type name (`long`, `decimal(12,2)`, `struct<…>`), as delta-rs maps Arrow."""
    from deltalake import Schema

    try:
        converted = Schema.from_arrow(schema)
    except Exception as exc:
        raise DataError(f"the records' columns have a type Delta cannot hold: {exc}") from None
    return {f.name: _name(f.type) for f in converted.fields}


def _name(delta_type: Any) -> str:
    kind = getattr(delta_type, "type", None)
    return str(kind) if isinstance(kind, str) else str(delta_type)


def widens(old: str, new: str) -> bool:
    """Whether a column of Delta type `old` can be widened to `new`."""
    if old in _INTEGERS and new in _INTEGERS:
        return _INTEGERS.index(new) > _INTEGERS.index(old)
    if (old, new) == ("float", "double"):
        return True
    a, b = _DECIMAL.fullmatch(old), _DECIMAL.fullmatch(new)
    return bool(a and b and a[2] == b[2] and int(b[1]) > int(a[1]))


def check_partitions(cfg: DeltaSinkConfig, columns: pa.Schema, where: str) -> list[str]:
    """The partition columns of a table created for `columns`; ConfigError when one is missing."""
    missing = [c for c in cfg.partition_by if c not in columns.names]
    if missing:
        raise ConfigError(
            f"the partition columns {missing} (`delta.tables.partition-by`) of Delta table `{where}` are not "
            "columns of its records"
        )
    return list(cfg.partition_by)


def conform(
    table: DeltaTable, rows: pa.Table, cfg: DeltaSinkConfig, where: str, changes: Mapping[str, Any] | None = None
) -> pa.Table:
    """`rows` as the table's columns, evolving the table first where `cfg` allows (and as
    `schema.propagation` says for the topic's `changes`): the rows cast to the table's Arrow schema,
    null where they lack a column. `table` is updated in place."""
    keys = set(table.metadata().partition_columns)  # a partition column is never dropped
    plan = evolution(cfg.schema_propagation, cfg.evolve_schema, changes, [f.name for f in table.schema().fields], keys)
    for name in plan.relax:
        if not next(f for f in table.schema().fields if f.name == name).nullable:
            table.alter.drop_column_not_null(name)
    if plan.relax:
        table.update_incremental()
    if plan.drop:
        _drop(table, list(plan.drop))
    have = {f.name: _name(f.type) for f in table.schema().fields}
    wanted = delta_types(rows.schema)
    added, widened = [], []
    for name, kind in wanted.items():
        old = have.get(name)
        if old is None:
            added.append(name)
        elif old != kind and not widens(kind, old):  # a narrower value fits: cast below
            if not widens(old, kind) and numbers_fit(rows[name], _arrow_type(table, name)):
                continue  # an accepted narrowing: these values fit the column as it is
            if not widens(old, kind):
                raise DataError(
                    f"column `{name}` of Delta table `{where}` is {old} and the records hold {kind}: Delta widens "
                    "only byte→short→int→long, float→double and decimal precision; write it to a new column or table"
                )
            widened.append(name)
    if added or widened:
        if not plan.add:
            what = [f"`{n}` ({wanted[n]})" for n in added] + [f"`{n}` to {wanted[n]}" for n in widened]
            raise DataError(
                f"the records change Delta table `{where}`'s schema ({', '.join(what)}): set "
                "`delta.tables.evolve-schema-enabled=true` to add and widen columns"
            )
        if added:
            _add(table, rows.schema, added)
        if widened:
            _widen(table, rows.schema, widened)
    target = pa.schema(table.schema().to_arrow())
    arrays = [
        cast(rows[f.name], f.type) if f.name in rows.column_names else pa.nulls(rows.num_rows, f.type) for f in target
    ]
    return pa.Table.from_arrays(arrays, schema=target)


def _add(table: DeltaTable, columns: pa.Schema, names: list[str]) -> None:
    from deltalake import Field, Schema

    fields = {f.name: f for f in Schema.from_arrow(pa.schema([columns.field(n) for n in names])).fields}
    table.alter.add_columns([Field(n, fields[n].type, nullable=True) for n in names])
    table.update_incremental()


def _arrow_type(table: DeltaTable, name: str) -> pa.DataType:
    return pa.schema(table.schema().to_arrow()).field(name).type


def _drop(table: DeltaTable, names: list[str]) -> None:
    """Rewrite every row of `table` without the columns `names` (`schema.propagation=propagate_fully`):
    delta-rs drops a column only by an overwrite of the table with the new schema."""
    from deltalake import write_deltalake

    old = table.to_pyarrow_table()
    write_deltalake(
        table,
        old.drop_columns(names),
        mode="overwrite",
        schema_mode="overwrite",
        partition_by=list(table.metadata().partition_columns) or None,
    )
    table.update_incremental()


def _widen(table: DeltaTable, columns: pa.Schema, names: list[str]) -> None:
    """Rewrite every row of `table` with `names` as the records' (wider) types."""
    from deltalake import write_deltalake

    old = table.to_pyarrow_table()
    for name in names:
        index = old.column_names.index(name)
        wider = columns.field(name).type
        old = old.set_column(index, pa.field(name, wider, nullable=True), old[name].cast(wider))
    write_deltalake(
        table,
        old,
        mode="overwrite",
        schema_mode="overwrite",
        partition_by=list(table.metadata().partition_columns) or None,
    )
    table.update_incremental()
