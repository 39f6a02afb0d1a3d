"""ExtractField, HoistField, Flatten, Cast and SetSchemaMetadata, each through Spark and Arrow."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import pytest
from pydantic import ValidationError

from connect_core.runtime.processing.chain import TransformError
from connect_core.transforms.cast import CastKey, CastValue
from connect_core.transforms.structure import (
    ExtractFieldKey,
    ExtractFieldValue,
    FlattenKey,
    FlattenValue,
    HoistFieldKey,
    HoistFieldValue,
    SetSchemaMetadataKey,
    SetSchemaMetadataValue,
    field_path,
)
from tests.transforms.conftest import chain, make, values

NESTED = "id long, user struct<name:string,address:struct<city:string,zip:int>>, tags array<string>"
NESTED_ROWS = [
    {"id": 1, "user": {"name": "ann", "address": {"city": "Oslo", "zip": 150}}, "tags": ["a"]},
    {"id": 2, "user": None, "tags": None},
]

# -- ExtractField -----------------------------------------------------------------


def test_extract_field_value_struct_fields_become_the_value(both) -> None:  # type: ignore[no-untyped-def]
    out = both(make(ExtractFieldValue, field="user"), NESTED_ROWS, NESTED)
    assert values(out) == [{"name": "ann", "address": {"city": "Oslo", "zip": 150}}, {"name": None, "address": None}]


def test_extract_field_value_primitive_is_one_column(both) -> None:  # type: ignore[no-untyped-def]
    assert values(both(make(ExtractFieldValue, field="id"), NESTED_ROWS, NESTED)) == [{"id": 1}, {"id": 2}]


def test_extract_field_v2_path_into_nested_structs(both) -> None:  # type: ignore[no-untyped-def]
    t = make(ExtractFieldValue, field="user.address.city", **{"field.syntax.version": "v2"})
    assert values(both(t, NESTED_ROWS, NESTED)) == [{"city": "Oslo"}, {"city": None}]


def test_extract_field_v1_takes_a_dotted_name_as_one_field(both) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(TransformError, match=r"no field `user\.address` in the record value"):
        both(make(ExtractFieldValue, field="user.address"), NESTED_ROWS, NESTED)


def test_extract_field_key_may_become_a_primitive(both) -> None:  # type: ignore[no-untyped-def]
    rows = [{"v": 1, "__key": {"id": 7, "org": "o"}}, {"v": 2, "__key": None}]
    out = both(make(ExtractFieldKey, field="id"), rows, "v long, __key struct<id:long,org:string>")
    assert [r["__key"] for r in out] == [7, None]


def test_extract_field_missing_nested_field_names_the_path(both) -> None:  # type: ignore[no-untyped-def]
    t = make(ExtractFieldValue, field="user.address.street", **{"field.syntax.version": "V2"})
    with pytest.raises(TransformError, match=r"no field `street` in `user.address` \(its fields: `city`, `zip`\)"):
        both(t, NESTED_ROWS, NESTED)


@pytest.mark.parametrize(
    ("path", "steps"),
    [
        ("a.b.c", ("a", "b", "c")),
        ("`a.b`.c", ("a.b", "c")),
        ("a.`b.c`", ("a", "b.c")),
        ("`a\\`.b`.c", ("a`.b", "c")),
        ("a.", ("a", "")),
        ("a`b.c", ("a`b", "c")),
    ],
)
def test_field_path_v2_syntax(path: str, steps: tuple[str, ...]) -> None:
    assert field_path(path, "V2") == steps
    assert field_path(path, "V1") == (path,)


def test_extract_field_config_rejects_unclosed_backticks_and_unknown_versions() -> None:
    with pytest.raises(ValidationError, match="never closes it"):
        make(ExtractFieldValue, field="`a.b", **{"field.syntax.version": "V2"})
    with pytest.raises(ValidationError):
        make(ExtractFieldValue, field="a", **{"field.syntax.version": "V3"})


# -- HoistField -------------------------------------------------------------------


def test_hoist_field_value_wraps_the_columns_and_a_tombstone_holds_null(both) -> None:  # type: ignore[no-untyped-def]
    rows = [{"id": 1, "name": "a", "__tombstone": False}, {"id": None, "name": None, "__tombstone": True}]
    out = both(make(HoistFieldValue, field="payload"), rows, "id long, name string, __tombstone boolean")
    assert values(out) == [{"payload": {"id": 1, "name": "a"}}, {"payload": None}]


def test_hoist_field_key_wraps_the_key_even_when_null(both) -> None:  # type: ignore[no-untyped-def]
    rows = [{"v": 1, "__key": 5}, {"v": 2, "__key": None}]
    out = both(make(HoistFieldKey, field="id"), rows, "v long, __key long")
    assert [r["__key"] for r in out] == [{"id": 5}, {"id": None}]


def test_hoist_field_key_leaves_rows_without_a_key_without_one(both) -> None:  # type: ignore[no-untyped-def]
    assert "__key" not in both(make(HoistFieldKey, field="id"), [{"v": 1}], "v long")[0]


def test_hoist_then_extract_gives_the_value_back(both) -> None:  # type: ignore[no-untyped-def]
    rows = [{"id": 1, "name": "a"}]
    out = both(
        chain(make(HoistFieldValue, field="p"), make(ExtractFieldValue, field="p")), rows, "id long, name string"
    )
    assert values(out) == rows


# -- Flatten ----------------------------------------------------------------------


def test_flatten_value_names_nested_fields_with_the_delimiter(both) -> None:  # type: ignore[no-untyped-def]
    out = both(make(FlattenValue, delimiter="_"), NESTED_ROWS, NESTED)
    assert values(out) == [
        {"id": 1, "user_name": "ann", "user_address_city": "Oslo", "user_address_zip": 150, "tags": ["a"]},
        {"id": 2, "user_name": None, "user_address_city": None, "user_address_zip": None, "tags": None},
    ]


def test_flatten_default_delimiter_is_a_dot(both) -> None:  # type: ignore[no-untyped-def]
    out = both(make(FlattenValue), NESTED_ROWS[:1], NESTED)
    assert list(values(out)[0]) == ["id", "user.name", "user.address.city", "user.address.zip", "tags"]


def test_flattened_dotted_names_work_in_later_transforms(both) -> None:  # type: ignore[no-untyped-def]
    from connect_core.transforms.fields import ReplaceFieldValue

    steps = chain(
        make(FlattenValue),
        make(CastValue, spec="user.address.zip:string"),
        make(ReplaceFieldValue, renames="user.name:name", exclude="tags"),
    )
    out = both(steps, NESTED_ROWS[:1], NESTED)
    assert values(out) == [{"id": 1, "name": "ann", "user.address.city": "Oslo", "user.address.zip": "150"}]


def test_flatten_key(both) -> None:  # type: ignore[no-untyped-def]
    rows = [{"v": 1, "__key": {"id": 1, "src": {"db": "d", "table": "t"}}}, {"v": 2, "__key": None}]
    out = both(make(FlattenKey), rows, "v long, __key struct<id:long,src:struct<db:string,table:string>>")
    assert [r["__key"] for r in out] == [{"id": 1, "src.db": "d", "src.table": "t"}, None]


def test_flatten_name_collision_fails(both) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(TransformError, match="two fields named `a_b`"):
        both(make(FlattenValue, delimiter="_"), [{"a_b": 1, "a": {"b": 2}}], "a_b int, a struct<b:int>")


# -- SetSchemaMetadata ------------------------------------------------------------


def test_set_schema_metadata_value_puts_name_and_version_on_value_columns(both, spark) -> None:  # type: ignore[no-untyped-def]
    t = make(SetSchemaMetadataValue, **{"schema.name": "com.acme.Order", "schema.version": "3"})
    rows = [{"id": 1, "name": "a"}]
    assert values(both(t, rows, "id long, name string")) == rows  # data unchanged on both paths
    out = chain(t).spark(spark.createDataFrame([(1, "a")], "id long, name string"), "t")
    meta = {f.name: f.metadata for f in out.schema.fields}
    assert meta["id"] == meta["name"] == {"connect.schema.name": "com.acme.Order", "connect.schema.version": 3}
    assert meta["__topic"] == {}


def test_set_schema_metadata_key_and_its_arrow_metadata(both) -> None:  # type: ignore[no-untyped-def]
    import pyarrow as pa

    t = make(SetSchemaMetadataKey, **{"schema.name": "Key"})
    rows = [{"v": 1, "__key": {"id": 1}}]
    assert both(t, rows, "v long, __key struct<id:long>")[0]["__key"] == {"id": 1}
    schema = pa.schema([("v", pa.int64()), ("__key", pa.struct([("id", pa.int64())]))])
    assert t.arrow_metadata(schema) == {"__key": {b"connect.schema.name": b"Key"}}


def test_set_schema_metadata_key_without_a_key_fails(both) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(TransformError, match="needs a record key"):
        both(make(SetSchemaMetadataKey, **{"schema.version": 1}), [{"v": 1}], "v long")


def test_set_schema_metadata_needs_a_name_or_a_version() -> None:
    with pytest.raises(ValidationError, match=r"set `schema\.name` or `schema\.version`"):
        make(SetSchemaMetadataValue)


# -- Cast -------------------------------------------------------------------------


def _errors(spark: Any, t: Any, rows: list[dict[str, Any]], schema: str) -> list[bool] | None:
    """`errors_spark` and `errors_arrow` of `t` over the rows, checked equal."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_schema

    from tests.transforms.conftest import _names

    df = spark.createDataFrame([tuple(r.get(f) for f in _names(spark, schema)) for r in rows], schema)
    batch = pa.RecordBatch.from_pylist(rows, schema=to_arrow_schema(df.schema, timezone="UTC"))
    on_spark, on_arrow = t.errors_spark(df), t.errors_arrow(batch)
    if on_spark is None or on_arrow is None:
        assert on_spark is None and on_arrow is None
        return None
    flags = [r[0] for r in df.select(on_spark).collect()]
    assert flags == on_arrow.to_pylist()
    return flags


