"""Where the runner applies a connector's transforms: to a source's records before they are written
to their topic, and to a sink's batch after it is read.

Records made as Arrow (`ArrowRecords`) stay Arrow: the chain is composed into their producer, so
it runs in the same Python worker, batch by batch, without the JVM. A chain that routes records to
other topics, or holds a whole-batch (SQL) step, runs on the DataFrame instead.

Under `errors.tolerance=all` the records a transform cannot convert are marked by the chain
(`errant`) and set aside here, as `ErrantRecords` for the run's dead letters; where no step can
fail, nothing is marked and nothing below costs more. Splitting a marked output takes two reads
of it (the good rows, the errant ones), so it is persisted first and read once. A producer
running in a Spark worker has no way back to the driver but its rows, so a source's Arrow records
with marks leave the Arrow write path: they are split on a DataFrame (or, when the producer runs
in the driver, on its Arrow table there). A sink's Arrow records lose their marked rows in the
producer; the errant ones are taken from the sink's DataFrame.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from connect_core.runtime.processing.chain import TransformChain
from connect_core.runtime.processing.errant import arrow_good, mark_columns, split_arrow, split_spark
from connect_core.sdk.config import check_topic_name
from connect_core.sdk.records import TOPIC_COLUMN, ArrowRecords, ErrantRecords
from connect_core.sdk.transforms import TIMESTAMP_COLUMN, DataError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

__all__ = [
    "SinkTransformed",
    "SourceTransformed",
    "arrow_in_driver",
    "stamp_source",
    "transform_sink",
    "transform_source",
]


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
    #: The records a transform could not convert (`errors.tolerance=all`), for the run's dead letters.
    errant: list[ErrantRecords] = field(default_factory=list)
    #: Frames persisted to be read more than once (a routing chain's output, written per topic; a
    #: marked output, split in two); unpersisted after the writes.
    cached: list[DataFrame] = field(default_factory=list)

    def release(self) -> None:
        for df in self.cached:
            df.unpersist()


def transform_source(chain: TransformChain, topic: str, records: DataFrame | ArrowRecords) -> SourceTransformed:
    if not chain:
        return SourceTransformed({topic: records})
    done = SourceTransformed({})
    if isinstance(records, ArrowRecords) and chain.arrow_capable and not chain.routes:
        arrow = _through_arrow(chain, records, topic)
        if not mark_columns(arrow.schema.fieldNames()):
            return SourceTransformed({topic: arrow})
        if arrow.in_driver:  # a few rows: split in the driver, no Spark job
            good, done.errant = split_arrow(arrow.collect_arrow(_unchanged), chain.steps)
            done.by_topic[topic] = arrow_in_driver(arrow.spark, good)
            return done
        out = arrow.to_dataframe()
    else:
        df = records.to_dataframe() if isinstance(records, ArrowRecords) else records
        out = chain.spark(df, topic, done.cached)
    if chain.routes or mark_columns(out.columns):
        out = out.persist()
        done.cached.append(out)
    out, done.errant = split_spark(out, chain.steps)
    if not chain.routes:
        done.by_topic[topic] = out.drop(TOPIC_COLUMN)
        return done
    from pyspark.sql import functions as F

    done.by_topic.update({t: out.filter(F.col(TOPIC_COLUMN) == t).drop(TOPIC_COLUMN) for t in _routed_topics(out)})
    return done


def _unchanged(batches: Iterator[Any]) -> Iterator[Any]:
    return batches


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

    if not keep_topic:
        schema = _without(schema, [TOPIC_COLUMN])
    return dataclasses.replace(records, produce=transformed, schema=schema)


def _good_only(records: ArrowRecords) -> ArrowRecords:
    """Marked records without the rows a transform set aside (nor the marks)."""
    marks = mark_columns(records.schema.fieldNames())
    if not marks:
        return records
    produce = records.produce

    def good(batches: Iterator[Any]) -> Iterator[Any]:
        for batch in produce(batches):
            yield arrow_good(batch)

    return dataclasses.replace(records, produce=good, schema=_without(records.schema, marks))


def _without(schema: StructType, names: list[str]) -> StructType:
    from pyspark.sql.types import StructType

    return StructType([f for f in schema.fields if f.name not in names])


def arrow_in_driver(spark: SparkSession, table: Any) -> ArrowRecords:
    """A (small) pyarrow Table as ArrowRecords the driver writes itself: no Spark job for a few rows."""
    from pyspark.sql.pandas.types import from_arrow_schema
    from pyspark.sql.types import LongType, StructField, StructType

    batches = table.to_batches()
    units = StructType([StructField("unit", LongType())])
    return ArrowRecords(
        spark, [(0,)], units, lambda _: iter(batches), from_arrow_schema(table.schema), partitions=1, in_driver=True
    )


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
    #: The records a transform could not convert (`errors.tolerance=all`), for the run's dead letters.
    errant: list[ErrantRecords] = field(default_factory=list)
    #: Marked outputs, persisted before they were split; unpersisted once the sink has written.
    cached: list[DataFrame] = field(default_factory=list)

    def release(self) -> None:
        for df in self.cached:
            df.unpersist()


def transform_sink(
    chain: TransformChain, by_topic: Mapping[str, DataFrame], arrow_by_topic: Mapping[str, ArrowRecords]
) -> SinkTransformed:
    if not chain:
        return SinkTransformed(dict(by_topic), dict(arrow_by_topic), {t: (t,) for t in by_topic})
    done = SinkTransformed({}, {})
    for topic, df in by_topic.items():
        out = chain.spark(df, cache=done.cached)
        if mark_columns(out.columns):
            out = out.persist()
            done.cached.append(out)
            out, errant = split_spark(out, chain.steps, topic)
            done.errant += errant
        done.by_topic[topic] = out
    if chain.arrow_capable:
        done.arrow_by_topic = {t: _good_only(_through_arrow(chain, r, None)) for t, r in arrow_by_topic.items()}
    if chain.routes:
        done.routes = {t: tuple(_routed_topics(df)) for t, df in done.by_topic.items()}
    else:
        done.routes = {t: (t,) for t in done.by_topic}
    return done
