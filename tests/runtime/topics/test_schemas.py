"""The topic schema model and its Avro form: canonical documents, fingerprints, diffs, Avro that parses."""

from __future__ import annotations

import json

import fastavro
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    ByteType,
    CharType,
    DataType,
    DateType,
    DayTimeIntervalType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    NullType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
    YearMonthIntervalType,
)

from connect_core.runtime.topics.avro import avro_name, avro_schema, avro_text
from connect_core.runtime.topics.schemas import MAX_NESTING, TooDeeplyNestedError, TopicSchema, diff_schemas

HEADERS = ArrayType(StructType([StructField("key", StringType()), StructField("value", StringType())]))


def _struct(*fields: StructField, key: list[str] | None = None) -> StructType:
    parts = list(fields)
    if key is not None:
        parts.append(StructField("__key", StructType([StructField(k, LongType(), False) for k in key])))
    return StructType([*parts, StructField("__headers", HEADERS), StructField("__timestamp", TimestampType())])


def test_the_document_holds_the_value_columns_in_order_and_the_key() -> None:
    schema = TopicSchema.of(
        _struct(
            StructField("id", LongType(), False),
            StructField("amount", DecimalType(12, 2)),
            StructField("__deleted", StringType()),  # Debezium's: a value field like any
            key=["id"],
        )
    )
    assert schema.document == {
        "columns": [
            {"name": "id", "type": "bigint", "nullable": False},
            {"name": "amount", "type": "decimal(12,2)", "nullable": True},
            {"name": "__deleted", "type": "string", "nullable": True},
        ],
        "key": ["id"],
    }
    assert len(schema.fingerprint) == 64
    # the same shape fingerprints alike (field metadata, the record columns' order do not count)
    again = StructType(
        [
            StructField("__timestamp", TimestampType()),
            StructField("id", LongType(), False, metadata={"comment": "x"}),
            StructField("amount", DecimalType(12, 2)),
            StructField("__deleted", StringType()),
            StructField("__key", StructType([StructField("id", LongType(), False)])),
        ]
    )
    assert TopicSchema.of(again).fingerprint == schema.fingerprint
    # … a column's order, a type, nullability and the key do
    for other in (
        _struct(StructField("amount", DecimalType(12, 2)), StructField("id", LongType(), False), key=["id"]),
        _struct(StructField("id", LongType(), False), StructField("amount", DecimalType(12, 3)), key=["id"]),
        _struct(StructField("id", LongType(), True), StructField("amount", DecimalType(12, 2)), key=["id"]),
        _struct(StructField("id", LongType(), False), StructField("amount", DecimalType(12, 2))),
    ):
        assert (
            TopicSchema.of(other).fingerprint
            != TopicSchema.of(
                _struct(StructField("id", LongType(), False), StructField("amount", DecimalType(12, 2)), key=["id"])
            ).fingerprint
        )


def test_nested_types_keep_what_simple_string_does_not_say() -> None:
    loose = TopicSchema.of(StructType([StructField("a", StructType([StructField("x", IntegerType(), True)]))]))
    strict = TopicSchema.of(StructType([StructField("a", StructType([StructField("x", IntegerType(), False)]))]))
    assert loose.columns[0]["type"] == strict.columns[0]["type"] == "struct<x:int>"
    assert loose.fingerprint != strict.fingerprint
    assert diff_schemas(loose.document, strict.document).nested == ["a"]


def test_a_key_that_is_no_struct_is_its_type() -> None:
    schema = TopicSchema.of(StructType([StructField("v", StringType()), StructField("__key", StringType())]))
    assert schema.document == {
        "columns": [{"name": "v", "type": "string", "nullable": True}],
        "key": [],
        "key_type": "string",
    }


def test_diff_names_every_kind_of_change() -> None:
    old = TopicSchema.of(
        _struct(
            StructField("id", LongType(), False),
            StructField("qty", IntegerType()),
            StructField("name", StringType()),
            StructField("gone", StringType()),
            key=["id"],
        )
    )
    new = TopicSchema.of(
        _struct(
            StructField("id", LongType(), False),
            StructField("qty", LongType()),
            StructField("name", StringType(), False),
            StructField("note", StringType()),
            key=["id", "qty"],
        )
    )
    changes = diff_schemas(old.document, new.document)
    assert [c["name"] for c in changes.added] == ["note"]
    assert [c["name"] for c in changes.dropped] == ["gone"]
    assert changes.retyped == [{"name": "qty", "from": "int", "to": "bigint"}]
    assert changes.nullability == [{"name": "name", "from": True, "to": False}]
    assert changes.key == {"from": ["id"], "to": ["id", "qty"]}
    assert diff_schemas(old.document, old.document).empty


