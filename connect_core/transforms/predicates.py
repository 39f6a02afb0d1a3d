"""Kafka's predicates, deciding which records a transform applies to (`transforms.<alias>.predicate`):
TopicNameMatches, HasHeaderKey and RecordIsTombstone. Each is true or false for every record, never null."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import Field, field_validator

from connect_core.sdk.records import TOPIC_COLUMN
from connect_core.sdk.transforms import HEADERS_COLUMN, TOMBSTONE_COLUMN, Predicate, PredicateConfig
from connect_core.transforms.routing import full_match_spark, java_regex, map_distinct_arrow

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import Column, DataFrame

__all__ = ["HasHeaderKey", "RecordIsTombstone", "TopicNameMatches"]


class TopicNameMatchesConfig(PredicateConfig):
    pattern: str = Field(description="A Java regular expression the whole topic name must match.")

    @field_validator("pattern")
    @classmethod
    def _pattern(cls, value: str) -> str:
        java_regex(value, "pattern")
        return value


class TopicNameMatches(Predicate[TopicNameMatchesConfig]):
    config_model = TopicNameMatchesConfig
    doc = "True for records whose topic matches `pattern` (the whole name)."

    def __init__(self, config: TopicNameMatchesConfig) -> None:
        super().__init__(config)
        self._regex = java_regex(config.pattern, "pattern")

    def spark(self, df: DataFrame) -> Column:
        from pyspark.sql import functions as F

        if TOPIC_COLUMN not in df.columns:
            return F.lit(False)
        return F.coalesce(full_match_spark(F.col(TOPIC_COLUMN), self.config.pattern), F.lit(False))

    def arrow(self, batch: pa.RecordBatch) -> pa.Array:
        import pyarrow as pa
        import pyarrow.compute as pc

        if TOPIC_COLUMN not in batch.schema.names:
            return pa.repeat(pa.scalar(False), batch.num_rows)
        topics = batch.column(TOPIC_COLUMN).cast(pa.string())
        matches = map_distinct_arrow(topics, lambda topic: self._regex.fullmatch(topic) is not None, pa.bool_())
        return pc.fill_null(matches, False)


class HasHeaderKeyConfig(PredicateConfig):
    name: str = Field(description="The header key to look for.")


class HasHeaderKey(Predicate[HasHeaderKeyConfig]):
    config_model = HasHeaderKeyConfig
    doc = "True for records with at least one header whose key is `name`."

    def spark(self, df: DataFrame) -> Column:
        from pyspark.sql import functions as F

        name = self.config.name
        return F.coalesce(F.exists(F.col(HEADERS_COLUMN), lambda h: h["key"] == F.lit(name)), F.lit(False))

    def arrow(self, batch: pa.RecordBatch) -> pa.Array:
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        headers = batch.column(HEADERS_COLUMN)
        counts = pc.fill_null(pc.list_value_length(headers), 0).to_numpy(zero_copy_only=False)
        row = np.repeat(np.arange(len(headers)), counts)  # the row of each header of `flatten()`
        found = pc.fill_null(pc.equal(pc.struct_field(headers.flatten(), "key"), self.config.name), False)
        has = np.zeros(len(headers), dtype=bool)
        has[row[found.to_numpy(zero_copy_only=False)]] = True
        return pa.array(has, pa.bool_())


class RecordIsTombstoneConfig(PredicateConfig):
    """RecordIsTombstone has no options."""


class RecordIsTombstone(Predicate[RecordIsTombstoneConfig]):
    config_model = RecordIsTombstoneConfig
    doc = "True for tombstones: records whose value is null (`__tombstone`)."

    def spark(self, df: DataFrame) -> Column:
        from pyspark.sql import functions as F

        return F.coalesce(F.col(TOMBSTONE_COLUMN), F.lit(False))

    def arrow(self, batch: pa.RecordBatch) -> pa.Array:
        import pyarrow as pa
        import pyarrow.compute as pc

        return pc.fill_null(batch.column(TOMBSTONE_COLUMN).cast(pa.bool_()), False)
