from __future__ import annotations

import datetime as dt

import pytest
from pydantic import ValidationError

from connect_core.transforms.routing import RegexRouter, TimestampRouter
from tests.transforms.conftest import make, run_both

SCHEMA = "id long, __topic string"


def topics(both, t, names: list[str | None]) -> list[str | None]:  # type: ignore[no-untyped-def]
    rows = [{"id": i, "__topic": name} for i, name in enumerate(names)]
    return [r["__topic"] for r in both(t, rows, SCHEMA, topic=None)]


def test_regex_router_renames_topics_that_match_whole(both) -> None:  # type: ignore[no-untyped-def]
    t = make(RegexRouter, regex="(.*)_raw", replacement="$1")
    assert RegexRouter.routes
    assert topics(both, t, ["orders_raw", "users", "orders_raw_x", None, "x_raw"]) == [
        "orders",
        "users",
        "orders_raw_x",
        None,
        "x",
    ]


def test_regex_router_kafka_documentation_example(both) -> None:  # type: ignore[no-untyped-def]
    # the documented use: drop a prefix (`soe-orders` to `orders`); other topics stay
    t = make(RegexRouter, regex="soe-(.*)", replacement="$1")
    assert topics(both, t, ["soe-orders", "orders", "xsoe-a"]) == ["orders", "orders", "xsoe-a"]


def test_regex_router_replaces_the_first_match_once(both) -> None:  # type: ignore[no-untyped-def]
    # Java's replaceFirst: `.*` matches the whole topic once (replaceAll would add an empty match)
    assert topics(both, make(RegexRouter, regex=".*", replacement="all-$0"), ["a", "b"]) == ["all-a", "all-b"]
    # the first match of a whole-matching pattern need not be all of it: the rest stays
    assert topics(both, make(RegexRouter, regex="a|ab", replacement="X"), ["ab", "a", "b"]) == ["Xb", "X", "b"]


def test_regex_router_replacement_syntax(both) -> None:  # type: ignore[no-untyped-def]
    named = make(RegexRouter, regex=r"(?<db>\w+)\.(?<table>\w+)", replacement="${table}-from-${db}")
    assert topics(both, named, ["shop.orders"]) == ["orders-from-shop"]
    # `$12` with one group is group 1 then `2`; `\$` is a dollar
    assert topics(both, make(RegexRouter, regex="(a+)", replacement=r"$12\$"), ["aa"]) == ["aa2$"]
    # a group that took no part is empty
    assert topics(both, make(RegexRouter, regex="(x)?(.+)", replacement="[$1]$2"), ["ab"]) == ["[]ab"]


def test_regex_router_config_is_checked() -> None:
    with pytest.raises(ValidationError, match="invalid regex"):
        make(RegexRouter, regex="(", replacement="x")
    with pytest.raises(ValidationError, match="refers to group 2; the regex has 1"):
        make(RegexRouter, regex="(a)", replacement="$2")
    with pytest.raises(ValidationError, match="does not have"):
        make(RegexRouter, regex="(a)", replacement="${b}")
    with pytest.raises(ValidationError, match="followed by a group"):
        make(RegexRouter, regex="(a)", replacement="cost $")
    with pytest.raises(ValidationError, match=r"Java names a group"):
        make(RegexRouter, regex="(?P<a>x)", replacement="y")
    with pytest.raises(ValidationError, match="invalid regex"):
        make(RegexRouter, regex=r"\p{Alpha}+", replacement="y")


def test_regex_router_needs_a_topic(spark) -> None:  # type: ignore[no-untyped-def]
    from connect_core.runtime.processing.chain import TransformError
    from tests.transforms.conftest import chain

    with pytest.raises(TransformError, match="needs the record's topic"):
        run_both(spark, chain(make(RegexRouter, regex="a", replacement="b")), [{"id": 1}], "id long", topic=None)


STAMPED = "id long, __topic string, __timestamp timestamp"


def test_timestamp_router_default_format(both) -> None:  # type: ignore[no-untyped-def]
    rows = [
        {"id": 1, "__topic": "logs", "__timestamp": dt.datetime(2024, 1, 2, 23, 59, tzinfo=dt.UTC)},
        {"id": 2, "__topic": "logs", "__timestamp": dt.datetime(1969, 12, 31, 23, 59, 59, 500000, tzinfo=dt.UTC)},
    ]
    t = make(TimestampRouter)
    assert TimestampRouter.routes
    assert [r["__topic"] for r in both(t, rows, STAMPED, topic=None)] == ["logs-20240102", "logs-19691231"]


def test_timestamp_router_custom_formats(both) -> None:  # type: ignore[no-untyped-def]
    rows = [{"id": 1, "__topic": "m", "__timestamp": dt.datetime(2024, 3, 4, 5, 6, 7, 890000, tzinfo=dt.UTC)}]
    t = make(TimestampRouter, **{"topic.format": "${timestamp}.${topic}_x", "timestamp.format": "yy-MM-dd'T'HH.SSS"})
    assert [r["__topic"] for r in both(t, rows, STAMPED, topic=None)] == ["24-03-04T05.890.m_x"]
    fixed = make(TimestampRouter, **{"topic.format": "all"})
    assert [r["__topic"] for r in both(fixed, rows, STAMPED, topic=None)] == ["all"]


def test_timestamp_router_fails_records_without_a_timestamp(spark) -> None:  # type: ignore[no-untyped-def]
    import pyarrow as pa

    from connect_core.runtime.processing.chain import TransformError
    from tests.transforms.conftest import chain

    t = make(TimestampRouter)
    df = spark.createDataFrame([(1, None), (2, dt.datetime(2024, 1, 1))], "id long, __timestamp timestamp")
    assert [r[0] for r in df.select(t.errors_spark(df)).collect()] == [True, False]
    batch = pa.RecordBatch.from_pylist(
        [{"id": 1, "__timestamp": None}, {"id": 2, "__timestamp": dt.datetime(2024, 1, 1, tzinfo=dt.UTC)}],
        schema=pa.schema([("id", pa.int64()), ("__timestamp", pa.timestamp("us", tz="UTC"))]),
    )
    assert t.errors_arrow(batch).to_pylist() == [True, False]
    with pytest.raises(Exception, match="could not convert a record"):
        chain(t).spark(df, "logs").collect()
    with pytest.raises(TransformError, match="could not convert a record"):
        chain(t).arrow(batch, "logs")


def test_timestamp_router_refuses_patterns_it_cannot_format_alike() -> None:
    with pytest.raises(ValidationError, match=r"`EEE`, `z`, which is not supported"):
        make(TimestampRouter, **{"timestamp.format": "EEE yyyy z"})
    with pytest.raises(ValidationError, match="unterminated quote"):
        make(TimestampRouter, **{"timestamp.format": "yyyy'x"})
