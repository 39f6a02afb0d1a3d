"""What flows between a task and the runtime: positions, offsets and batches.

Positions follow RocketMQ Connect's model: a source *partition* (a map naming
what is read, e.g. `{"filename": "/data/in.txt"}`) maps to an *offset* (a map
saying how far, e.g. `{"position": 1024}`). Sink offsets follow Kafka's
`OffsetAndMetadata`: a number per topic partition plus free-form metadata the
sink commits together with it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the SDK must import without Spark (e.g. in the Airflow scheduler)
    from collections.abc import Callable, Sequence

    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

__all__ = [
    "CONNECT_DRIVER_MAX_ROWS",
    "DRIVER_MAX_ROWS",
    "ArrowRecords",
    "CommittedOffset",
    "ErrantRecordReporter",
    "ErrantRecords",
    "Positions",
    "Resync",
    "SinkBatch",
    "SourceBatch",
    "SourcePosition",
    "TopicPartition",
    "driver_max_rows",
    "keyed",
    "partition_key",
]

#: Columns the runtime adds to every topic row; sources must not produce them.
TOPIC_COLUMN = "__topic"
PARTITION_COLUMN = "__partition"
OFFSET_COLUMN = "__offset"


def partition_key(partition: Mapping[str, Any]) -> str:
    """Canonical text of a source partition, used as its identity in the store."""
    return json.dumps(partition, sort_keys=True, separators=(",", ":"), default=str)


@dataclass(frozen=True)
class SourcePosition:
    """How far a source task has read one source partition."""

    partition: Mapping[str, Any]
    offset: Mapping[str, Any]


class Positions(Mapping[str, SourcePosition]):
    """Read-only view of a connector's committed source positions."""

    def __init__(self, positions: Mapping[str, SourcePosition] | None = None) -> None:
        self._by_key = dict(positions or {})

    def offset(self, partition: Mapping[str, Any]) -> Mapping[str, Any] | None:
        """The committed offset of `partition`, or None when it was never read."""
        found = self._by_key.get(partition_key(partition))
        return found.offset if found else None

    def __getitem__(self, key: str) -> SourcePosition:
        return self._by_key[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._by_key)

    def __len__(self) -> int:
        return len(self._by_key)


#: Work of at most this many rows is done in the Spark driver (`ArrowRecords.in_driver`): a Spark
#: job costs seconds of fixed start-up (the first one of an application starts the JVM's code paths
#: and the Python workers), about what one core spends on 250k table rows.
DRIVER_MAX_ROWS = 250_000

#: On a Spark Connect session (a warm pool) the driver is the pool's warm client, which shares no
#: cores with a JVM starting up: work of up to this many rows is done there in one Arrow stream.
#: Measured on 2 cores: a 1M-row window read from PostgreSQL in 3.6 s in the driver against 9.9 s
#: in four partitions of the warm server (which shares the cores with the database); see
#: bench/RESULTS.md for the sink's side. Streamed: the driver holds a batch at a time.
CONNECT_DRIVER_MAX_ROWS = 1_000_000


def driver_max_rows(spark: SparkSession) -> int:
    """The most rows `ArrowRecords.in_driver` work should hold for `spark`'s kind of session."""
    from connect_core.sdk._spark import is_connect

    return CONNECT_DRIVER_MAX_ROWS if is_connect(spark) else DRIVER_MAX_ROWS