def _fails(both, t: Any, rows: list[dict[str, Any]], schema: str) -> None:  # type: ignore[no-untyped-def]
    """The chain fails the record a cast could not convert (Spark raises it from the job)."""
    with pytest.raises(Exception, match="could not convert a record"):
        both(t, rows, schema)


def test_cast_text_to_integers_follows_parse_int(both, spark) -> None:  # type: ignore[no-untyped-def]
    good = ["12", "+7", "-0", "-2147483648", "007", None]
    out = both(make(CastValue, spec="s:int32"), [{"s": s} for s in good], "s string")
    assert [r["s"] for r in out] == [12, 7, 0, -2147483648, 7, None]
    bad = [" 1", "1.5", "x", "2147483648", "99999999999", "1e3", "12"]
    t = make(CastValue, spec="s:int32")
    assert _errors(spark, t, [{"s": s} for s in bad], "s string") == [True] * 6 + [False]
    _fails(both, t, [{"s": "12"}, {"s": "x"}], "s string")


def test_cast_text_to_int8_fails_out_of_range(both, spark) -> None:  # type: ignore[no-untyped-def]
    t = make(CastValue, spec="s:int8")
    assert [r["s"] for r in both(t, [{"s": "127"}, {"s": "-128"}], "s string")] == [127, -128]
    assert _errors(spark, t, [{"s": "128"}, {"s": "-129"}, {"s": "-00128"}], "s string") == [True, True, False]


