"""What `jvm_archive.build_archive` runs through spark-submit: the Spark work a runner does (a
session, Parquet written and read with a given schema, Arrow exchanged with Python workers, a small
DataFrame joined by broadcast, an aggregate collected), so the classes it loads go into the archive.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterator
from typing import Any

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]  # see _runner_main.py


def _same(batches: Iterator[Any]) -> Iterator[Any]:
    yield from batches


def main() -> None:
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    spark = SparkSession.builder.getOrCreate()
    with tempfile.TemporaryDirectory() as work:
        rows = spark.range(20_000, numPartitions=2).select(
            F.col("id"),
            F.col("id").cast("string").alias("s"),
            F.col("id").cast("decimal(18,4)").alias("d"),
            (F.col("id") / 7).alias("f"),
            F.timestamp_micros(F.col("id")).alias("t"),
            F.to_date(F.timestamp_micros(F.col("id"))).alias("day"),
            (F.col("id") % 2 == 0).alias("b"),
            F.col("id").cast("string").cast("binary").alias("bin"),
        )
        rows.write.parquet(os.path.join(work, "a"))
        back = spark.read.schema(rows.schema).parquet(os.path.join(work, "a"))
        index = spark.createDataFrame([(0, 10), (1, 20)], "k long, base long")
        joined = back.withColumn("k", F.col("id") % 2).join(F.broadcast(index), on="k")
        joined.mapInArrow(_same, joined.schema).write.parquet(os.path.join(work, "b"))
        spark.read.parquet(os.path.join(work, "b")).groupBy("b").agg(F.max("id"), F.count("*")).collect()
    spark.stop()


if __name__ == "__main__":
    main()