@dataclass(frozen=True)
class ArrowRecords:
    """Rows made as Arrow batches from units of work: in Spark's Python workers, or in the driver.

    `units` are rows of `unit_schema` (say, one SQL statement per slice of a table). Spark runs
    `produce` (a `mapInArrow` function: input batches → record batches of `schema`) once per
    partition of `inputs`: `partitions` of them, by default one per unit. With `in_driver` the
    producer says the work is small (at most `DRIVER_MAX_ROWS` rows): the runtime runs `produce`
    over all the units in the driver itself, sparing a Spark job and its Python workers' start-up
    for a few rows.

    The runtime writes the batches to the topic straight from Arrow (pyarrow Parquet), sparing
    the JVM the Arrow → row → Parquet round trip; `to_dataframe()` is the same rows as a
    DataFrame, used where pyarrow cannot write the topic's file system.
    """

    spark: SparkSession
    units: Sequence[tuple[Any, ...]]
    unit_schema: StructType
    produce: Callable[[Iterator[Any]], Iterator[Any]]
    schema: StructType
    partitions: int | None = None
    in_driver: bool = False

    @property
    def inputs(self) -> DataFrame:
        """The units as a DataFrame, `partitions` Spark partitions (consecutive units in each, in order)."""
        from connect_core.sdk._spark import is_connect

        slices = self.partitions or max(1, len(self.units))
        if not is_connect(self.spark):
            return self.spark.createDataFrame(
                self.spark.sparkContext.parallelize(list(self.units), slices), self.unit_schema
            )
        # Spark Connect has no `parallelize`: `range` splits 0..n-1 into `slices` consecutive runs as
        # `parallelize` splits a list, and a broadcast join (which keeps the stream side's partitions
        # and order) puts unit i on row i. A `repartition` would spread the units round-robin from a
        # random start, reordering the partitions' output, and with it the offsets of a topic.
        from pyspark.sql import functions as F
        from pyspark.sql.types import LongType, StructField, StructType

        index = "__unit_index"
        units = self.spark.createDataFrame(
            [(i, *unit) for i, unit in enumerate(self.units)],
            StructType([StructField(index, LongType(), False), *self.unit_schema.fields]),
        )
        ids = self.spark.range(0, len(self.units), 1, slices).withColumnRenamed("id", index)
        return ids.join(F.broadcast(units), index).select(
            *[F.col("`{}`".format(n.replace("`", "``"))) for n in self.unit_schema.fieldNames()]
        )

    def to_dataframe(self) -> DataFrame:
        return self.inputs.mapInArrow(self.produce, self.schema)

    def collect_mapped(self, func: Callable[[Iterator[Any]], Iterator[Any]], schema: str) -> list[dict[str, Any]]:
        """`func` over the produced batches of each partition, its (few) output rows of `schema`:
        in the workers, or over all units at once in the driver when `in_driver`."""
        produce = self.produce  # the closure sent to the workers must not hold the SparkSession
        if not self.in_driver:
            rows = self.inputs.mapInArrow(lambda batches: func(produce(batches)), schema).collect()
            return [r.asDict() for r in rows]
        return [row for out in func(produce(iter([self._unit_batch()]))) for row in out.to_pylist()]

    def collect_arrow(self, func: Callable[[Iterator[Any]], Iterator[Any]]) -> Any:
        """`func` over the produced batches (it keeps `schema`'s columns: a filter), as one pyarrow
        Table in the driver: computed there when `in_driver`, else by Spark's workers."""
        import pyarrow as pa

        produce = self.produce
        if not self.in_driver:
            return self.inputs.mapInArrow(lambda batches: func(produce(batches)), self.schema).toArrow()
        from pyspark.sql.pandas.types import to_arrow_schema

        found = list(func(produce(iter([self._unit_batch()]))))
        return pa.Table.from_batches(found, schema=to_arrow_schema(self.schema, timezone="UTC") if not found else None)

    def _unit_batch(self) -> Any:
        import pyarrow as pa
        from pyspark.sql.pandas.types import to_arrow_schema

        names = self.unit_schema.fieldNames()
        return pa.RecordBatch.from_pylist(
            [dict(zip(names, u, strict=True)) for u in self.units], schema=to_arrow_schema(self.unit_schema)
        )


