"""Where the runner applies a connector's transforms: to a source's records before they are written
to their topic, and to a sink's batch after it is read.

Records made as Arrow (`ArrowRecords`) stay Arrow: the chain is composed into their producer, so
it runs in the same Python worker, batch by batch, without the JVM. A chain that routes records to
other topics, or holds a whole-batch (SQL) step, runs on the DataFrame instead.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from connect_core.runtime.processing.chain import TransformChain
from connect_core.sdk.config import check_topic_name
from connect_core.sdk.records import TOPIC_COLUMN, ArrowRecords
from connect_core.sdk.transforms import TIMESTAMP_COLUMN, DataError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["SinkTransformed", "SourceTransformed", "stamp_source", "transform_sink", "transform_source"]


def stamp_source(records: DataFrame | ArrowRecords, at: dt.datetime) -> DataFrame | ArrowRecords:
    """Source rows without a `__timestamp` get `at` (the run's start), as a Kafka producer stamps the
    records a source task did not: every topic row has a timestamp."""
    if isinstance(records, ArrowRecords):
        if TIMESTAMP_COLUMN in records.schema.fieldNames():
            return records
        from pyspark.sql.types import StructField, StructType, TimestampType

        produce = records.produce
        micros = int(at.timestamp() * 1_000_000)

        def stamped(batches: Iterator[Any]) -> Iterator[Any]:
            import numpy as np
            import pyarrow as pa

            for batch in produce(batches):
                column = pa.array(np.full(batch.num_rows, micros, dtype=np.int64), pa.timestamp("us", tz="UTC"))
                yield batch.append_column(TIMESTAMP_COLUMN, column)

        schema = StructType([*records.schema.fields, StructField(TIMESTAMP_COLUMN, TimestampType())])
        return dataclasses.replace(records, produce=stamped, schema=schema)
    if TIMESTAMP_COLUMN in records.columns:
        return records
    from pyspark.sql import functions as F

    return records.withColumn(TIMESTAMP_COLUMN, F.lit(at).cast("timestamp"))


@dataclass
class SourceTransformed:
    """A source's records after its transforms, by the topic they go to."""

    by_topic: dict[str, DataFrame | ArrowRecords]
    #: Cached for a routing chain (read once, written per topic); unpersist after the writes.
    cached: DataFrame | None = None

    def release(self) -> None:
        if self.cached is not None:
            self.cached.unpersist()


def transform_source(chain: TransformChain, topic: str, records: DataFrame | ArrowRecords) -> SourceTransformed:
    if not chain:
        return SourceTransformed({topic: records})
    if isinstance(records, ArrowRecords) and chain.arrow_capable and not chain.routes:
        return SourceTransformed({topic: _through_arrow(chain, records, topic)})
    df = records.to_dataframe() if isinstance(records, ArrowRecords) else records
    out = chain.spark(df, topic)
    if not chain.routes:
        return SourceTransformed({topic: out.drop(TOPIC_COLUMN)})
    from pyspark.sql import functions as F

    out = out.persist()
    topics = _routed_topics(out)
    return SourceTransformed({t: out.filter(F.col(TOPIC_COLUMN) == t).drop(TOPIC_COLUMN) for t in topics}, out)


def _through_arrow(chain: TransformChain, records: ArrowRecords, topic: str | None) -> ArrowRecords:
    """`records` with the chain composed into its producer (dropping the `__topic` the chain adds
    on a source, whose topic is the segment's)."""
    produce = records.produce
    apply = chain.arrow_function(topic)
    schema = chain.output_schema(records.schema, topic)
    keep_topic = topic is None

    def transformed(batches: Iterator[Any]) -> Iterator[Any]:
        for batch in apply(produce(batches)):
            index = batch.schema.get_field_index(TOPIC_COLUMN)
            yield batch if keep_topic or index < 0 else batch.remove_column(index)

    if not keep_topic and TOPIC_COLUMN in schema.fieldNames():
        from pyspark.sql.types import StructType

        schema = StructType([f for f in schema.fields if f.name != TOPIC_COLUMN])
    return dataclasses.replace(records, produce=transformed, schema=schema)


def _routed_topics(df: DataFrame) -> list[str]:
    """The topics a routing chain sent rows to (one small aggregate), each checked as a topic name."""
    topics = [row[0] for row in df.select(TOPIC_COLUMN).distinct().collect()]
    for name in topics:
        if name is None:
            raise DataError("a transform set a record's topic to null")
        try:
            check_topic_name(name)
        except ValueError as exc:
            raise DataError(f"a transform routed records to an invalid topic: {exc}") from exc
    return sorted(topics)


@dataclass
class SinkTransformed:
    """A sink's batch after its transforms, still keyed by the topic each row was read from (the
    offsets a sink commits are that topic's); `routes` says which topics those rows now name."""

    by_topic: dict[str, DataFrame]
    arrow_by_topic: dict[str, ArrowRecords]
    routes: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


def transform_sink(
    chain: TransformChain, by_topic: Mapping[str, DataFrame], arrow_by_topic: Mapping[str, ArrowRecords]
) -> SinkTransformed:
    if not chain:
        return SinkTransformed(dict(by_topic), dict(arrow_by_topic), {t: (t,) for t in by_topic})
    frames = {topic: chain.spark(df) for topic, df in by_topic.items()}
    arrow = (
        {topic: _through_arrow(chain, records, None) for topic, records in arrow_by_topic.items()}
        if chain.arrow_capable
        else {}
    )
    routes = {t: tuple(_routed_topics(df)) for t, df in frames.items()} if chain.routes else {t: (t,) for t in frames}
    return SinkTransformed(frames, arrow, routes)
