"""`is_connect`: whether a SparkSession is a Spark Connect client.

A task may run on a classic session (a Spark driver in this process, with a `SparkContext` and a
JVM behind py4j) or on a Spark Connect session (a warm Spark pool elsewhere, reached over gRPC):
DataFrames, `mapInArrow`, `toArrow`, `persist` and `createDataFrame` work on both, but
`sparkContext`, RDDs and anything reaching into the JVM (`_jvm`, `_jsc`, `_jdf`) exist only on a
classic one. Code that needs those asks this first.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["is_connect"]


def is_connect(spark: SparkSession) -> bool:
    """True for a Spark Connect client session (`SparkSession.builder.remote(...)`), False for a classic one."""
    # By its class, not `pyspark.sql.utils.is_remote()`: that reads the process's environment, and one
    # process may hold sessions of both kinds (a test's classic session beside a run's Connect one).
    return type(spark).__module__.startswith("pyspark.sql.connect.")