def test_avro_maps_every_spark_type_and_parses() -> None:
    struct = StructType(
        [
            StructField("flag", BooleanType(), False),
            StructField("tiny", ByteType()),
            StructField("small", ShortType()),
            StructField("n", IntegerType()),
            StructField("big", LongType(), False),
            StructField("f", FloatType()),
            StructField("d", DoubleType()),
            StructField("s", StringType()),
            StructField("b", BinaryType()),
            StructField("amount", DecimalType(12, 2)),
            StructField("day", DateType()),
            StructField("at", TimestampType()),
            StructField("local", TimestampNTZType()),
            StructField("tags", ArrayType(StringType(), containsNull=False)),
            StructField("attrs", MapType(StringType(), LongType())),
            StructField("by_id", MapType(IntegerType(), StringType(), valueContainsNull=False)),
            StructField(
                "addr", StructType([StructField("city", StringType()), StructField("zip", IntegerType(), False)])
            ),
            StructField("nothing", NullType()),
            StructField("code", CharType(3)),
            StructField("span", DayTimeIntervalType()),
            StructField("months", YearMonthIntervalType()),
            StructField("first name", StringType()),  # not an Avro name
            StructField("first_name", StringType()),  # what the one before cleans up to
            StructField("__key", StructType([StructField("big", LongType(), False)])),
        ]
    )
    schema = avro_schema("orders.v1", TopicSchema.of(struct).document)
    fastavro.parse_schema(json.loads(json.dumps(schema)))  # a valid Avro schema
    assert schema["name"] == "orders_v1" and schema["namespace"] == "connect" and schema["connect.key"] == ["big"]
    types = {f["name"]: f["type"] for f in schema["fields"]}
    assert types["flag"] == "boolean" and types["big"] == "long"
    assert types["tiny"] == ["null", {"type": "int", "connect.type": "int8"}]
    assert types["amount"] == ["null", {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 2}]
    assert types["day"] == ["null", {"type": "int", "logicalType": "date"}]
    assert types["at"] == ["null", {"type": "long", "logicalType": "timestamp-micros"}]
    assert types["local"] == ["null", {"type": "long", "logicalType": "local-timestamp-micros"}]
    assert types["tags"] == ["null", {"type": "array", "items": "string"}]
    assert types["attrs"] == ["null", {"type": "map", "values": ["null", "long"]}]
    assert types["by_id"][1]["type"] == "array" and types["by_id"][1]["connect.type"] == "map"
    assert [f["name"] for f in types["by_id"][1]["items"]["fields"]] == ["key", "value"]
    assert types["addr"][1] == {
        "type": "record",
        "name": "orders_v1_addr",
        "fields": [
            {"name": "city", "type": ["null", "string"], "default": None},
            {"name": "zip", "type": "int"},
        ],
    }
    assert types["nothing"] == "null"
    assert types["code"] == ["null", {"type": "string", "connect.spark.type": "char(3)"}]
    assert types["span"][1]["type"] == "long" and types["months"][1]["type"] == "int"
    renamed = [f for f in schema["fields"] if f.get("connect.column.name") == "first name"]
    assert [f["name"] for f in renamed] == ["first_name_2"]  # a valid name keeps it; the other goes round it
    assert len({f["name"] for f in schema["fields"]}) == len(schema["fields"])  # unique field names
    assert all(f.get("default", None) is None for f in schema["fields"])
    assert json.loads(avro_text("orders.v1", TopicSchema.of(struct).document)) == schema


def test_avro_names_are_valid_whatever_the_name() -> None:
    assert avro_name("orders") == "orders"
    assert avro_name("1st") == "_1st"
    assert avro_name("") == "_"
    assert avro_name("a.b-c d/é") == "a_b_c_d__"
    # many columns that clean up alike: unique names, each found in one try (linear)
    names = [f"a{c}b" for c in " -./:;!?" * 250] + ["a_b", "a_b"]  # Spark allows two columns of one name
    struct = StructType([StructField(n, StringType()) for n in names])
    schema = avro_schema("t", TopicSchema.of(struct).document)
    assert len({f["name"] for f in schema["fields"]}) == len(names)
    fastavro.parse_schema(schema)