@dataclass(frozen=True)
class Resync:
    """One re-read of a source table (Airbyte's refresh, `connect resync NAME --table T`), as its rows
    travel through a topic: `generation` numbers the topic's re-reads (1, 2, …). Under `replace` a sink
    writes the re-read's rows into a fresh copy of its target and swaps it in for the target at the
    re-read's end, in one atomic step (a reader never sees half a table); under `retain` the rows are
    written as any others (upserts replace the rows they re-read, the rows deleted since stay)."""

    generation: int
    mode: str  # "replace" | "retain"
    #: On a source's batch: these rows are the re-read's first (the runtime notes where it begins).
    begins: bool = False
    #: On a source's batch: these rows are its last (the runtime notes where it ends); on a sink's
    #: batch: the sink has now been given every row of the re-read: swap the copy in after writing them.
    ends: bool = False


@dataclass(frozen=True)
class SourceBatch:
    """One micro-batch read by a source task.

    `records` maps each topic to the rows for it (a DataFrame, or ArrowRecords,
    per topic; a source writing one topic has one entry). `positions` are the
    offsets to commit with these rows: the runtime stores them in the same
    transaction as the rows, so they advance only if the rows land.
    """

    records: Mapping[str, DataFrame | ArrowRecords] = field(default_factory=dict)
    positions: tuple[SourcePosition, ...] = ()
    #: What the source tells about the system it reads (how much log a replication slot holds):
    #: JSON values, kept in the run's stats as `source` (shown by `connect status` and REST's runs).
    stats: Mapping[str, Any] = field(default_factory=dict)
    #: Topic → the re-read (`connect resync`) whose rows this batch's rows of the topic are: the runtime
    #: records where in the topic it begins and ends (`Resync.begins`, `Resync.ends`), in this commit.
    resyncs: Mapping[str, Resync] = field(default_factory=dict)

    @classmethod
    def empty(cls) -> SourceBatch:
        """Nothing new: commit nothing."""
        return cls()


