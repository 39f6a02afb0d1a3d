"""Records a transform cannot convert, under `errors.tolerance=all`: marked by the chain on both
paths (Spark columns, Arrow batches), then set aside as the failing step received them by
`transform_source` and `transform_sink` (in the driver, in Spark's workers, on a DataFrame)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from pyspark.sql.types import LongType, StructField, StructType

from connect_core.runtime.processing.apply import transform_sink, transform_source
from connect_core.runtime.processing.chain import Step, TransformChain
from connect_core.runtime.processing.errant import mark_name, split_arrow, split_spark
from connect_core.sdk import ArrowRecords
from connect_core.sdk.records import ErrantRecords
from connect_core.transforms.cast import CastValue
from connect_core.transforms.fields import InsertFieldValue
from connect_core.transforms.filter import Filter
from connect_core.transforms.predicates import TopicNameMatches
from connect_core.transforms.routing import TimestampRouter
from connect_core.transforms.sql import SqlTransform
from tests.transforms.conftest import make, run_both, values

CAST_CLASS = "connect_core.transforms.cast.CastValue"
UNITS = StructType([StructField("unit", LongType())])


def tolerant(*steps: Step) -> TransformChain:
    return TransformChain(steps, tolerate=True)


def cast(alias: str, spec: str, **kw: Any) -> Step:
    return Step(alias, make(CastValue, spec=spec), **kw)


def good_and_errant(spark: Any, chain: TransformChain, rows: list[dict[str, Any]], schema: str) -> Any:
    """The chain's good rows and set-aside records, split on Spark and on Arrow (which must agree)."""
    import pyarrow as pa

    df = spark.createDataFrame([tuple(r.values()) for r in rows], schema)
    good_df, errant = split_spark(chain.spark(df, "t"), chain.steps)
    table = pa.Table.from_batches([chain.arrow(pa.RecordBatch.from_pylist(rows, schema=_arrow(df)), "t")])
    good_table, errant_arrow = split_arrow(table, chain.steps)
    good = [r.asDict(recursive=True) for r in good_df.collect()]
    assert good == good_table.to_pylist()
    assert [_plain(e) for e in errant] == [_plain(e) for e in errant_arrow]
    return good, errant


def _arrow(df: Any) -> Any:
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(df.schema, timezone="UTC")


def _plain(errant: ErrantRecords) -> tuple[Any, ...]:
    return errant.rows.to_pylist(), errant.exception_class, errant.message, errant.stage, errant.origin


def test_a_tolerant_chain_marks_the_rows_a_cast_cannot_convert_on_both_paths(spark: Any) -> None:
    rows: list[dict[str, Any]] = [{"s": "1"}, {"s": "x"}, {"s": None}]
    out = run_both(spark, tolerant(cast("cast", "s:int32")), rows, "s string")
    assert [r["s"] for r in out] == [1, None, None]
    # the record as the step received it, on the row that failed only (a null converts to null)
    marks = [r[mark_name(0)] for r in out]
    assert marks[0] is None and marks[2] is None
    assert values([marks[1]]) == [{"s": "x"}] and marks[1]["__topic"] == "t"


def test_without_tolerance_the_chain_still_fails_at_the_record(spark: Any) -> None:
    import pyarrow as pa

    chain = TransformChain([cast("cast", "s:int32")])
    df = spark.createDataFrame([("x", 7)], "s string, __offset long")
    with pytest.raises(Exception, match=r"could not convert a record .* at offset 7"):
        chain.spark(df).collect()
    with pytest.raises(Exception, match=r"could not convert a record .* at offset 7"):
        chain.arrow(pa.RecordBatch.from_pylist([{"s": "x", "__offset": 7}]))


def test_no_step_that_can_fail_adds_no_mark(spark: Any) -> None:
    insert = Step("insert", make(InsertFieldValue, **{"static.field": "f", "static.value": "v"}))
    rows = [{"n": 1}]
    assert mark_name(0) not in run_both(spark, tolerant(insert), rows, "n long")[0]
    # a cast that cannot fail on these types (long to string) marks nothing either
    out = run_both(spark, tolerant(insert, cast("cast", "n:string")), rows, "n long")
    assert [k for k in out[0] if k.startswith("__connect")] == []


def test_the_first_failing_step_wins_and_later_steps_leave_the_row_alone(spark: Any) -> None:
    chain = tolerant(
        cast("a", "a:int32"),
        Step("insert", make(InsertFieldValue, **{"static.field": "added", "static.value": "yes"})),
        cast("b", "b:int32"),
        Step("keepOnlyT", make(Filter), make(TopicNameMatches, pattern="t"), negate=True),
    )
    rows = [{"a": "1", "b": "2"}, {"a": "x", "b": "2"}, {"a": "1", "b": "y"}, {"a": "x", "b": "y"}]
    good, errant = good_and_errant(spark, chain, rows, "a string, b string")
    assert values(good) == [{"a": 1, "b": 2, "added": "yes"}]
    by_step = {e.message: e for e in errant}
    assert set(by_step) == {
        f"transform `a` ({CAST_CLASS}) could not convert the record",
        f"transform `b` ({CAST_CLASS}) could not convert the record",
    }
    at_a, at_b = errant
    assert (at_a.stage, at_a.origin, at_a.exception_class) == (
        "TRANSFORMATION",
        CAST_CLASS,
        "connect_core.sdk.errors.DataError",
    )
    # each as its failing step received it: before the insert for `a`, after it for `b`
    assert values(at_a.rows.to_pylist()) == [{"a": "x", "b": "2"}, {"a": "x", "b": "y"}]
    assert values(at_b.rows.to_pylist()) == [{"a": 1, "b": "y", "added": "yes"}]


