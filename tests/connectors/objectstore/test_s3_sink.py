"""The S3 sink against a real S3 endpoint (moto's server on loopback), read back with pyarrow: names
as Confluent's, each format and partitioner, rotation, a rerun after a crash, and the executor path."""

from __future__ import annotations

import datetime as dt
import gzip
import json
import logging
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from connect_core.connectors.objectstore import S3SinkConfig, S3SinkConnector
from connect_core.connectors.objectstore import sink as sink_module
from connect_core.runtime.context import Runtime
from connect_core.runtime.store.metrics import MetricsStore
from connect_core.sdk import LineageDataset, NotFoundError
from connect_core.sdk.testing import faults
from connect_core.testing.s3 import S3Server
from tests.conftest import make_runner
from tests.connectors.objectstore.conftest import RowsSource, objects, read_all, s3_sink

SCHEMA = "id long, name string, region string, ts timestamp"
BASE = dt.datetime(2024, 3, 9, 22, 30, tzinfo=dt.UTC)


def rows(start: int, count: int) -> list[tuple[Any, ...]]:
    """Rows `start`.. of a topic: a record every 20 minutes from `BASE`, three regions."""
    return [
        (i, f"n{i}", ("eu", "us", "ap")[i % 3], BASE + dt.timedelta(minutes=20 * i))
        for i in range(start, start + count)
    ]


def produce(runtime: Runtime, runner: Any, topic: str, batch: list[tuple[Any, ...]], schema: str = SCHEMA) -> None:
    """`batch` appended to `topic` by a source run."""
    try:
        runtime.connectors.get(f"src-{topic}")
    except NotFoundError:
        runtime.create_connector(f"src-{topic}", {"connector.class": "RowsSource", "topic": topic})
    RowsSource.pending[topic] = (batch, schema)
    assert runner.run(f"src-{topic}", 0).state == "SUCCEEDED"


def sink_run(runner: Any, name: str = "sink") -> Any:
    result = runner.run(name, 0)
    assert result.state == "SUCCEEDED", result.message
    return result


def test_a_topic_becomes_parquet_objects_named_as_confluents(
    rows_runtime: Runtime, spark: Any, s3: S3Server, bucket: str
) -> None:
    runner = make_runner(rows_runtime, spark)
    produce(rows_runtime, runner, "orders", rows(0, 25))
    rows_runtime.create_connector("sink", s3_sink(s3, bucket, "orders", **{"flush.size": 10}))
    sink_run(runner)
    assert sorted(objects(s3.filesystem(), bucket)) == [
        f"topics/orders/partition=0/orders+0+{o:010d}.snappy.parquet" for o in (0, 10, 20)
    ]
    model = S3SinkConfig.model_validate(rows_runtime.connectors.get("sink").config)
    assert S3SinkConnector().lineage(model) == [LineageDataset(f"s3://{bucket}", "topics/orders", "orders")]
    table = read_all(s3.filesystem(), bucket)
    assert table.column_names == ["id", "name", "region", "ts"]  # the values only, no record parts
    assert table.to_pylist() == [dict(zip(("id", "name", "region", "ts"), r, strict=True)) for r in rows(0, 25)]

    # the next run starts at the committed offset: new files, the old ones untouched
    produce(rows_runtime, runner, "orders", rows(25, 5))
    sink_run(runner)
    assert (
        sorted(objects(s3.filesystem(), bucket))[-1] == "topics/orders/partition=0/orders+0+0000000025.snappy.parquet"
    )
    assert read_all(s3.filesystem(), bucket).column("id").to_pylist() == list(range(30))
    assert rows_runtime.connectors.sink_offsets("sink")[
        next(iter(rows_runtime.connectors.sink_offsets("sink")))
    ].metadata == {
        "files_written": 1,
        "rows_written": 5,
        "bytes_written": objects(s3.filesystem(), bucket)[
            "topics/orders/partition=0/orders+0+0000000025.snappy.parquet"
        ],
    }
    # what /metrics sums: every object the two runs wrote, and their bytes
    (task,) = [t for t in MetricsStore(rows_runtime.engine).snapshot(60).runs if t.connector == "sink"]
    assert (task.files_written, task.bytes_written) == (4, sum(objects(s3.filesystem(), bucket).values()))


