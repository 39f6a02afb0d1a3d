from __future__ import annotations

import datetime as dt
import re
from typing import Any

import pytest
from pydantic import ValidationError

from connect_core.runtime.processing.chain import TransformError
from connect_core.transforms.timestamps import TimestampConverterKey, TimestampConverterValue
from tests.transforms.conftest import make, values

UTC = dt.UTC


def convert(both, rows: list[dict[str, Any]], schema: str, **options: Any) -> list[Any]:  # type: ignore[no-untyped-def]
    out = both(make(TimestampConverterValue, field="v", **options), rows, schema)
    return [r["v"] for r in out]


def test_string_to_timestamp_parses_with_the_java_pattern(both) -> None:  # type: ignore[no-untyped-def]
    rows = [{"v": s} for s in ["2024-01-02 03:04:05", "1999-12-31 23:59:59", None]]
    got = convert(both, rows, "v string", **{"target.type": "Timestamp", "format": "yyyy-MM-dd HH:mm:ss"})
    assert got == [dt.datetime(2024, 1, 2, 3, 4, 5), dt.datetime(1999, 12, 31, 23, 59, 59), None]


@pytest.mark.parametrize(
    ("pattern", "text", "expected"),
    [
        ("yyyy-MM-dd HH:mm:ss", "2024-01-02 03:04:05", dt.datetime(2024, 1, 2, 3, 4, 5)),
        ("yyyy-MM-dd HH:mm:ss", "2024-1-2 03:04:05", None),  # two digits each
        ("yyyy-MM-dd HH:mm:ss", "nope", None),
        ("yyyy-MM-dd HH:mm:ss.SSS", "2024-01-02 03:04:05.12", dt.datetime(2024, 1, 2, 3, 4, 5, 120000)),
        ("yyyy-MM-dd HH:mm:ss.SSS", "2024-01-02 03:04:05", None),
        ("yyyy-MM-dd HH:mm:ss.SSSSSS", "2024-01-02 03:04:05.123456", dt.datetime(2024, 1, 2, 3, 4, 5, 123456)),
        ("yyyy-MM-dd", "2024-02-30", None),  # no day 30 of February
        ("yyyy-MM-dd", "2024-02-29", dt.datetime(2024, 2, 29)),
        ("yyyy-MM-dd", "2024-02-29 ", None),  # trailing text
        ("yy-MM-dd", "24-01-02", dt.datetime(2024, 1, 2)),  # two-digit years are 2000-2099
        ("yyyyMMdd'T'HHmm", "20240102t0304", dt.datetime(2024, 1, 2, 3, 4)),  # literals in any case
        ("HH:mm", "13:45", dt.datetime(1970, 1, 1, 13, 45)),
        ("HH:mm:ss", "23:59:60", None),
        ("HH:mm:ss", "24:00:00", None),
        ("dd/MM/yyyy 'at' HH'h'", "31/12/1999 at 23h", dt.datetime(1999, 12, 31, 23)),
        ("''yyyy''", "'2024'", dt.datetime(2024, 1, 1)),
        ("'100%' yyyy", "100% 2024", dt.datetime(2024, 1, 1)),
    ],
)
def test_java_patterns_parse_alike_on_both_paths(spark, pattern: str, text: str, expected: Any) -> None:  # type: ignore[no-untyped-def]
    import pyarrow as pa

    from connect_core.transforms import _javatime

    df = spark.createDataFrame([(text,)], "v string")
    assert df.select(_javatime.parse_spark(df["v"], pattern)).collect()[0][0] == expected
    parsed = _javatime.parse_arrow(pa.array([text], pa.string()), pattern).to_pylist()[0]
    assert (parsed.replace(tzinfo=None) if parsed else parsed) == expected


def test_a_string_that_does_not_parse_fails_the_record(spark) -> None:  # type: ignore[no-untyped-def]
    import pyarrow as pa

    from connect_core.runtime.processing.chain import TRANSFORM_FAILURE
    from tests.transforms.conftest import chain

    t = make(TimestampConverterValue, field="v", **{"target.type": "unix", "format": "yyyy-MM-dd"})
    texts = ["2024-01-02", "bad", None]
    df = spark.createDataFrame([(s,) for s in texts], "v string")
    assert [r[0] for r in df.select(t.errors_spark(df)).collect()] == [False, True, False]
    batch = pa.RecordBatch.from_pydict({"v": pa.array(texts, pa.string())})
    assert t.errors_arrow(batch).to_pylist() == [False, True, False]
    with pytest.raises(Exception, match=re.escape(TRANSFORM_FAILURE)):
        chain(t).spark(df, "t").collect()
    with pytest.raises(TransformError, match="could not convert a record"):
        chain(t).arrow(batch, "t")
    # nothing to flag for an input that cannot fail
    ints = spark.createDataFrame([(1,)], "v long")
    assert t.errors_spark(ints) is None
    assert t.errors_arrow(pa.RecordBatch.from_pydict({"v": pa.array([1])})) is None


TS = [
    dt.datetime(2024, 1, 2, 3, 4, 5, 678901, tzinfo=UTC),
    dt.datetime(1969, 12, 31, 23, 59, 59, 500000, tzinfo=UTC),
    None,
]


