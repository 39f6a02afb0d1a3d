"""ReplaceField, MaskField and ValueToKey, each through Spark and Arrow (the `both` fixture)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest
from pydantic import ValidationError

from connect_core.runtime.processing.chain import TransformError
from connect_core.transforms.fields import (
    MaskFieldKey,
    MaskFieldValue,
    ReplaceFieldKey,
    ReplaceFieldValue,
    ValueToKey,
)
from tests.transforms.conftest import make, values

ROWS = [{"id": 1, "name": "a", "city": "x"}, {"id": 2, "name": None, "city": "y"}]
SCHEMA = "id long, name string, city string"

# -- ReplaceField -----------------------------------------------------------------


def test_replace_field_value_excludes_and_renames_keeping_order(both) -> None:  # type: ignore[no-untyped-def]
    t = make(ReplaceFieldValue, exclude="city", renames="id:user_id, name:full_name")
    out = both(t, ROWS, SCHEMA)
    assert values(out) == [{"user_id": 1, "full_name": "a"}, {"user_id": 2, "full_name": None}]
    assert list(out[0])[:2] == ["user_id", "full_name"]


def test_replace_field_include_and_exclude_together_exclude_wins(both) -> None:  # type: ignore[no-untyped-def]
    t = make(ReplaceFieldValue, include=["id", "city", "absent"], exclude=["city"])
    assert values(both(t, ROWS, SCHEMA)) == [{"id": 1}, {"id": 2}]


def test_replace_field_accepts_kafkas_deprecated_names() -> None:
    config = ReplaceFieldValue.config_model.model_validate({"blacklist": "a,b", "whitelist": "c"})
    assert (config.exclude, config.include) == (["a", "b"], ["c"])


def test_replace_field_key_renames_key_fields_and_keeps_null_keys(both) -> None:  # type: ignore[no-untyped-def]
    rows = [{"id": 1, "__key": {"id": 1, "org": "o"}}, {"id": 2, "__key": None}]
    out = both(
        make(ReplaceFieldKey, renames="id:key_id", exclude="org"), rows, "id long, __key struct<id:long,org:string>"
    )
    assert [r["__key"] for r in out] == [{"key_id": 1}, None]


def test_replace_field_rename_onto_another_field_fails(both) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(TransformError, match="two fields of the record value the name `city`"):
        both(make(ReplaceFieldValue, renames="name:city"), ROWS, SCHEMA)


@pytest.mark.parametrize("renames", ["id", "id:", ":x", "a:b:c"])
def test_replace_field_rejects_bad_renames(renames: str) -> None:
    with pytest.raises(ValidationError, match="write `old:new` pairs"):
        make(ReplaceFieldValue, renames=renames)


# -- MaskField --------------------------------------------------------------------

# No map column: the fixture compares Spark's maps (dicts) with Arrow's (lists of pairs) as they come.
TYPED = (
    "i int, l long, d double, f float, b boolean, s string, bin binary, dec decimal(10,2), day date, "
    "ts timestamp, arr array<int>"
)
TYPED_ROW = {
    "i": 7,
    "l": 8,
    "d": 1.5,
    "f": 2.5,
    "b": True,
    "s": "secret",
    "bin": b"\x01\x02",
    "dec": Decimal("12.34"),
    "day": dt.date(2024, 5, 6),
    "ts": dt.datetime(2024, 5, 6, 7, 8, 9),
    "arr": [1, 2],
}


def test_mask_field_value_gives_each_type_its_empty_value_and_keeps_nulls(both) -> None:  # type: ignore[no-untyped-def]
    fields = list(TYPED_ROW)
    out = both(make(MaskFieldValue, fields=fields), [TYPED_ROW, dict.fromkeys(fields)], TYPED)
    masked = values(out)[0]
    assert {k: v for k, v in masked.items() if k != "bin"} == {
        "i": 0,
        "l": 0,
        "d": 0.0,
        "f": 0.0,
        "b": False,
        "s": "",
        "dec": Decimal("0.00"),
        "day": dt.date(1970, 1, 1),
        "ts": dt.datetime(1970, 1, 1),
        "arr": [],
    }
    assert bytes(masked["bin"]) == b""
    assert values(out)[1] == dict.fromkeys(fields)


def test_mask_field_with_a_replacement_converts_it_to_each_field_type(both) -> None:  # type: ignore[no-untyped-def]
    out = both(make(MaskFieldValue, fields="i,d,dec,s", replacement="42"), [TYPED_ROW], TYPED)
    row = values(out)[0]
    assert (row["i"], row["d"], row["dec"], row["s"], row["l"]) == (42, 42.0, Decimal("42.00"), "42", 8)


@pytest.mark.parametrize(
    ("fields", "replacement", "message"),
    [
        ("i", "x", "`x` is not a 32-bit integer"),
        ("i", "3000000000", "not a 32-bit integer"),
        ("dec", "1.234", r"does not fit decimal\(10,2\)"),
        ("b", "true", "only masks numeric and string fields"),
    ],
)
def test_mask_field_replacement_that_does_not_fit_fails(both, fields, replacement, message) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(TransformError, match=message):
        both(make(MaskFieldValue, fields=fields, replacement=replacement), [TYPED_ROW], TYPED)


def test_mask_field_missing_field_names_it(both) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(TransformError, match="`fields` names `ssn`, not a field of the record value"):
        both(make(MaskFieldValue, fields="name,ssn"), ROWS, SCHEMA)


def test_mask_field_key(both) -> None:  # type: ignore[no-untyped-def]
    rows = [{"id": 1, "__key": {"id": 1, "email": "a@b"}}, {"id": 2, "__key": None}]
    out = both(make(MaskFieldKey, fields="email"), rows, "id long, __key struct<id:long,email:string>")
    assert [r["__key"] for r in out] == [{"id": 1, "email": ""}, None]


def test_mask_field_config_needs_fields_and_a_non_empty_replacement() -> None:
    with pytest.raises(ValidationError, match="at least one field"):
        make(MaskFieldValue, fields="")
    with pytest.raises(ValidationError, match="must not be empty"):
        make(MaskFieldValue, fields="a", replacement="")


# -- ValueToKey -------------------------------------------------------------------


def test_value_to_key_makes_a_struct_key_in_the_listed_order(both) -> None:  # type: ignore[no-untyped-def]
    out = both(make(ValueToKey, fields="city,id"), ROWS, SCHEMA)
    assert [r["__key"] for r in out] == [{"city": "x", "id": 1}, {"city": "y", "id": 2}]
    assert values(out) == [{k: r[k] for k in ("id", "name", "city")} for r in ROWS]


def test_value_to_key_replaces_an_existing_key_and_nulls_it_for_tombstones(both) -> None:  # type: ignore[no-untyped-def]
    rows = [{"id": 1, "__key": "old", "__tombstone": False}, {"id": None, "__key": "gone", "__tombstone": True}]
    out = both(make(ValueToKey, fields=["id"]), rows, "id long, __key string, __tombstone boolean")
    assert [r["__key"] for r in out] == [{"id": 1}, None]


def test_value_to_key_missing_field_names_it(both) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(TransformError, match="`fields` names `tenant`, not a field of the record value"):
        both(make(ValueToKey, fields="id,tenant"), ROWS, SCHEMA)


def test_value_to_key_config_rejects_no_or_repeated_fields() -> None:
    with pytest.raises(ValidationError, match="at least one value field"):
        make(ValueToKey, fields=[])
    with pytest.raises(ValidationError, match="`id` listed twice"):
        make(ValueToKey, fields="id,id")