def test_json_lines_with_a_field_partitioner(rows_runtime: Runtime, spark: Any, s3: S3Server, bucket: str) -> None:
    runner = make_runner(rows_runtime, spark)
    produce(rows_runtime, runner, "events", rows(0, 9))
    config = {
        "format.class": "io.confluent.connect.s3.format.json.JsonFormat",
        "partitioner.class": "io.confluent.connect.storage.partitioner.FieldPartitioner",
        "partition.field.name": "region",
        "topics.dir": "landing/raw",
        "flush.size": 2,
        "s3.compression.type": "gzip",
    }
    rows_runtime.create_connector("sink", s3_sink(s3, bucket, "events", **config))
    sink_run(runner)
    found = sorted(objects(s3.filesystem(), bucket))
    # region eu: offsets 0, 3, 6 → files starting at 0 (0, 3) and 6; us: 1, 4, 7; ap: 2, 5, 8
    assert found == sorted(
        f"landing/raw/events/region={region}/events+0+{start:010d}.json.gz"
        for region, starts in (("eu", (0, 6)), ("us", (1, 7)), ("ap", (2, 8)))
        for start in starts
    )
    with s3.filesystem().open_input_stream(
        f"{bucket}/landing/raw/events/region=us/events+0+0000000001.json.gz", compression=None
    ) as f:
        lines = [json.loads(line) for line in gzip.decompress(f.read()).decode().splitlines()]
    ms = int((BASE - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)).total_seconds() * 1000)
    assert lines == [
        {"id": 1, "name": "n1", "region": "us", "ts": ms + 20 * 60_000},
        {"id": 4, "name": "n4", "region": "us", "ts": ms + 80 * 60_000},
    ]


@pytest.mark.parametrize(
    ("partitioner", "zone", "hourly"),
    [
        ("DailyPartitioner", "Europe/Berlin", False),  # its midnight is 23:00 UTC: not UTC's day
        ("HourlyPartitioner", "Asia/Kolkata", True),  # UTC+5:30: its hours are not UTC's
    ],
)
def test_time_based_layouts_in_a_fixed_time_zone(
    rows_runtime: Runtime, spark: Any, s3: S3Server, bucket: str, partitioner: str, zone: str, hourly: bool
) -> None:
    runner = make_runner(rows_runtime, spark)
    batch = rows(0, 12)  # 22:30 UTC to 02:10 UTC the next day, every 20 minutes
    produce(rows_runtime, runner, "clicks", batch)
    config = {
        "partitioner.class": f"io.confluent.connect.storage.partitioner.{partitioner}",
        "timezone": zone,
        "locale": "en-US",
        "timestamp.extractor": "RecordField",
        "timestamp.field": "ts",
    }
    rows_runtime.create_connector("sink", s3_sink(s3, bucket, "clicks", **config))
    sink_run(runner)

    def directory(ts: dt.datetime) -> str:
        local = ts.astimezone(ZoneInfo(zone))
        day = f"year={local:%Y}/month={local:%m}/day={local:%d}"
        return f"{day}/hour={local:%H}" if hourly else day

    expected: dict[str, list[int]] = {}
    for row in batch:
        expected.setdefault(directory(row[3]), []).append(row[0])
    found = objects(s3.filesystem(), bucket)
    assert sorted(found) == sorted(
        f"topics/clicks/{d}/clicks+0+{ids[0]:010d}.snappy.parquet" for d, ids in expected.items()
    )
    for d, ids in expected.items():
        key = f"topics/clicks/{d}/clicks+0+{ids[0]:010d}.snappy.parquet"
        assert read_all(s3.filesystem(), bucket, [key]).column("id").to_pylist() == ids
    assert len(expected) == (4 if hourly else 2)  # 22:30-02:10 UTC: 4 Kolkata hours, 2 Berlin days