def test_cast_text_to_floats_follows_parse_double(both, spark) -> None:  # type: ignore[no-untyped-def]
    good = [" 1.5 ", "2e3", ".5", "5.", "1.5f", "-Infinity", "1e40", None]  # no NaN: the fixture compares rows
    got = [r["s"] for r in both(make(CastValue, spec="s:float64"), [{"s": s} for s in good], "s string")]
    assert got == [1.5, 2000.0, 0.5, 5.0, 1.5, float("-inf"), 1e40, None]
    assert [r["s"] for r in both(make(CastValue, spec="s:float32"), [{"s": "1e40"}], "s string")] == [float("inf")]
    bad = ["0x1p3", "1,5", "", "1.5 x", "NaN", "-NaN"]  # Java reads NaN
    t = make(CastValue, spec="s:float64")
    assert _errors(spark, t, [{"s": s} for s in bad], "s string") == [True] * 4 + [False] * 2


def test_cast_numbers_narrow_and_truncate(both) -> None:  # type: ignore[no-untyped-def]
    rows = [{"l": 127, "d": 127.9, "dec": Decimal("-128.90")}, {"l": -5, "d": -128.9, "dec": None}]
    out = both(make(CastValue, spec="l:int8,d:int8,dec:int8"), rows, "l long, d double, dec decimal(10,2)")
    assert [(r["l"], r["d"], r["dec"]) for r in out] == [(127, 127, -128), (-5, -128, None)]


