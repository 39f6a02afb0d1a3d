from __future__ import annotations

import pytest
from pydantic import ValidationError

from connect_core.runtime.processing.chain import Step
from connect_core.transforms.filter import Filter
from connect_core.transforms.predicates import HasHeaderKey, RecordIsTombstone, TopicNameMatches
from tests.transforms.conftest import chain, make

HEADERS = "array<struct<key:string,value:string>>"
TOPICS = [{"id": 1, "__topic": "foo"}, {"id": 2, "__topic": "foobar"}, {"id": 3, "__topic": "bar"}]


def ids(rows: list[dict[str, object]]) -> list[object]:
    return [r["id"] for r in rows]


def test_filter_alone_drops_every_record(both) -> None:  # type: ignore[no-untyped-def]
    assert both(make(Filter), [{"id": 1}, {"id": 2}], "id long") == []


def test_filter_with_topic_name_matches_kafka_example(both) -> None:  # type: ignore[no-untyped-def]
    # Kafka's documentation: Filter with predicate TopicNameMatches(pattern=foo.*) drops the foo topics
    is_foo = make(TopicNameMatches, pattern="foo.*")
    out = both(chain(Step("filterFoo", make(Filter), is_foo)), TOPICS, "id long, __topic string", topic=None)
    assert ids(out) == [3]
    # negate: drop all the others
    out = both(chain(Step("keepFoo", make(Filter), is_foo, negate=True)), TOPICS, "id long, __topic string", topic=None)
    assert ids(out) == [1, 2]


def test_topic_name_matches_the_whole_name(spark) -> None:  # type: ignore[no-untyped-def]
    import pyarrow as pa

    p = make(TopicNameMatches, pattern="o+|b.r")
    names = ["oo", "foo", "bar", "barx", None]
    df = spark.createDataFrame([(n,) for n in names], "__topic string")
    expected = [True, False, True, False, False]
    assert [r[0] for r in df.select(p.spark(df)).collect()] == expected
    batch = pa.RecordBatch.from_pydict({"__topic": pa.array(names, pa.string())})
    got = p.arrow(batch)
    assert got.to_pylist() == expected and got.null_count == 0


def test_topic_name_matches_checks_its_pattern() -> None:
    with pytest.raises(ValidationError, match="invalid regex"):
        make(TopicNameMatches, pattern="foo[")
    with pytest.raises(ValidationError, match="pattern"):
        make(TopicNameMatches)


def test_has_header_key(both) -> None:  # type: ignore[no-untyped-def]
    rows = [
        {"id": 1, "__headers": [{"key": "a", "value": "1"}, {"key": "trace", "value": None}]},
        {"id": 2, "__headers": [{"key": "a", "value": "trace"}]},
        {"id": 3, "__headers": None},
        {"id": 4, "__headers": []},
        {"id": 5, "__headers": [{"key": None, "value": "x"}, {"key": "trace", "value": "y"}]},
    ]
    has_trace = make(HasHeaderKey, name="trace")
    out = both(chain(Step("drop", make(Filter), has_trace, negate=True)), rows, f"id long, __headers {HEADERS}")
    assert ids(out) == [1, 5]


def test_record_is_tombstone(both) -> None:  # type: ignore[no-untyped-def]
    rows = [{"id": 1, "__tombstone": True}, {"id": 2, "__tombstone": False}, {"id": 3, "__tombstone": None}]
    out = both(chain(Step("drop", make(Filter), make(RecordIsTombstone))), rows, "id long, __tombstone boolean")
    assert ids(out) == [2, 3]
    # records that never had the flag are no tombstones
    out = both(chain(Step("drop", make(Filter), make(RecordIsTombstone))), [{"id": 1}], "id long")
    assert ids(out) == [1]
