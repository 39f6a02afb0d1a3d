"""What hiding a column costs on 1M rows: Debezium's salted hash (`column.mask.hash.SHA-256…`) as
Spark SQL (`sha2(concat(salt, v))`, in the JVM) and over Arrow (hashlib, one Python call a value),
and HashField's HMAC-SHA256 as an Arrow UDF on Spark and over Arrow batches.

Reproduce: `.venv/bin/python bench/masking_bench.py [--rows 1000000]` (local[2], the test suite's
Spark settings). Each figure is the best of 3 runs of the whole job after a warm-up, with the
same Spark job without hashing as the baseline; the table goes to bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # `_results`, as the other benchmarks
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)


def _best(run: Callable[[], Any], times: int = 3) -> float:
    found = []
    for _ in range(times):
        start = time.perf_counter()
        run()
        found.append(time.perf_counter() - start)
    return min(found)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1_000_000)
    rows = parser.parse_args().rows

    import pyarrow as pa
    from _results import write_sections
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from connect_core.connectors._masks import masked_batch, masked_frame, parse_masks
    from connect_core.transforms.hashing import HashFieldConfig, HashFieldValue

    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.log.level", "WARN")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    df = spark.range(rows, numPartitions=2).select(
        F.concat(F.lit("user"), F.col("id"), F.lit("@example.com")).alias("email")
    )
    df = df.cache()
    df.count()
    batch = pa.RecordBatch.from_pydict({"email": [f"user{i}@example.com" for i in range(rows)]})
    masks, _ = parse_masks({"column.mask.hash.SHA-256.with.salt.bench-salt-1": "db.t.email"})
    rules = masks.for_columns(["db.t"], ["email"])
    hmac = HashFieldValue(HashFieldConfig.model_validate({"fields": "email", "hmac.key": "bench-key-0123456789abcdef"}))

    def spark_job(frame: Any) -> Callable[[], Any]:
        return lambda: frame.select(F.max(F.length("email"))).collect()

    hashed_udf = df.select(*hmac.spark(df).values()).toDF("email")
    cases = {
        "baseline (Spark, no hashing)": spark_job(df),
        "column.mask.hash SHA-256, Spark SQL": spark_job(masked_frame(df, rules)),
        "HashField HMAC-SHA256, Spark (Arrow UDF)": spark_job(hashed_udf),
        "column.mask.hash SHA-256, Arrow (1 core)": lambda: masked_batch(batch, rules),
        "HashField HMAC-SHA256, Arrow (1 core)": lambda: hmac.arrow(batch),
    }
    lines = [
        f"## hiding a column: salted hash (column masks) and HMAC (HashField) on {rows:,} rows",
        "",
        "Reproduce: `.venv/bin/python bench/masking_bench.py`. One column of e-mail addresses, local[2] on this "
        "2-core machine; Spark jobs compute `max(length(email))` of the cached rows (baseline: without hashing); "
        "Arrow: one record batch in this process, one core. Best of 3 after a warm-up.",
        "",
        "| job | s |",
        "|---|---:|",
    ]
    for name, run in cases.items():
        run()  # warm-up: JIT, Python workers
        lines.append(f"| {name} | {_best(run):.2f} |")
        print(lines[-1])
    spark.stop()
    write_sections(lines)


if __name__ == "__main__":
    main()