def test_cast_numbers_out_of_range_fail_the_record(both, spark) -> None:  # type: ignore[no-untyped-def]
    schema = "l long, d double, dec decimal(10,2)"
    t = make(CastValue, spec="l:int8,d:int8,dec:int8")
    rows = [
        {"l": 128, "d": 1.0, "dec": None},
        {"l": 1, "d": -129.0, "dec": None},
        {"l": 1, "d": float("nan"), "dec": None},
        {"l": 1, "d": 1.0, "dec": Decimal("128.00")},
        {"l": None, "d": None, "dec": None},
    ]
    assert _errors(spark, t, rows, schema) == [True, True, True, True, False]
    _fails(both, t, rows[:1], schema)


def test_cast_double_to_int64_at_the_edge(both, spark) -> None:  # type: ignore[no-untyped-def]
    rows = [{"d": 2.0**63}, {"d": -(2.0**63)}, {"d": -1.9}]
    out = both(make(CastValue, spec="d:int64"), rows, "d double")
    assert [r["d"] for r in out] == [2**63 - 1, -(2**63), -1]  # 2^63 saturates, as Spark's (Java's) conversion
    assert _errors(spark, make(CastValue, spec="d:int64"), [{"d": 2.0**64}, {"d": -(2.0**64)}], "d double") == [
        True,
        True,
    ]


def test_cast_to_boolean_as_kafka(both) -> None:  # type: ignore[no-untyped-def]
    rows = [
        {"s": "TRUE", "i": 2, "d": 0.5, "dec": Decimal("-1.00")},
        {"s": "yes", "i": 0, "d": float("nan"), "dec": Decimal("0.99")},
        {"s": None, "i": None, "d": -3.0, "dec": None},
    ]
    out = both(
        make(CastValue, spec="s:boolean,i:boolean,d:boolean,dec:boolean"),
        rows,
        "s string, i int, d double, dec decimal(5,2)",
    )
    assert [(r["s"], r["i"], r["d"], r["dec"]) for r in out] == [
        (True, True, False, True),
        (False, False, False, False),
        (None, None, True, None),
    ]