def keyed(records: DataFrame | ArrowRecords, fields: Sequence[str]) -> DataFrame | ArrowRecords:
    """`records` with each row's key (`__key`) a struct of its `fields`, as a source sets keys (the
    JDBC source: the table's primary key)."""
    from connect_core.sdk.errors import ConfigError

    names = records.schema.fieldNames() if isinstance(records, ArrowRecords) else records.columns
    missing = [f for f in fields if f not in names]
    if missing:
        raise ConfigError(f"key field(s) {missing} are not columns of the records ({', '.join(names)})")
    if not isinstance(records, ArrowRecords):
        from pyspark.sql import functions as F

        return records.withColumn("__key", F.struct(*[F.col(f"`{f}`") for f in fields]))
    import dataclasses

    from pyspark.sql.types import StructField, StructType

    produce, wanted = records.produce, list(fields)

    def with_key(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        for batch in produce(batches):
            key = pa.StructArray.from_arrays([batch.column(f) for f in wanted], names=wanted)
            yield batch.append_column("__key", key)

    key_type = StructType([records.schema[f] for f in wanted])
    schema = StructType([*records.schema.fields, StructField("__key", key_type)])
    return dataclasses.replace(records, produce=with_key, schema=schema)


#: Kafka's `Stage` names, for a dead-letter record's `__connect.errors.stage` header.
STAGES = ("TASK_POLL", "TRANSFORMATION", "SCHEMA_CONTRACT", "TASK_PUT")


@dataclass(frozen=True)
class ErrantRecords:
    """Records that failed, with why (Kafka's `ErrantRecordReporter.report`, for a batch).

    `rows` are the failed records as the task had them (a pyarrow Table: value columns and the
    `__` record columns; a sink's keep `__topic`, `__partition` and `__offset`); `exception_class`
    and `message` are one per row, or one for all. `stage` is one of `STAGES`; `origin` names what
    failed (a transform's class, the task's class) when it is not the task itself."""

    rows: Any
    exception_class: Sequence[str] | str
    message: Sequence[str] | str
    stage: str = "TASK_PUT"
    origin: str | None = None

    def per_row(self, value: Sequence[str] | str) -> list[str]:
        n = self.rows.num_rows
        return [value] * n if isinstance(value, str) else list(value)


class ErrantRecordReporter:
    """Where a task reports records it could not handle under `errors.tolerance=all`; the runtime
    counts them, logs them if asked, and sends them to the dead-letter topic. A task gets one in
    `TaskContext.errant` only when the connector tolerates errors: without it, it raises instead."""

    def report(self, errant: ErrantRecords) -> None:
        raise NotImplementedError


@dataclass(frozen=True, order=True)
class TopicPartition:
    topic: str
    partition: int


@dataclass(frozen=True)
class CommittedOffset:
    """A sink's committed position in one topic partition (next offset to read)."""

    offset: int
    metadata: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class SinkBatch:
    """Committed topic rows a sink task has not consumed yet.

    `data` holds the topics' own columns plus `__topic`, `__partition` and
    `__offset`; `ordered()` sorts it in offset order (sinks whose output order
    matters, such as files, use that). `row_count` is known from the segment
    metadata, without touching the data.
    """

    data: DataFrame
    row_count: int
    partitions: tuple[TopicPartition, ...]
    by_topic: Mapping[str, DataFrame] = field(default_factory=dict)
    arrow_by_topic: Mapping[str, ArrowRecords] = field(default_factory=dict)
    #: Topic read → the topics its rows name after the sink's transforms (a router such as Kafka's
    #: `RegexRouter` renames them; `__topic` holds the new name). Offsets stay the topic read's.
    routes: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: Topic read → how its columns changed since the sink's last run, for `schema.propagation`
    #: (`added`, `dropped`, `retyped`, `nullability`, `key`: the runtime's schema diff as a dict);
    #: only topics that changed, and only when `schema.propagation` is set.
    schema_changes: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    #: Topic read → the `replace` re-read (`Resync`) all of this batch's rows of that topic belong to
    #: (a batch never straddles a re-read's beginning or end): the sink writes them into the copy of
    #: its target for `generation` (made empty, with the target's columns, on first use) and, when
    #: `ends`, swaps the copy in atomically. A topic with `ends` may have no rows in the batch.
    replacing: Mapping[str, Resync] = field(default_factory=dict)

    def destination(self, name: str) -> str:
        """The one topic the rows read from `name` now name (the target a sink derives from a
        topic, e.g. a table, follows it); ConfigError when a transform spread them over several."""
        found = self.routes.get(name, (name,))
        if len(found) > 1:
            from connect_core.sdk.errors import ConfigError

            raise ConfigError(
                f"the transforms route the records of topic `{name}` to {len(found)} topics ({', '.join(found)}); "
                "this sink writes one topic's records to one target"
            )
        return found[0] if found else name

    def arrow(self, name: str) -> ArrowRecords | None:
        """One topic's rows (the same columns as `topic(name)`) as Arrow batches read from the
        topic's files by the Python workers themselves, with no JVM in between; None where the
        runtime cannot offer that (topics not on a local file system)."""
        return self.arrow_by_topic.get(name)

    def read_topics(self) -> list[str]:
        """The topics this batch holds records of, by name: a sink writes these (an owned partition's
        topic with nothing new has no rows here, and its target is left alone)."""
        if self.by_topic:
            return sorted(self.by_topic)
        return sorted({tp.topic for tp in self.partitions})

    def topic(self, name: str) -> DataFrame:
        """One topic's rows with only that topic's columns (plus `__topic`, `__partition`, `__offset`)."""
        if name in self.by_topic:
            return self.by_topic[name]
        from pyspark.sql import functions as F

        return self.data.filter(F.col(TOPIC_COLUMN) == name)

    def ordered(self) -> DataFrame:
        """All rows in one Spark partition, in offset order: for sinks that write from the driver.

        (A global `orderBy` would add a sampling job for range partitioning;
        a driver-side writer reads one stream anyway.)
        """
        return self.data.coalesce(1).sortWithinPartitions(TOPIC_COLUMN, PARTITION_COLUMN, OFFSET_COLUMN)

    def values(self) -> DataFrame:
        """The records' values: the topic's own columns, without key, headers or any other record part."""
        from connect_core.sdk.transforms import column, is_value_column

        return self.data.select(*[column(c) for c in self.data.columns if is_value_column(c)])
