"""Topic segments written from Arrow by the Python workers, and read back both ways.

A source's ArrowRecords become the same Parquet segment Spark would write (its schema,
field metadata included, in the footer); a sink gets the same rows with the same exact
offsets whether it reads `batch.topic()` (Spark) or `batch.arrow()` (pyarrow in the workers).
"""

from __future__ import annotations

import dataclasses
import pickle
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from connect_core.runtime.topics.segments import arrow_topics, read_topics, write_segment
from connect_core.runtime.topics.store import Segment
from connect_core.sdk import ArrowRecords


def _records(
    spark: Any, slices: list[tuple[int, int]], *, extra: bool = False, in_driver: bool = False
) -> ArrowRecords:
    """Rows n in each [lo, hi) slice, one slice per Spark partition, made in the worker (or all in
    the driver)."""
    from pyspark.sql.types import LongType, StringType, StructField, StructType, TimestampNTZType

    fields = [
        StructField("n", LongType(), True, {"connect.sql.type": "bigint"}),
        StructField("label", StringType(), True, {"connect.sql.type": "text"}),
        StructField("at", TimestampNTZType(), True),
    ]
    if extra:
        fields.append(StructField("added", StringType(), True))
    schema = StructType(fields)

    def produce(inputs: Iterator[Any]) -> Iterator[Any]:
        import datetime

        import pyarrow as pa

        for batch in inputs:
            for lo, hi in zip(batch.column(0).to_pylist(), batch.column(1).to_pylist(), strict=True):
                for start in range(lo, hi, 7):  # several batches per slice
                    ns = list(range(start, min(start + 7, hi)))
                    columns = {
                        "n": pa.array(ns, pa.int64()),
                        "label": pa.array([None if n % 5 == 0 else f"é{n}" for n in ns]),
                        "at": pa.array(
                            [datetime.datetime(2024, 1, 1, 0, 0, n % 60, n) for n in ns], pa.timestamp("us")
                        ),
                    }
                    if extra:
                        columns["added"] = pa.array([f"x{n}" for n in ns])
                    yield pa.RecordBatch.from_pydict(columns)

    units = StructType([StructField("lo", LongType()), StructField("hi", LongType())])
    return ArrowRecords(spark, slices, units, produce, schema, in_driver=in_driver)


def _arrow_rows(records: ArrowRecords) -> list[dict[str, Any]]:
    """What `records.produce` yields (in the workers, or in the driver), as Python rows."""

    def collect(batches: Iterator[Any]) -> Iterator[Any]:
        import pickle

        import pyarrow as pa

        for batch in batches:
            yield pa.RecordBatch.from_pydict({"rows": [pickle.dumps(batch.to_pylist())]})

    return [row for r in records.collect_mapped(collect, "rows binary") for row in pickle.loads(r["rows"])]


@pytest.mark.parametrize("in_driver", [False, True], ids=["workers", "driver"])
def test_arrow_segments_read_back_with_exact_offsets_both_ways(spark: Any, tmp_path: Path, in_driver: bool) -> None:
    first = tmp_path / "t" / "partition=0" / "run=1"
    second = tmp_path / "t" / "partition=0" / "run=2"
    records = _records(spark, [(0, 20), (20, 23), (23, 40)], in_driver=in_driver)
    assert write_segment(spark, records, str(first), 1) == 40
    # the workers write one file per slice; the driver one file for all
    assert len(list(first.glob("*.parquet"))) == (1 if in_driver else 3)
    # a later run whose rows gained a column; Spark wrote this one (a DataFrame)
    later = _records(spark, [(40, 50)], extra=True).to_dataframe()
    assert write_segment(spark, later, str(second), 2) == 10
    segments = [Segment("t", 0, 0, 40, 40, str(first), 1), Segment("t", 0, 40, 50, 10, str(second), 2)]

    frame = read_topics(spark, segments)["t"]
    assert frame.schema["n"].metadata == {"connect.sql.type": "bigint"}  # kept in the footer
    by_spark = {r["__offset"]: r.asDict() for r in frame.collect()}
    assert sorted(by_spark) == list(range(50))
    # the offsets follow the source's order: slice by slice, row by row
    assert [by_spark[o]["n"] for o in range(50)] == list(range(50))

    arrow = arrow_topics(spark, segments, {"t": frame})["t"]
    assert arrow.schema == frame.schema
    assert arrow.in_driver  # 50 rows: the sink reads them in the driver
    by_arrow = {r["__offset"]: r for r in _arrow_rows(arrow)}
    by_workers = {r["__offset"]: r for r in _arrow_rows(dataclasses.replace(arrow, in_driver=False))}
    assert by_arrow == by_spark == by_workers
    assert by_arrow[3]["added"] is None and by_arrow[45]["added"] == "x45"
    assert by_arrow[5]["label"] is None and by_arrow[6]["label"] == "é6"


def test_an_empty_arrow_source_writes_no_rows(spark: Any, tmp_path: Path) -> None:
    path = tmp_path / "t" / "partition=0" / "run=3"
    assert write_segment(spark, _records(spark, [(0, 0), (5, 5)]), str(path), 3) == 0
    assert not list(path.glob("*.parquet"))


def test_one_big_file_is_read_by_row_groups_in_several_units(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A source that read in the driver writes one file; a sink still reads it in parallel, each unit
    a run of its row groups, every offset exactly once."""
    import pyarrow.parquet as pq

    from connect_core.runtime.topics import segments as segments_module

    monkeypatch.setattr(segments_module, "ROW_GROUP_BYTES", 1)  # a row group per produced batch
    path = tmp_path / "t" / "partition=0" / "run=1"
    assert write_segment(spark, _records(spark, [(0, 60)], in_driver=True), str(path), 1) == 60
    (file,) = path.glob("*.parquet")
    assert pq.read_metadata(file).num_row_groups == 9  # batches of 7 rows
    segments = [Segment("t", 0, 0, 60, 60, str(path), 1)]
    frame = read_topics(spark, segments)["t"]

    arrow = arrow_topics(spark, segments, {"t": frame})["t"]
    groups = sorted((first, n) for _, _, _, first, n in arrow.units)
    assert len(groups) == arrow.partitions > 1
    covered = [g for first, n in groups for g in range(first, first + n)]
    assert covered == list(range(9))  # every row group in exactly one unit
    rows = _arrow_rows(dataclasses.replace(arrow, in_driver=False))
    assert sorted(r["__offset"] for r in rows) == list(range(60))
    assert all(r["n"] == r["__offset"] for r in rows)