def test_cast_to_string_writes_java_numbers_and_iso_timestamps(both) -> None:  # type: ignore[no-untyped-def]
    rows = [
        {"d": 1e10, "f": 0.1, "dec": Decimal("0.00000010"), "b": True, "ts": dt.datetime(2024, 1, 2, 3, 4, 5, 678901)},
        {
            "d": 0.001,
            "f": 1.0e-5,
            "dec": Decimal("12.50000000"),
            "b": False,
            "ts": dt.datetime(1969, 12, 31, 23, 59, 59, 999999),
        },
        {"d": 7.654640481329076e18, "f": 95535579136.0, "dec": None, "b": None, "ts": None},
        {"d": -0.0, "f": float("nan"), "dec": None, "b": None, "ts": None},
        {"d": 123456.7, "f": 1234567.0, "dec": None, "b": None, "ts": None},
    ]
    schema = "d double, f float, dec decimal(20,8), b boolean, ts timestamp"
    out = both(make(CastValue, spec="d:string,f:string,dec:string,b:string,ts:string"), rows, schema)
    assert [tuple(r[k] for k in ("d", "f", "dec", "b", "ts")) for r in out] == [
        ("1.0E10", "0.1", "0.00000010", "true", "2024-01-02T03:04:05.678Z"),
        ("0.001", "1.0E-5", "12.50000000", "false", "1969-12-31T23:59:59.999Z"),
        ("7.654640481329076E18", "9.553558E10", None, None, None),
        ("-0.0", "NaN", None, None, None),
        ("123456.7", "1234567.0", None, None, None),
    ]


def test_cast_widens_and_rounds_to_floats(both) -> None:  # type: ignore[no-untyped-def]
    rows = [{"l": 2**53 + 1, "dec": Decimal("1.50"), "d": 1e40, "b": True}]
    out = both(
        make(CastValue, spec="l:float64,dec:float32,d:float32,b:float64"),
        rows,
        "l long, dec decimal(5,2), d double, b boolean",
    )
    assert (out[0]["l"], out[0]["dec"], out[0]["d"], out[0]["b"]) == (float(2**53), 1.5, float("inf"), 1.0)


def test_cast_whole_primitive_key_and_key_fields(both) -> None:  # type: ignore[no-untyped-def]
    rows = [{"v": 1, "__key": "42"}, {"v": 2, "__key": None}]
    assert [r["__key"] for r in both(make(CastKey, spec="int64"), rows, "v long, __key string")] == [42, None]
    rows = [{"v": 1, "__key": {"id": 4, "n": "x"}}]
    out = both(make(CastKey, spec="id:string"), rows, "v long, __key struct<id:int,n:string>")
    assert out[0]["__key"] == {"id": "4", "n": "x"}


def test_cast_whole_value_needs_a_single_column(both) -> None:  # type: ignore[no-untyped-def]
    assert [r["id"] for r in both(make(CastValue, spec="string"), [{"id": 3}], "id int")] == ["3"]
    with pytest.raises(TransformError, match="a whole-value cast needs a value of one column"):
        both(make(CastValue, spec="string"), [{"id": 3, "n": "x"}], "id int, n string")


def test_cast_ignores_fields_the_part_lacks_and_fails_on_unsupported_types(both, spark) -> None:  # type: ignore[no-untyped-def]
    t = make(CastValue, spec="absent:int32,id:int64")
    assert values(both(t, [{"id": 1}], "id int")) == [{"id": 1}]
    assert _errors(spark, t, [{"id": 1}], "id int") is None  # int32 → int64 cannot fail
    with pytest.raises(TransformError, match="cannot cast field `ts` of the record value from timestamp to int64"):
        both(make(CastValue, spec="ts:int64"), [{"ts": dt.datetime(2024, 1, 1)}], "ts timestamp")


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("id:int33", "unknown type `int33`"),
        ("id:int32,int64", "must be the only entry"),
        ("a:b:c", "is not `field:type`"),
        ("id:int32,id:string", "cast twice"),
        ("", "give `field:type` entries"),
    ],
)
def test_cast_spec_is_checked_at_config_time(spec: str, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        make(CastValue, spec=spec)


def test_cast_spec_types_are_case_insensitive() -> None:
    assert make(CastValue, spec="id:INT64, n : String").config.casts() == {"id": "int64", "n": "string"}
