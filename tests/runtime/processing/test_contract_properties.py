"""Schema contracts under generated sequences of changes (hypothesis): whatever columns come and go
and whatever types change, each mode keeps its promise: `evolve` lets everything through, `freeze`
refuses exactly the changes, `discard_row` and `discard_value` keep the connector's shape, and no
record is both kept and set aside, nor lost."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

from connect_core.runtime.processing.contract import Contract, plan
from connect_core.runtime.processing.discard import enforce
from connect_core.runtime.topics.schemas import TopicSchema, diff_schemas
from connect_core.sdk.errors import DataError

TYPES = {"int": IntegerType(), "bigint": LongType(), "string": StringType()}
NAMES = ["a", "b", "c", "d"]

#: a table: its columns besides `id` (name → type), each step of a sequence a new one
tables = st.dictionaries(st.sampled_from(NAMES), st.sampled_from(list(TYPES)), max_size=4)


def _struct(columns: dict[str, str]) -> StructType:
    return StructType([StructField("id", IntegerType())] + [StructField(n, TYPES[t]) for n, t in columns.items()])


def _value(kind: str, i: int, big: bool) -> Any:
    if kind == "string":
        return str(i) if i % 3 else f"x{i}"  # some strings are numbers, some are not
    return 5_000_000_000 + i if big and kind == "bigint" else i


def _rows(columns: dict[str, str], n: int, big: bool) -> list[tuple[Any, ...]]:
    return [(i, *(None if i % 4 == 0 else _value(t, i, big) for t in columns.values())) for i in range(n)]


def _changed(before: dict[str, str], after: dict[str, str]) -> bool:
    diff = diff_schemas(TopicSchema.of(_struct(before)).document, TopicSchema.of(_struct(after)).document)
    return bool(diff.added or diff.dropped or diff.retyped)


@settings(max_examples=200, deadline=None)
@given(st.lists(tables, min_size=2, max_size=5), st.sampled_from(["evolve", "freeze", "discard_row", "discard_value"]))
def test_freeze_refuses_exactly_the_changes_and_evolve_none(steps: list[dict[str, str]], mode: str) -> None:
    """No Spark: what `plan` decides of each step against the shape let through before it."""
    contract = Contract(columns=mode, data_type=mode)  # type: ignore[arg-type]
    reference = TopicSchema.of(_struct(steps[0]))
    for step in steps[1:]:
        shape = TopicSchema.of(_struct(step))
        checked = plan(contract, "t", shape, reference, first_load=False)
        changed = _changed({c["name"]: c["type"] for c in reference.columns if c["name"] != "id"}, step)
        assert bool(checked.changes) == (changed and mode != "evolve")
        if mode == "freeze" and changed:
            with pytest.raises(DataError, match="schema contract: topic `t`"):
                checked.check()
        else:
            checked.check()
        if mode in ("evolve", "freeze"):
            reference = shape  # what passed (a frozen run passes nothing: the next step still compares)
            if mode == "freeze" and changed:
                reference = TopicSchema.of(_struct(steps[0]))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(tables, min_size=2, max_size=3),
    st.sampled_from(["discard_row", "discard_value"]),
    st.booleans(),
)
def test_discards_keep_the_shape_and_lose_no_record(
    spark: Any, steps: list[dict[str, str]], mode: str, big: bool
) -> None:
    """With Spark: each step's records through the contract, against the shape let through before."""
    contract = Contract(columns=mode, data_type=mode)  # type: ignore[arg-type]
    reference = TopicSchema.of(_struct(steps[0]))
    for step in steps[1:]:
        rows = _rows(step, 12, big)
        df = spark.createDataFrame(rows, _struct(step))
        shape = TopicSchema.of(df.schema)
        checked = plan(contract, "t", shape, reference, first_load=False)
        checked.check()  # neither mode fails (no key here)
        reference_names = {c["name"] for c in reference.columns}
        if not checked.acts:
            reference = shape
            continue
        enforced = enforce(df, checked, dead_letters=True)
        try:
            kept = enforced.records.collect()
            out = TopicSchema.of(enforced.records.schema)
        finally:
            for cached in enforced.cached:
                cached.unpersist()
        # the connector's shape, column for column (names, order and types)
        assert [(c["name"], c["type"]) for c in out.columns] == [(c["name"], c["type"]) for c in reference.columns]
        aside = enforced.errant.rows.column("id").to_pylist() if enforced.errant is not None else []
        kept_ids = [r["id"] for r in kept]
        assert sorted(kept_ids + aside) == list(range(len(rows)))  # every record kept or set aside, once
        assert enforced.counts.get("contract_discarded_rows", 0) == len(aside)
        if mode == "discard_value":
            assert not aside  # values are dropped, records are not
        by_id = {r[0]: dict(zip(["id", *step], r, strict=True)) for r in rows}
        lost = 0
        for record in kept:  # a kept value is the record's own, or null where it was dropped
            for column in out.columns:
                value, original = record[column["name"]], by_id[record["id"]].get(column["name"])
                assert value is None or str(value) == str(original)
                if mode == "discard_row" and column["name"] in step:
                    assert value == original or str(value) == str(original)  # a record kept is kept whole
                lost += value is None and original is not None and column["name"] in step
        added_values = sum(  # the values of columns the records gained: dropped with their column
            1
            for r in rows
            for name, v in zip(step, r[1:], strict=True)
            if v is not None and name not in reference_names
        )
        if mode == "discard_value":
            assert enforced.counts.get("contract_discarded_values", 0) == lost + added_values
        reference = out