_PRIMITIVE_TYPES: list[DataType] = [
    BooleanType(),
    ByteType(),
    IntegerType(),
    LongType(),
    DoubleType(),
    StringType(),
    BinaryType(),
    DecimalType(38, 10),
    DateType(),
    TimestampType(),
    TimestampNTZType(),
]
_NAMES = st.text(min_size=1, max_size=8)


def _types(depth: int) -> st.SearchStrategy[DataType]:
    base = st.sampled_from(_PRIMITIVE_TYPES)
    if depth == 0:
        return base
    inner = _types(depth - 1)
    return st.one_of(
        base,
        st.builds(ArrayType, inner, st.booleans()),
        st.builds(MapType, st.sampled_from([StringType(), IntegerType()]), inner, st.booleans()),
        st.lists(st.tuples(_NAMES, inner, st.booleans()), min_size=1, max_size=4).map(
            lambda fs: StructType([StructField(n, t, b) for n, t, b in fs])
        ),
    )


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(_NAMES, _types(2), st.booleans()), min_size=1, max_size=6))
def test_any_shape_makes_an_avro_schema_that_parses(fields: list[tuple[str, DataType, bool]]) -> None:
    struct = StructType(
        [StructField(n, t, b) for n, t, b in fields if not n.startswith("__")] or [StructField("x", StringType())]
    )
    document = TopicSchema.of(struct).document
    fastavro.parse_schema(json.loads(avro_text("topic-1", document)))


def _nested(depth: int, name: str = "f") -> StructType:
    """A column `c` of `depth` structs, one in the other (built in a loop: no recursion here)."""
    kind: DataType = IntegerType()
    for _ in range(depth):
        kind = StructType([StructField(name, kind)])
    return StructType([StructField("c", kind)])


def test_names_postgres_cannot_hold_become_replacement_characters() -> None:
    """A NUL or an unpaired surrogate in a column's name (a JSON document's key, a SQL alias) would
    fail the run's commit (Postgres' JSON holds neither): they are kept as U+FFFD."""
    struct = _struct(
        StructField("a\x00b", StringType()),
        StructField("c\ud800", StructType([StructField("d\x00", IntegerType())])),
        key=["k\x00"],
    )
    schema = TopicSchema.of(struct)
    text = json.dumps(schema.document, ensure_ascii=False)
    assert "\x00" not in text and "\\u0000" not in text
    text.encode()  # no unpaired surrogate left
    assert [c["name"] for c in schema.columns] == ["a\ufffdb", "c\ufffd"]
    assert schema.columns[1]["type"] == "struct<d\ufffd:int>" and schema.key == ["k\ufffd"]
    fastavro.parse_schema(json.loads(avro_text("t", schema.document)))


def test_a_shape_nested_past_the_limit_is_refused_whatever_its_depth() -> None:
    """Spark reads a schema ~240 levels deep; the walks of a recorded one (metadata, Avro, JSON)
    recurse, so past `MAX_NESTING` levels the shape is refused with its own error, never a
    RecursionError (which failed the run at ~170 levels), however deep it is."""
    deepest = TopicSchema.of(_nested(MAX_NESTING))
    fastavro.parse_schema(json.loads(avro_text("t", deepest.document)))
    for depth in (MAX_NESTING + 1, 300, 5_000):
        with pytest.raises(TooDeeplyNestedError, match=r"column `c` nests .* deeper than 64 levels"):
            TopicSchema.of(_nested(depth))
    arrays: DataType = IntegerType()
    for _ in range(MAX_NESTING + 1):
        arrays = ArrayType(MapType(StringType(), arrays))
    with pytest.raises(TooDeeplyNestedError):
        TopicSchema.of(StructType([StructField("m", arrays)]))


def test_nested_record_names_stay_short_however_long_the_fields() -> None:
    """A nested record is named after its parent and its field: uncut, 60 levels of 500-character
    field names made a 900 KB schema (the names grow with the depth)."""
    document = TopicSchema.of(_nested(60, "x" * 500)).document
    text = avro_text("t", document)
    assert len(text) < 100_000
    schema = json.loads(text)
    fastavro.parse_schema(schema)
    names, record = [], schema["fields"][0]["type"][1]
    while isinstance(record, dict):
        names.append(record["name"])
        record = record["fields"][0]["type"][1] if isinstance(record["fields"][0]["type"], list) else None
    assert len(names) == 60 and len(set(names)) == 60 and max(map(len, names)) <= 110
