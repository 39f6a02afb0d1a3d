"""Debezium's `ExtractNewRecordState` (`io.debezium.transforms.ExtractNewRecordState`): a change
event's envelope (`before`, `after`, `source`, `op`, `ts_ms`) becomes the row it describes, so a
sink that writes rows (the JDBC sink) can take a CDC source's topics.

A create, update or snapshot read becomes its `after` row. What a delete and the tombstone after
it become is `delete.tombstone.handling.mode` (Debezium 3.x):

| mode                       | a delete event becomes                   | the source's tombstone |
|----------------------------|------------------------------------------|------------------------|
| `drop`                     | nothing                                  | dropped                |
| `tombstone` (default)      | a tombstone (key kept, value null)       | dropped                |
| `delete-to-tombstone`      | a tombstone                              | dropped                |
| `rewrite`                  | its `before` row with `__deleted`=`true` | dropped                |
| `rewrite-with-tombstone`   | its `before` row with `__deleted`=`true` | kept                   |

In the rewrite modes every other row gets `__deleted`=`false`. The keys published configs still
use (before Debezium 3.2) map onto it when the new key is not given (the new key wins if both are):

| `delete.handling.mode` | `drop.tombstones` | as                                               |
|------------------------|-------------------|--------------------------------------------------|
| `drop` (default)       | `true` (default)  | `drop`                                           |
| `drop`                 | `false`           | the delete dropped, its tombstone kept           |
| `rewrite`              | `true`            | `rewrite`                                        |
| `rewrite`              | `false`           | `rewrite-with-tombstone`                         |
| `none`                 | `true`            | `tombstone` (the delete passes with a null value) |
| `none`                 | `false`           | the delete as a tombstone, and its tombstone kept |

A truncate (`op` `t`) is dropped, as Debezium's transform drops it: it does not reach a sink
through this transform. `add.fields` / `add.headers` copy envelope fields (`op`, `ts_ms`, or
`source.<field>`; a name that is not a top-level field means `source.<name>`, as `table` or
`lsn`) into the row as `<prefix><name>` (`.` as `_`: `source.ts_ms` → `__source_ts_ms`) or into
the headers; `name:NEW` names the column `NEW`. `replace.null.with.default` is accepted and has
no effect (the events carry no column defaults); `route.by.field` is not supported.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import BeforeValidator, Field, field_validator

from connect_core.sdk.config import split_list
from connect_core.sdk.transforms import (
    HEADERS_COLUMN,
    TOMBSTONE_COLUMN,
    DataError,
    Transformation,
    TransformConfig,
    column,
    is_value_column,
)
from connect_core.transforms.headers import _append_arrow, _append_spark

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import Column, DataFrame

__all__ = ["ExtractNewRecordState"]

_ENVELOPE = ("before", "after", "source", "op", "ts_ms")
_TOP_LEVEL = ("op", "ts_ms")
DELETED_FIELD = "__deleted"

Mode = Literal["drop", "tombstone", "rewrite", "rewrite-with-tombstone", "delete-to-tombstone"]
NameList = Annotated[list[str], BeforeValidator(split_list)]


class ExtractNewRecordStateConfig(TransformConfig):
    delete_tombstone_handling_mode: Mode | None = Field(
        None,
        alias="delete.tombstone.handling.mode",
        description="What deletes and tombstones become: drop, tombstone (default), rewrite, "
        "rewrite-with-tombstone, delete-to-tombstone.",
    )
    delete_handling_mode: Literal["drop", "rewrite", "none"] | None = Field(
        None, alias="delete.handling.mode", description="Before Debezium 3.2: drop (default), rewrite or none."
    )
    drop_tombstones: bool | None = Field(
        None, alias="drop.tombstones", description="Before Debezium 3.2: drop the tombstones (default true)."
    )
    add_fields: NameList = Field(
        default_factory=list, alias="add.fields", description="Envelope fields to add to the row (op, source.ts_ms…)."
    )
    add_fields_prefix: str = Field("__", alias="add.fields.prefix", description="Prefix of the added columns.")
    add_headers: NameList = Field(
        default_factory=list, alias="add.headers", description="Envelope fields to add as headers."
    )
    add_headers_prefix: str = Field("__", alias="add.headers.prefix", description="Prefix of the added headers.")
    route_by_field: str = Field("", alias="route.by.field", description="Not supported (must be empty).")
    replace_null_with_default: bool = Field(
        True, alias="replace.null.with.default", description="Accepted; no effect (no column defaults here)."
    )

    @field_validator("route_by_field")
    @classmethod
    def _no_routing(cls, value: str) -> str:
        if value.strip():
            raise ValueError("route.by.field is not supported: route with RegexRouter on the topic instead")
        return value

    def handling(self) -> tuple[str, bool]:
        """(what a delete becomes: `drop`, `tombstone` or `rewrite`; whether the source's tombstones stay)."""
        mode = self.delete_tombstone_handling_mode
        if mode is None and (self.delete_handling_mode is not None or self.drop_tombstones is not None):
            deletes = {"drop": "drop", "rewrite": "rewrite", "none": "tombstone"}[self.delete_handling_mode or "drop"]
            return deletes, self.drop_tombstones is False
        return {
            None: ("tombstone", False),
            "drop": ("drop", False),
            "tombstone": ("tombstone", False),
            "delete-to-tombstone": ("tombstone", False),
            "rewrite": ("rewrite", False),
            "rewrite-with-tombstone": ("rewrite", True),
        }[mode]


def _added(names: list[str], prefix: str) -> list[tuple[str, tuple[str, ...]]]:
    """(column or header name, path in the envelope) of each `add.fields` / `add.headers` entry."""
    out: list[tuple[str, tuple[str, ...]]] = []
    for entry in names:
        field, _, renamed = entry.partition(":")
        field = field.strip()
        path: tuple[str, ...] = (field,) if field in _TOP_LEVEL else ("source", field.removeprefix("source."))
        out.append((renamed.strip() or prefix + field.replace(".", "_"), path))
    return out


class ExtractNewRecordState(Transformation[ExtractNewRecordStateConfig]):
    config_model = ExtractNewRecordStateConfig
    doc = (
        "Debezium's event flattening: a change event becomes its row (`after`); deletes and tombstones as "
        "`delete.tombstone.handling.mode` says; envelope fields into the row (`add.fields`) or headers."
    )

    def _check(self, names: list[str], fields_of: dict[str, list[str]]) -> list[str]:
        """The row's columns (the value struct's fields); DataError when `names` is no envelope."""
        missing = [n for n in ("after", "op") if n not in names]
        if missing:
            raise DataError(
                f"ExtractNewRecordState expects Debezium change events with before/after/op; the records have no "
                f"{', '.join(f'`{m}`' for m in missing)} (is the transform on a CDC source's topic?)"
            )
        cfg = self.config
        wanted = _added(cfg.add_fields, cfg.add_fields_prefix) + _added(cfg.add_headers, cfg.add_headers_prefix)
        for _, path in wanted:
            have = names if len(path) == 1 else fields_of.get("source", [])
            if path[-1] not in have:
                where = "the event" if len(path) == 1 else "its `source`"
                raise DataError(f"ExtractNewRecordState: {where} has no field `{path[-1]}` to add (add.fields)")
        return fields_of["after"]

    # -- Spark ----------------------------------------------------------------------------------

    def spark(self, df: DataFrame) -> dict[str, Column]:
        from pyspark.sql import functions as F

        fields = self._check(df.columns, _spark_structs(df))
        deletes, _ = self.config.handling()
        is_delete = F.coalesce(F.col("op") == "d", F.lit(False))
        tombstone = (
            F.coalesce(F.col(TOMBSTONE_COLUMN), F.lit(False)) if TOMBSTONE_COLUMN in df.columns else F.lit(False)
        )
        after = F.col("after")
        out: dict[str, Column] = {}
        for name in fields:
            value = after.getField(name)
            if deletes == "rewrite" and "before" in df.columns:
                value = F.when(is_delete, F.col("before").getField(name)).otherwise(value)
            out[name] = value.alias(name)
        if deletes == "rewrite":
            out[DELETED_FIELD] = F.when(tombstone, F.lit(None).cast("string")).otherwise(
                F.when(is_delete, F.lit("true")).otherwise(F.lit("false"))
            )
        for name, path in _added(self.config.add_fields, self.config.add_fields_prefix):
            out[name] = self._spark_path(path)
        for name in df.columns:
            if name not in _ENVELOPE and not is_value_column(name):
                out[name] = column(name)
        if deletes == "tombstone":
            out[TOMBSTONE_COLUMN] = tombstone | is_delete
        headers = _added(self.config.add_headers, self.config.add_headers_prefix)
        if headers and HEADERS_COLUMN in df.columns:
            kind = df.schema[HEADERS_COLUMN].dataType
            out[HEADERS_COLUMN] = _append_spark(
                column(HEADERS_COLUMN), kind, [(name, self._spark_path(path)) for name, path in headers]
            )
        return out

    def _spark_path(self, path: tuple[str, ...]) -> Column:
        from pyspark.sql import functions as F

        value = F.col(path[0])
        for part in path[1:]:
            value = value.getField(part)
        return value

    def spark_keep(self, df: DataFrame) -> Column | None:
        from pyspark.sql import functions as F

        self._check(df.columns, _spark_structs(df))  # the filter runs first: check the envelope here too
        deletes, keep_tombstones = self.config.handling()
        op = F.col("op")
        tombstone = (
            F.coalesce(F.col(TOMBSTONE_COLUMN), F.lit(False)) if TOMBSTONE_COLUMN in df.columns else F.lit(False)
        )
        keep = ~F.coalesce(op == "t", F.lit(False))
        if not keep_tombstones:
            keep = keep & ~tombstone
        if deletes == "drop":
            keep = keep & ~F.coalesce(op == "d", F.lit(False))
        return keep

    # -- Arrow ----------------------------------------------------------------------------------

    def arrow(self, batch: pa.RecordBatch) -> dict[str, pa.Array]:
        import pyarrow as pa
        import pyarrow.compute as pc

        names = batch.schema.names
        fields = self._check(names, _arrow_structs(batch))
        deletes, _ = self.config.handling()
        is_delete = pc.fill_null(pc.equal(batch.column("op"), "d"), False)
        tombstone = _tombstones(batch)
        after = batch.column("after")
        out: dict[str, pa.Array] = {}
        for name in fields:
            value = pc.struct_field(after, name)
            if deletes == "rewrite" and "before" in names:
                value = pc.if_else(is_delete, pc.struct_field(batch.column("before"), name), value)
            out[name] = value
        if deletes == "rewrite":
            flag = pc.if_else(is_delete, pa.scalar("true"), pa.scalar("false"))
            out[DELETED_FIELD] = pc.if_else(tombstone, pa.scalar(None, pa.string()), flag)
        for name, path in _added(self.config.add_fields, self.config.add_fields_prefix):
            out[name] = self._arrow_path(batch, path)
        for name in names:
            if name not in _ENVELOPE and not is_value_column(name):
                out[name] = batch.column(name)
        if deletes == "tombstone":
            out[TOMBSTONE_COLUMN] = pc.or_(tombstone, is_delete)
        headers = _added(self.config.add_headers, self.config.add_headers_prefix)
        if headers and HEADERS_COLUMN in names:
            out[HEADERS_COLUMN] = _append_arrow(
                batch.column(HEADERS_COLUMN), [(name, self._arrow_path(batch, path)) for name, path in headers], None
            )
        return out

    def _arrow_path(self, batch: pa.RecordBatch, path: tuple[str, ...]) -> pa.Array:
        import pyarrow.compute as pc

        value = batch.column(path[0])
        for part in path[1:]:
            value = pc.struct_field(value, part)
        return value

    def arrow_keep(self, batch: pa.RecordBatch) -> pa.Array | None:
        import pyarrow.compute as pc

        self._check(batch.schema.names, _arrow_structs(batch))
        deletes, keep_tombstones = self.config.handling()
        op = batch.column("op")
        keep = pc.invert(pc.fill_null(pc.equal(op, "t"), False))
        if not keep_tombstones:
            keep = pc.and_(keep, pc.invert(_tombstones(batch)))
        if deletes == "drop":
            keep = pc.and_(keep, pc.invert(pc.fill_null(pc.equal(op, "d"), False)))
        return keep


def _tombstones(batch: pa.RecordBatch) -> pa.Array:
    import pyarrow as pa
    import pyarrow.compute as pc

    if TOMBSTONE_COLUMN not in batch.schema.names:
        return pa.repeat(pa.scalar(False), batch.num_rows)
    return pc.fill_null(batch.column(TOMBSTONE_COLUMN).cast(pa.bool_()), False)


def _spark_structs(df: DataFrame) -> dict[str, list[str]]:
    from pyspark.sql.types import StructType

    return {f.name: [c.name for c in f.dataType.fields] for f in df.schema.fields if isinstance(f.dataType, StructType)}


def _arrow_structs(batch: pa.RecordBatch) -> dict[str, list[str]]:
    import pyarrow as pa

    return {f.name: [c.name for c in f.type] for f in batch.schema if pa.types.is_struct(f.type)}