def test_flush_size_and_rotate_interval_cut_the_files(
    rows_runtime: Runtime, spark: Any, s3: S3Server, bucket: str
) -> None:
    runner = make_runner(rows_runtime, spark)
    produce(rows_runtime, runner, "t", rows(0, 12))
    # a file ends at 5 records, or at a record an hour past the file's first (records are 20 min apart)
    config = {
        "flush.size": 5,
        "rotate.interval.ms": 3_600_000,
        "timestamp.extractor": "RecordField",
        "timestamp.field": "ts",
    }
    rows_runtime.create_connector("sink", s3_sink(s3, bucket, "t", **config))
    sink_run(runner)
    found = sorted(objects(s3.filesystem(), bucket))
    assert [k.rsplit("+", 1)[1] for k in found] == [f"{o:010d}.snappy.parquet" for o in (0, 3, 6, 9)]
    sizes = [read_all(s3.filesystem(), bucket, [k]).num_rows for k in found]
    assert sizes == [3, 3, 3, 3]


@pytest.mark.parametrize("point", ["mid_sink", "after_stage", "before_commit"])
def test_a_rerun_after_a_crash_leaves_one_copy_of_each_record(
    rows_runtime: Runtime, spark: Any, s3: S3Server, bucket: str, monkeypatch: pytest.MonkeyPatch, point: str
) -> None:
    """Objects written, the offsets not committed; the rerun (with more records by then) rewrites
    the same objects: every record once across all objects."""
    runner = make_runner(rows_runtime, spark)
    produce(rows_runtime, runner, "t", rows(0, 45))
    rows_runtime.create_connector("sink", s3_sink(s3, bucket, "t", **{"flush.size": 10}))

    def crash(at: str) -> None:
        if at == point:
            raise RuntimeError(f"crashed at {at}")

    monkeypatch.setattr(faults, "checkpoint", crash)
    failed = runner.run("sink", 0)
    assert failed.state == "FAILED" and f"crashed at {point}" in failed.message
    assert rows_runtime.connectors.sink_offsets("sink") == {}
    written = objects(s3.filesystem(), bucket)
    assert written  # the crash left objects behind
    monkeypatch.undo()

    produce(rows_runtime, runner, "t", rows(45, 10))
    sink_run(runner)
    ids = read_all(s3.filesystem(), bucket).column("id").to_pylist()
    assert sorted(ids) == list(range(55)) and len(ids) == len(set(ids))
    assert sorted(objects(s3.filesystem(), bucket)) == [
        f"topics/t/partition=0/t+0+{o:010d}.snappy.parquet" for o in (0, 10, 20, 30, 40, 50)
    ]


def test_a_big_batch_is_written_by_the_executors_with_the_same_names(
    rows_runtime: Runtime,
    spark: Any,
    s3: S3Server,
    bucket: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    runner = make_runner(rows_runtime, spark)
    produce(rows_runtime, runner, "big", rows(0, 40))
    rows_runtime.create_connector(
        "sink",
        s3_sink(
            s3,
            bucket,
            "big",
            **{"flush.size": 15, "partitioner.class": "FieldPartitioner", "partition.field.name": "region"},
        ),
    )
    monkeypatch.setattr(sink_module, "driver_max_rows", lambda spark: 10)  # 40 records: "big"
    with caplog.at_level(logging.INFO, logger="connect.sink"):
        sink_run(runner)
    assert any("from the executors" in r.getMessage() for r in caplog.records)
    found = sorted(objects(s3.filesystem(), bucket))
    expected = []
    for k, region in enumerate(("eu", "us", "ap")):
        offsets = list(range(k, 40, 3))
        expected += [
            f"topics/big/region={region}/big+0+{offsets[i]:010d}.snappy.parquet" for i in range(0, len(offsets), 15)
        ]
    assert found == sorted(expected)
    ids = read_all(s3.filesystem(), bucket).column("id").to_pylist()
    assert sorted(ids) == list(range(40))
