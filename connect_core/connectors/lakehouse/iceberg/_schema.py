"""Tables from the topic's columns: created when missing, evolved when the records grow.

A batch's columns are compared with the table's by name. A new column is added; a type the table
can be widened to (int→long, float→double, decimal precision up at the same scale) widens it, as
Iceberg's schema evolution allows; a narrower value (an int into a long column) is cast on write.
Anything else is a `DataError` naming the column and both types: Iceberg cannot change it without
rewriting the table, and guessing a cast would silently change data.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from connect_core.connectors.lakehouse.iceberg.config import IcebergSinkConfig, partition_fields
from connect_core.sdk.errors import ConfigError, DataError
from connect_core.sdk.evolution import cast, evolution, numbers_fit

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from pyiceberg.table import Table

__all__ = ["conform", "create_table", "load_table"]


def load_table(catalog: Catalog, name: str) -> Table | None:
    """Table `name`, or None when the catalog has none of that name."""
    from pyiceberg.exceptions import NoSuchTableError

    try:
        return catalog.load_table(name)
    except NoSuchTableError:
        return None


def create_table(
    catalog: Catalog, name: str, columns: pa.Schema, cfg: IcebergSinkConfig, configured: str | None = None
) -> Table:
    """A new table `name` of `columns` (and its namespace), when auto-create is on, made as the
    config says table `configured` is made (by default `name`: a re-read's copy is made as its target)."""
    if not cfg.auto_create:
        raise ConfigError(
            f"Iceberg table `{configured or name}` does not exist: create it, or set "
            "`iceberg.tables.auto-create-enabled=true`"
        )
    return _create(catalog, name, columns, cfg, configured or name)


def _create(catalog: Catalog, name: str, columns: pa.Schema, cfg: IcebergSinkConfig, configured: str) -> Table:
    from pyiceberg.exceptions import TableAlreadyExistsError

    namespace = name.rsplit(".", 1)[0]
    catalog.create_namespace_if_not_exists(namespace)
    specs = partition_fields(cfg.partition_by(configured))
    missing = [col for col, _, _ in specs if col not in columns.names]
    if missing:
        raise ConfigError(f"the partition columns {missing} of table `{name}` are not columns of its records")
    try:
        with catalog.create_table_transaction(name, schema=columns) as tx:
            if specs:
                with tx.update_spec() as spec:
                    for col, transform, width in specs:
                        spec.add_field(col, _transform(transform, width))
    except TableAlreadyExistsError:
        pass  # made meanwhile by another writer: use theirs
    return catalog.load_table(name)


def _transform(name: str, width: int | None) -> Any:
    from pyiceberg import transforms as t

    simple = {
        "identity": t.IdentityTransform,
        "year": t.YearTransform,
        "month": t.MonthTransform,
        "day": t.DayTransform,
        "hour": t.HourTransform,
    }
    if name in simple:
        return simple[name]()
    assert width is not None
    return t.BucketTransform(width) if name == "bucket" else t.TruncateTransform(width)


def conform(
    table: Table, rows: pa.Table, cfg: IcebergSinkConfig, name: str, changes: Mapping[str, Any] | None = None
) -> tuple[Table, pa.Table]:
    """`rows` as the table's columns (evolving the table first where `cfg` allows, and as
    `schema.propagation` says for the topic's `changes`): the table (reloaded if it changed) and
    the rows cast to its Arrow schema, null where they lack a column."""
    from pyiceberg.catalog import Catalog

    wanted = Catalog._convert_schema_if_needed(rows.schema)
    current = table.schema()
    keys = {str(current.find_column_name(i)) for i in current.identifier_field_ids}
    # a partition's source column is never dropped: every spec the table had (its old files keep theirs)
    keys |= {str(current.find_column_name(f.source_id)) for spec in table.specs().values() for f in spec.fields}
    plan = evolution(cfg.schema_propagation, cfg.evolve_schema, changes, current.column_names, keys)
    relax = [n for n in plan.relax if current.find_field(n).required]
    if plan.drop or relax:
        with table.update_schema() as update:
            for n in plan.drop:
                update.delete_column(n)
            for n in relax:
                update.update_column(n, required=False)
        table = table.refresh()
        current = table.schema()
    added, widened = [], []
    for field in wanted.fields:
        have = current.find_field(field.name) if field.name in current.column_names else None
        if have is None:
            added.append(field)
        elif have.field_type != field.field_type:
            if _fits(field.field_type, have.field_type) or _values_fit(rows[field.name], have.field_type):
                continue  # narrower values into a wider column: cast below
            if not _widens(have.field_type, field.field_type):
                raise DataError(
                    f"column `{field.name}` of table `{name}` is {have.field_type} and the records hold "
                    f"{field.field_type}: Iceberg widens only int→long, float→double and decimal precision; "
                    "write it to a new column or table"
                )
            widened.append(field)
    if added or widened:
        if not plan.add:
            what = [f"`{f.name}` ({f.field_type})" for f in added] + [f"`{f.name}` to {f.field_type}" for f in widened]
            raise DataError(
                f"the records change table `{name}`'s schema ({', '.join(what)}): set "
                "`iceberg.tables.evolve-schema-enabled=true` to add and widen columns"
            )
        with table.update_schema() as update:
            for f in added:
                update.add_column(f.name, f.field_type, doc=f.doc)
            for f in widened:
                update.update_column(f.name, field_type=f.field_type)
        table = table.refresh()
    target = table.schema().as_arrow()
    arrays = []
    for f in target:
        if f.name in rows.column_names:
            arrays.append(cast(rows[f.name], f.type))
        else:
            arrays.append(pa.nulls(rows.num_rows, f.type))
    return table, pa.Table.from_arrays(arrays, schema=target)


def _widens(old: Any, new: Any) -> bool:
    """Whether Iceberg's schema evolution turns a column of type `old` into `new`."""
    from pyiceberg.types import DecimalType, DoubleType, FloatType, IntegerType, LongType

    if isinstance(old, IntegerType) and isinstance(new, LongType):
        return True
    if isinstance(old, FloatType) and isinstance(new, DoubleType):
        return True
    return (
        isinstance(old, DecimalType)
        and isinstance(new, DecimalType)
        and new.scale == old.scale
        and new.precision > old.precision
    )


def _values_fit(values: Any, column: Any) -> bool:
    """Whether these numbers go into a numeric column of another type unchanged (an accepted narrowing
    of the topic, `schema.propagation`: a decimal(10,2) column keeps taking ints that fit it)."""
    from pyiceberg.io.pyarrow import schema_to_pyarrow
    from pyiceberg.schema import Schema
    from pyiceberg.types import NestedField

    kind = schema_to_pyarrow(Schema(NestedField(1, "v", column, required=False))).field(0).type
    return numbers_fit(values, kind)


def _fits(value: Any, column: Any) -> bool:
    """Whether values of type `value` go into a column of type `column` unchanged (a cast that
    cannot lose anything: the column is the wider one)."""
    return _widens(value, column)
