"""What names an object, checked without a store: Joda patterns, encoded values, config rules."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest
from pydantic import ValidationError

from connect_core.connectors.objectstore._keys import encode_value
from connect_core.connectors.objectstore._partitioners import Layout
from connect_core.connectors.objectstore._timefmt import translate_path_format
from connect_core.connectors.objectstore.config import S3SinkConfig
from connect_core.sdk import DataError


@pytest.mark.parametrize(
    ("joda", "strftime"),
    [
        ("'year'=YYYY/'month'=MM/'day'=dd/'hour'=HH", "year=%Y/month=%m/day=%d/hour=%H"),
        ("yyyy-MM-dd/HH", "%Y-%m-%d/%H"),
        ("'dt'=yyyyMMdd", "dt=%Y%m%d"),
        ("YYYY/MM/dd/HH/mm", "%Y/%m/%d/%H/%M"),
    ],
)
def test_joda_patterns_translate(joda: str, strftime: str) -> None:
    assert translate_path_format(joda) == strftime


@pytest.mark.parametrize(
    ("joda", "why"),
    [
        ("'year'=YYYY/'month'=MMM", "`MMM`"),  # a month's name: locale-dependent text
        ("EEE/HH", "`EEE`"),
        ("'..'/YYYY", "literal"),
        ("YYYY//MM", "empty"),
        ("'a/b'=YYYY", "literal"),
        ("'%s'YYYY", "literal"),
        ("'year'=YYYY/'month", "unclosed"),
        ("'static'", "no time field"),
        ("YYYY\\MM", "not supported"),
    ],
)
def test_what_cannot_be_translated_is_refused(joda: str, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        translate_path_format(joda)


def test_values_become_one_harmless_segment() -> None:
    assert encode_value("f", "../../etc") == "..%2F..%2Fetc"
    assert encode_value("f", "..") == "%2E%2E" and encode_value("f", ".") == "%2E"
    assert encode_value("f", "a\x00b") == "a%00b" and encode_value("f", "é") == "%C3%A9"
    assert encode_value("f", None) == "__HIVE_DEFAULT_PARTITION__" and encode_value("f", True) == "true"
    assert encode_value("f", 42) == "42" and encode_value("f", "") == "%00empty"
    with pytest.raises(DataError, match="`f`") as raised:
        encode_value("f", "x" * 201)
    assert "xxxxx" not in str(raised.value)


def _config(**extra: object) -> S3SinkConfig:
    base = {"connector.class": "S3SinkConnector", "topics": "t", "s3.bucket.name": "bkt", "flush.size": 10}
    return S3SinkConfig.model_validate({**base, **extra})


def test_a_bucket_is_cut_in_local_time_as_confluents() -> None:
    """A 6-hour TimeBasedPartitioner in Asia/Kolkata (UTC+5:30): buckets start at local 00:00, 06:00…"""
    cfg = _config(
        **{
            "partitioner.class": "TimeBasedPartitioner",
            "path.format": "YYYY-MM-dd/HH-mm",
            "partition.duration.ms": 6 * 3_600_000,
            "timezone": "Asia/Kolkata",
            "timestamp.extractor": "Record",
        }
    )
    layout = Layout.from_config(cfg, wallclock_ms=0)
    utc = [dt.datetime(2024, 3, 9, h, 29, tzinfo=dt.UTC) for h in (0, 6, 18, 19)]
    table = pa.table({"__timestamp": pa.array(utc, pa.timestamp("us", tz="UTC"))})
    # 05:59, 11:59, 23:59 local on the 9th, 00:59 on the 10th
    assert layout.directories(table, 0) == [
        "2024-03-09/00-00",
        "2024-03-09/06-00",
        "2024-03-09/18-00",
        "2024-03-10/00-00",
    ]


@pytest.mark.parametrize(
    ("extra", "key"),
    [
        ({"store.url": "ftp://host"}, "store.url"),
        ({"store.url": "file://remote-host/data"}, "store.url"),
        ({"store.url": "file:///data/../etc"}, "store.url"),
        ({"store.url": "http://127.0.0.1:9000/bucket"}, "store.url"),
        ({"topics.dir": "a/../b"}, "topics.dir"),
        ({"topics.dir": "a//b"}, "topics.dir"),
        ({"s3.bucket.name": "ab"}, "s3.bucket.name"),
        ({"partition.field.name": "a/b"}, "partition.field.name"),
        ({"aws.access.key.id": "AKIA-only"}, "aws.secret.access.key"),
    ],
)
def test_config_problems_name_their_key(extra: dict[str, object], key: str) -> None:
    with pytest.raises(ValidationError) as raised:
        _config(**extra)
    assert key in str(raised.value)


def test_the_local_store_reaches_the_tasks_as_a_confined_key() -> None:
    from connect_core.connectors.objectstore import S3SinkConnector

    cfg = _config(**{"store.url": "file:///data/lake/", "s3.bucket.name": None})
    (task,) = S3SinkConnector().task_configs(cfg, 1)
    assert task["store.local.path"] == "/data/lake" and task["store.url"] == "file:///data/lake/"
