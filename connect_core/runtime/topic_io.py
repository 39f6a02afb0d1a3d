"""Reading and writing topic segments with Spark (runs inside the Spark driver).

Every row of a segment carries two bookkeeping columns: `__run` (the task run
that wrote it) and `__seq` (its order within the run's output, from
`monotonically_increasing_id`, computed in the JVM). A reader joins `__run` to
the committed segment's start offset and numbers rows by `__seq`, which gives
each row its exact offset without any ordering work at write time.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from connect_core.runtime.topics import Segment
from connect_core.sdk.errors import FatalError
from connect_core.sdk.records import OFFSET_COLUMN, PARTITION_COLUMN, TOPIC_COLUMN

__all__ = ["RESERVED_COLUMNS", "delete_path", "read_segments", "write_segment"]

RUN_COLUMN = "__run"
SEQ_COLUMN = "__seq"
RESERVED_COLUMNS = frozenset({RUN_COLUMN, SEQ_COLUMN, TOPIC_COLUMN, PARTITION_COLUMN, OFFSET_COLUMN})


def write_segment(spark: SparkSession, df: DataFrame, path: str, run_id: int) -> int:
    """Write `df` as a Parquet segment at `path`; returns its row count (0: nothing written)."""
    clash = RESERVED_COLUMNS.intersection(df.columns)
    if clash:
        raise FatalError(f"source rows must not have the runtime's columns {sorted(clash)}; rename them")
    (
        df.withColumn(SEQ_COLUMN, F.monotonically_increasing_id())
        .withColumn(RUN_COLUMN, F.lit(run_id).cast("long"))
        .write.mode("errorifexists")
        .parquet(path)
    )
    return _row_count(spark, path)


def _row_count(spark: SparkSession, path: str) -> int:
    """Rows in the Parquet files at `path`, from their footers (no data is read).

    Local paths are counted with pyarrow in the driver (milliseconds); other
    file systems through a Spark job, which plans the same footer-only count.
    """
    local = path[len("file://") :] if path.startswith("file://") else path
    if "://" not in local:
        return sum(pq.read_metadata(f).num_rows for f in Path(local).glob("*.parquet"))
    return spark.read.parquet(path).count()


def read_segments(spark: SparkSession, segments: Sequence[Segment]) -> DataFrame:
    """The rows of `segments` with `__topic`, `__partition` and exact `__offset` columns."""
    if not segments:
        raise ValueError("read_segments needs at least one segment")
    index = spark.createDataFrame(
        [(s.run_id, s.topic, s.partition, s.start_offset) for s in segments],
        f"{RUN_COLUMN} long, {TOPIC_COLUMN} string, {PARTITION_COLUMN} int, __start long",
    )
    # A run writes one segment per topic, so (run, topic) identifies a segment.
    frames = [
        spark.read.option("mergeSchema", "true")
        .parquet(*[s.path for s in segments if s.topic == topic])
        .join(F.broadcast(index.where(F.col(TOPIC_COLUMN) == topic)), on=RUN_COLUMN)
        for topic in sorted({s.topic for s in segments})
    ]
    joined = frames[0]
    for frame in frames[1:]:
        joined = joined.unionByName(frame, allowMissingColumns=True)
    rank = F.row_number().over(Window.partitionBy(RUN_COLUMN, TOPIC_COLUMN).orderBy(SEQ_COLUMN))
    return joined.withColumn(OFFSET_COLUMN, F.col("__start") + rank - 1).drop("__start", RUN_COLUMN, SEQ_COLUMN)


def delete_path(spark: SparkSession, path: str) -> None:
    """Recursively delete `path` on whatever Hadoop file system it is on."""
    jvm: Any = spark.sparkContext._jvm
    hadoop_path = jvm.org.apache.hadoop.fs.Path(path)
    fs = hadoop_path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    fs.delete(hadoop_path, True)
