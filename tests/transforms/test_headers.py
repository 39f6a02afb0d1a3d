from __future__ import annotations

import datetime as dt

import pytest
from pydantic import ValidationError

from connect_core.runtime.processing.chain import TransformError
from connect_core.transforms.headers import DropHeaders, HeaderFromKey, HeaderFromValue, InsertHeader
from tests.transforms.conftest import make, values

HEADERS = "array<struct<key:string,value:string>>"


def h(*pairs: tuple[str, str | None]) -> list[dict[str, str | None]]:
    return [{"key": k, "value": v} for k, v in pairs]


def test_drop_headers_removes_every_header_with_those_keys(both) -> None:  # type: ignore[no-untyped-def]
    rows = [
        {"id": 1, "__headers": h(("a", "1"), ("b", "2"), ("a", "3"), ("c", "4"), ("d", "5"))},
        {"id": 2, "__headers": None},
        {"id": 3, "__headers": []},
        {"id": 4, "__headers": h(("a", "x"))},
        {"id": 5, "__headers": h((None, "no key"), ("e", None))},  # type: ignore[arg-type]
    ]
    out = both(make(DropHeaders, headers="a, c"), rows, f"id long, __headers {HEADERS}")
    assert [r["__headers"] for r in out] == [
        h(("b", "2"), ("d", "5")),
        None,
        [],
        [],
        h((None, "no key"), ("e", None)),  # type: ignore[arg-type]
    ]
    assert values(out) == [{"id": i} for i in range(1, 6)]


def test_drop_headers_takes_a_list_and_needs_a_name() -> None:
    assert make(DropHeaders, headers=["a", "b"]).config.headers == ["a", "b"]
    with pytest.raises(ValidationError, match="at least one"):
        make(DropHeaders, headers="")
    with pytest.raises(ValidationError, match="headers"):
        make(DropHeaders)


def test_insert_header_appends_after_the_existing_headers(both) -> None:  # type: ignore[no-untyped-def]
    rows = [{"id": 1, "__headers": h(("a", "1"), ("app", "old"))}, {"id": 2, "__headers": None}, {"id": 3}]
    out = both(make(InsertHeader, header="app", **{"value.literal": "orders"}), rows, f"id long, __headers {HEADERS}")
    assert [r["__headers"] for r in out] == [
        h(("a", "1"), ("app", "old"), ("app", "orders")),
        h(("app", "orders")),
        h(("app", "orders")),
    ]


def test_insert_header_on_records_that_have_no_headers_column(both) -> None:  # type: ignore[no-untyped-def]
    out = both(make(InsertHeader, header="k", **{"value.literal": "v"}), [{"id": 1}, {"id": 2}], "id long")
    assert [r["__headers"] for r in out] == [h(("k", "v")), h(("k", "v"))]


def test_insert_header_needs_both_options() -> None:
    with pytest.raises(ValidationError, match=r"value\.literal"):
        make(InsertHeader, header="k")


ROWS = [
    {
        "id": 7,
        "name": "ann",
        "ok": True,
        "day": dt.date(2024, 1, 31),
        "at": dt.datetime(2024, 1, 31, 12, 0, 1, 234567, tzinfo=dt.UTC),
        "__headers": h(("trace", "t1")),
    },
    {"id": 8, "name": None, "ok": False, "day": None, "at": None, "__headers": None},
]
SCHEMA = f"id long, name string, ok boolean, day date, at timestamp, __headers {HEADERS}"


def test_header_from_value_copy_appends_one_header_per_field(both) -> None:  # type: ignore[no-untyped-def]
    t = make(
        HeaderFromValue,
        fields="id,name,ok,day,at",
        headers="x-id,x-name,x-ok,x-day,x-at",
        operation="copy",
    )
    out = both(t, ROWS, SCHEMA)
    assert [r["__headers"] for r in out] == [
        h(
            ("trace", "t1"),
            ("x-id", "7"),
            ("x-name", "ann"),
            ("x-ok", "true"),
            ("x-day", "2024-01-31"),
            ("x-at", "2024-01-31T12:00:01.234Z"),
        ),
        h(("x-id", "8"), ("x-name", None), ("x-ok", "false"), ("x-day", None), ("x-at", None)),
    ]
    assert list(values(out)[0]) == ["id", "name", "ok", "day", "at"]


def test_header_from_value_move_removes_the_fields(both) -> None:  # type: ignore[no-untyped-def]
    out = both(make(HeaderFromValue, fields="name,id", headers="n,i", operation="move"), ROWS, SCHEMA)
    assert values(out) == [
        {"ok": True, "day": dt.date(2024, 1, 31), "at": dt.datetime(2024, 1, 31, 12, 0, 1, 234567)},
        {"ok": False, "day": None, "at": None},
    ]
    assert out[0]["__headers"] == h(("trace", "t1"), ("n", "ann"), ("i", "7"))


def test_header_from_value_leaves_tombstones_alone(both) -> None:  # type: ignore[no-untyped-def]
    rows = [{"id": 1, "__tombstone": False}, {"id": None, "__tombstone": True}]
    out = both(make(HeaderFromValue, fields="id", headers="id", operation="copy"), rows, "id long, __tombstone boolean")
    assert [r["__headers"] for r in out] == [h(("id", "1")), None]


def test_header_from_key_move(both) -> None:  # type: ignore[no-untyped-def]
    rows = [{"v": 1, "__key": {"id": 1, "region": "eu"}}, {"v": 2, "__key": None}]
    t = make(HeaderFromKey, fields=["region"], headers=["region"], operation="move")
    out = both(t, rows, "v long, __key struct<id:long,region:string>")
    assert [(r["__key"], r["__headers"]) for r in out] == [({"id": 1}, h(("region", "eu"))), (None, None)]


def test_header_from_refuses_fields_without_a_common_text(both) -> None:  # type: ignore[no-untyped-def]
    t = make(HeaderFromValue, fields="price", headers="p", operation="copy")
    with pytest.raises(TransformError, match="`price` is of type"):
        both(t, [{"price": 1.5}], "price double")
    with pytest.raises(TransformError, match="no field `nope`"):
        both(make(HeaderFromValue, fields="nope", headers="p", operation="copy"), [{"price": 1.5}], "price double")


def test_header_from_config_is_checked() -> None:
    with pytest.raises(ValidationError, match="one header per field"):
        make(HeaderFromValue, fields="a,b", headers="x", operation="copy")
    with pytest.raises(ValidationError, match="'move' or 'copy'"):
        make(HeaderFromValue, fields="a", headers="x", operation="cut")