def test_a_predicate_limits_what_can_fail(spark: Any) -> None:
    chain = tolerant(cast("cast", "s:int32", predicate=make(TopicNameMatches, pattern="t")))
    rows = [{"s": "x", "__topic": "t"}, {"s": "5", "__topic": "other"}]
    good, errant = good_and_errant(spark, chain, rows, "s string, __topic string")
    assert [(r["s"], r["__topic"]) for r in good] == [(5, "other")]  # the branches merge into int
    assert [e.rows.column("s").to_pylist() for e in errant] == [["x"]]


def test_a_sql_step_after_a_failing_one_sees_the_good_rows_only(spark: Any) -> None:
    chain = tolerant(cast("cast", "s:int32"), Step("sql", make(SqlTransform, query="SELECT s * 2 AS d FROM __THIS__")))
    df = spark.createDataFrame([("1",), ("x",), ("3",)], "s string")
    cache: list[Any] = []
    out = chain.spark(df, "t", cache).persist()
    good, errant = split_spark(out, chain.steps)
    assert sorted(r["d"] for r in good.collect()) == [2, 6]
    assert [e.rows.column("s").to_pylist() for e in errant] == [["x"]]
    assert len(cache) == 1 and cache[0].is_cached  # the query's input, read by both branches
    for frame in [out, *cache]:
        frame.unpersist()


def _lines(spark: Any, lines: list[str], *, in_driver: bool) -> ArrowRecords:
    """`lines` as ArrowRecords, two per unit, made in Spark's workers or in the driver."""
    from pyspark.sql.types import StringType, StructField, StructType

    def produce(inputs: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        for batch in inputs:
            for unit in batch.column(0).to_pylist():
                yield pa.RecordBatch.from_pydict({"line": pa.array(lines[2 * unit : 2 * unit + 2], pa.string())})

    schema = StructType([StructField("line", StringType())])
    slices = [(i,) for i in range((len(lines) + 1) // 2)]
    return ArrowRecords(spark, slices, UNITS, produce, schema, in_driver=in_driver)


@pytest.mark.parametrize("in_driver", [False, True], ids=["workers", "driver"])
def test_a_sources_arrow_records_are_split_once(spark: Any, in_driver: bool) -> None:
    chain = tolerant(cast("cast", "line:int32"))
    done = transform_source(chain, "nums", _lines(spark, ["1", "x", "3", "y"], in_driver=in_driver))
    try:
        (records,) = done.by_topic.values()
        got = records.collect_arrow(lambda b: b) if isinstance(records, ArrowRecords) else records.toArrow()
        assert sorted(got.column("line").to_pylist()) == [1, 3]
        assert mark_name(0) not in got.column_names and "__topic" not in got.column_names
        assert [sorted(e.rows.column("line").to_pylist()) for e in done.errant] == [["x", "y"]]
        assert {e.rows.column("__topic")[0].as_py() for e in done.errant} == {"nums"}
        # in the driver nothing is persisted; from the workers, the split output is, once
        assert [isinstance(records, ArrowRecords), len(done.cached)] == ([True, 0] if in_driver else [False, 1])
    finally:
        done.release()


def test_a_chain_that_cannot_fail_keeps_the_arrow_path_as_it_was(spark: Any) -> None:
    records = _lines(spark, ["1", "2"], in_driver=False)
    done = transform_source(tolerant(cast("cast", "line:string")), "nums", records)
    (out,) = done.by_topic.values()
    assert isinstance(out, ArrowRecords) and (done.errant, done.cached) == ([], [])


def test_a_sinks_batch_loses_the_set_aside_rows_on_both_paths(spark: Any) -> None:
    df = spark.createDataFrame(
        [("1", "routed", 0, 0), ("x", "routed", 0, 1), ("3", "routed", 0, 2)],
        "line string, __topic string, __partition int, __offset long",
    )
    batches = df.toArrow().to_batches()
    records = ArrowRecords(spark, [(0,)], UNITS, lambda _: iter(batches), df.schema)
    done = transform_sink(tolerant(cast("cast", "line:int32")), {"lines": df}, {"lines": records})
    try:
        assert [r["line"] for r in done.by_topic["lines"].orderBy("__offset").collect()] == [1, 3]
        arrow = done.arrow_by_topic["lines"].collect_arrow(lambda b: b)
        assert arrow.column("line").to_pylist() == [1, 3] and mark_name(0) not in arrow.column_names
        (errant,) = done.errant
        # where it was read: the topic's name as read, its partition and offset
        assert errant.rows.select(["line", "__topic", "__partition", "__offset"]).to_pylist() == [
            {"line": "x", "__topic": "lines", "__partition": 0, "__offset": 1}
        ]
    finally:
        done.release()


def test_a_router_routes_the_good_records_only(spark: Any) -> None:
    import datetime as dt

    # a record without a timestamp is an error for TimestampRouter: set aside, it names no topic
    df = spark.createDataFrame([(1, dt.datetime(2024, 1, 2)), (2, None)], "n long, __timestamp timestamp")
    done = transform_source(tolerant(Step("route", make(TimestampRouter))), "t", df)
    try:
        assert list(done.by_topic) == ["t-20240102"]
        assert [r["n"] for r in done.by_topic["t-20240102"].collect()] == [1]  # type: ignore[union-attr]
        (errant,) = done.errant
        assert errant.rows.select(["n", "__topic"]).to_pylist() == [{"n": 2, "__topic": "t"}]
        assert len(done.cached) == 1  # read once: split, then written per topic
    finally:
        done.release()
