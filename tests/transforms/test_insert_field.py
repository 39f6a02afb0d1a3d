from __future__ import annotations

from connect_core.runtime.processing.chain import Step
from connect_core.transforms.fields import InsertFieldKey, InsertFieldValue
from tests.transforms.conftest import chain, make, values

ROWS = [{"id": 1, "name": "a"}, {"id": 2, "name": None}]


def test_insert_field_value_adds_topic_and_static_fields(both) -> None:  # type: ignore[no-untyped-def]
    t = make(InsertFieldValue, **{"topic.field": "src!", "static.field": "origin", "static.value": "db1"})
    out = both(t, ROWS, "id long, name string", topic="orders")
    assert values(out) == [
        {"id": 1, "name": "a", "src": "orders", "origin": "db1"},
        {"id": 2, "name": None, "src": "orders", "origin": "db1"},
    ]


def test_insert_field_offset_is_null_before_a_topic(both) -> None:  # type: ignore[no-untyped-def]
    out = both(make(InsertFieldValue, **{"offset.field": "off", "partition.field": "p"}), ROWS, "id long, name string")
    assert [(r["off"], r["p"]) for r in out] == [(None, None), (None, None)]


def test_insert_field_key_needs_a_struct_key(both) -> None:  # type: ignore[no-untyped-def]
    import pytest

    from connect_core.runtime.processing.chain import TransformError

    with pytest.raises(TransformError, match="key must be a struct"):
        both(make(InsertFieldKey, **{"static.field": "k", "static.value": "v"}), ROWS, "id long, name string")


def test_insert_field_key_into_a_struct_key(both) -> None:  # type: ignore[no-untyped-def]
    rows = [{"id": 1, "__key": {"id": 1}}, {"id": 2, "__key": None}]
    out = both(
        make(InsertFieldKey, **{"static.field": "db", "static.value": "x"}), rows, "id long, __key struct<id:long>"
    )
    assert [r["__key"] for r in out] == [{"id": 1, "db": "x"}, None]


def test_predicate_applies_the_transform_to_matching_rows_only(both) -> None:  # type: ignore[no-untyped-def]
    from connect_core.sdk.transforms import Predicate

    class Odd(Predicate):  # type: ignore[type-arg]
        def spark(self, df):  # type: ignore[no-untyped-def]
            from pyspark.sql import functions as F

            return F.coalesce(F.col("id") % 2 == 1, F.lit(False))

        def arrow(self, batch):  # type: ignore[no-untyped-def]
            import pyarrow.compute as pc

            return pc.fill_null(pc.equal(pc.bit_wise_and(batch.column("id"), 1), 1), False)

    t = make(InsertFieldValue, **{"static.field": "odd", "static.value": "yes"})
    out = both(chain(Step("a", t, Odd(Odd.config_model()))), ROWS, "id long, name string")
    assert [r["odd"] for r in out] == ["yes", None]
    out = both(chain(Step("a", t, Odd(Odd.config_model()), negate=True)), ROWS, "id long, name string")
    assert [r["odd"] for r in out] == [None, "yes"]