@pytest.mark.parametrize(
    ("precision", "expected"),
    [
        ("seconds", [1704164645, -1, None]),
        ("milliseconds", [1704164645678, -500, None]),
        ("microseconds", [1704164645678901, -500000, None]),
        ("nanoseconds", [1704164645678901000, -500000000, None]),
    ],
)
def test_timestamp_to_unix(both, precision: str, expected: list[Any]) -> None:  # type: ignore[no-untyped-def]
    rows = [{"v": t} for t in TS]
    assert convert(both, rows, "v timestamp", **{"target.type": "unix", "unix.precision": precision}) == expected


@pytest.mark.parametrize(
    ("precision", "number", "expected"),
    [
        ("seconds", 1704164645, dt.datetime(2024, 1, 2, 3, 4, 5)),
        ("milliseconds", 1704164645678, dt.datetime(2024, 1, 2, 3, 4, 5, 678000)),
        ("microseconds", -1, dt.datetime(1969, 12, 31, 23, 59, 59, 999999)),
        ("nanoseconds", -1500, dt.datetime(1969, 12, 31, 23, 59, 59, 999998)),
        ("nanoseconds", 1704164645678901234, dt.datetime(2024, 1, 2, 3, 4, 5, 678901)),
    ],
)
def test_unix_to_timestamp(both, precision: str, number: int, expected: dt.datetime) -> None:  # type: ignore[no-untyped-def]
    got = convert(both, [{"v": number}], "v long", **{"target.type": "Timestamp", "unix.precision": precision})
    assert got == [expected]


def test_timestamp_to_string_date_and_time(both) -> None:  # type: ignore[no-untyped-def]
    rows = [{"v": t} for t in TS]
    fmt = {"format": "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'"}
    assert convert(both, rows, "v timestamp", **{"target.type": "string", **fmt}) == [
        "2024-01-02T03:04:05.678Z",
        "1969-12-31T23:59:59.500Z",
        None,
    ]
    assert convert(both, rows, "v timestamp", **{"target.type": "Date"}) == [
        dt.date(2024, 1, 2),
        dt.date(1969, 12, 31),
        None,
    ]
    assert convert(both, rows, "v timestamp", **{"target.type": "Time"}) == [
        dt.datetime(1970, 1, 1, 3, 4, 5, 678901),
        dt.datetime(1970, 1, 1, 23, 59, 59, 500000),
        None,
    ]


def test_date_and_int_inputs(both) -> None:  # type: ignore[no-untyped-def]
    rows = [{"v": dt.date(2024, 1, 2)}, {"v": dt.date(1969, 12, 31)}]
    assert convert(both, rows, "v date", **{"target.type": "unix"}) == [1704153600000, -86400000]
    assert convert(both, [{"v": 86400}], "v int", **{"target.type": "Date", "unix.precision": "seconds"}) == [
        dt.date(1970, 1, 2)
    ]
    got = convert(both, [{"v": 0}], "v int", **{"target.type": "string", "format": "yyyy-MM-dd HH:mm:ss.SSSSSSSSS"})
    assert got == ["1970-01-01 00:00:00.000000000"]


def test_the_whole_key_or_value(both) -> None:  # type: ignore[no-untyped-def]
    rows = [{"v": 1000, "__key": 86_400_000}, {"v": None, "__key": None}]
    out = both(make(TimestampConverterKey, **{"target.type": "Date"}), rows, "v long, __key long")
    assert [r["__key"] for r in out] == [dt.date(1970, 1, 2), None]
    out = both(make(TimestampConverterValue, **{"target.type": "Timestamp"}), rows, "v long, __key long")
    assert values(out) == [{"v": dt.datetime(1970, 1, 1, 0, 0, 1)}, {"v": None}]
    with pytest.raises(TransformError, match="value has 2 fields: set `field`"):
        both(make(TimestampConverterValue, **{"target.type": "Date"}), [{"a": 1, "b": 2}], "a long, b long")


def test_a_field_of_the_key(both) -> None:  # type: ignore[no-untyped-def]
    rows = [{"id": 1, "__key": {"id": 1, "at": "2024-05-06"}}, {"id": 2, "__key": None}]
    t = make(TimestampConverterKey, field="at", **{"target.type": "unix", "format": "yyyy-MM-dd"})
    out = both(t, rows, "id long, __key struct<id:long,at:string>")
    assert [r["__key"] for r in out] == [{"id": 1, "at": 1714953600000}, None]


def test_inputs_it_cannot_read(both) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(TransformError, match="field `v` is of type"):
        convert(both, [{"v": 1.5}], "v double", **{"target.type": "Date"})
    with pytest.raises(TransformError, match="set `format`"):
        convert(both, [{"v": "2024"}], "v string", **{"target.type": "Date"})
    with pytest.raises(TransformError, match="no field `v`"):
        convert(both, [{"w": 1}], "w long", **{"target.type": "Date"})


def test_config_is_checked() -> None:
    with pytest.raises(ValidationError, match="`format` is needed"):
        make(TimestampConverterValue, **{"target.type": "string"})
    with pytest.raises(ValidationError, match="'Timestamp'"):
        make(TimestampConverterValue, **{"target.type": "timestamp"})
    with pytest.raises(ValidationError, match="'nanoseconds'"):
        make(TimestampConverterValue, **{"target.type": "unix", "unix.precision": "days"})
    with pytest.raises(ValidationError, match=r"`a`, `\[`"):
        make(TimestampConverterValue, **{"target.type": "string", "format": "hh:mm a [yyyy]"})
    ok = make(TimestampConverterValue, **{"target.type": "Date", "format": ""})
    assert ok.config.format is None
