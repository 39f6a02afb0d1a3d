"""Transforms that add, drop, rename or blank fields, or copy them into the key: Kafka's
InsertField, ReplaceField, MaskField and ValueToKey."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import Field

from connect_core.sdk.records import OFFSET_COLUMN, PARTITION_COLUMN, TOPIC_COLUMN
from connect_core.sdk.transforms import TIMESTAMP_COLUMN, Transformation, TransformConfig
from connect_core.transforms._parts import Part, arrow_fields, arrow_with, spark_fields, spark_with

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import Column, DataFrame

__all__ = ["InsertFieldKey", "InsertFieldValue"]


def _field_name(spec: str | None) -> str | None:
    """Kafka's field spec: a name, optionally suffixed `!` (required) or `?` (optional)."""
    if spec is None:
        return None
    return spec[:-1] if spec.endswith(("!", "?")) else spec


class InsertFieldConfig(TransformConfig):
    topic_field: str | None = Field(None, alias="topic.field", description="Field for the record's topic.")
    partition_field: str | None = Field(
        None, alias="partition.field", description="Field for the record's partition (null before it is in a topic)."
    )
    offset_field: str | None = Field(
        None, alias="offset.field", description="Field for the record's offset (null before it is in a topic)."
    )
    timestamp_field: str | None = Field(None, alias="timestamp.field", description="Field for the record's timestamp.")
    static_field: str | None = Field(None, alias="static.field", description="Field for a fixed value.")
    static_value: str | None = Field(None, alias="static.value", description="The fixed value of `static.field`.")


class _InsertField(Transformation[InsertFieldConfig]):
    config_model = InsertFieldConfig
    part: ClassVar[Part]
    doc = "Insert the record's topic, partition, offset or timestamp, or a fixed value, as fields."

    def _wanted(self) -> list[tuple[str, str]]:
        """(field, source) pairs: source is a record column or `static`."""
        c = self.config
        pairs = [
            (c.topic_field, TOPIC_COLUMN),
            (c.partition_field, PARTITION_COLUMN),
            (c.offset_field, OFFSET_COLUMN),
            (c.timestamp_field, TIMESTAMP_COLUMN),
            (c.static_field, "static"),
        ]
        return [(name, src) for spec, src in pairs if (name := _field_name(spec))]

    def spark(self, df: DataFrame) -> dict[str, Column]:
        from pyspark.sql import functions as F

        fields = spark_fields(df, self.part)
        kinds = {TOPIC_COLUMN: "string", PARTITION_COLUMN: "int", OFFSET_COLUMN: "bigint", TIMESTAMP_COLUMN: "timestamp"}
        for name, src in self._wanted():
            if src == "static":
                fields[name] = F.lit(self.config.static_value).cast("string")
            elif src in df.columns:
                fields[name] = F.col(src).cast(kinds[src])
            else:
                fields[name] = F.lit(None).cast(kinds[src])
        return spark_with(df, self.part, fields)

    def arrow(self, batch: pa.RecordBatch) -> dict[str, pa.Array]:
        import pyarrow as pa

        fields = arrow_fields(batch, self.part)
        kinds: dict[str, Any] = {
            TOPIC_COLUMN: pa.string(),
            PARTITION_COLUMN: pa.int32(),
            OFFSET_COLUMN: pa.int64(),
            TIMESTAMP_COLUMN: pa.timestamp("us", tz="UTC"),
        }
        n = batch.num_rows
        for name, src in self._wanted():
            if src == "static":
                fields[name] = pa.array([self.config.static_value] * n, pa.string())
            elif src in batch.schema.names:
                fields[name] = batch.column(src).cast(kinds[src])
            else:
                fields[name] = pa.nulls(n, kinds[src])
        return arrow_with(batch, self.part, fields)


class InsertFieldKey(_InsertField):
    part = "key"


class InsertFieldValue(_InsertField):
    part = "value"
