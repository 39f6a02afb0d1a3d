"""ExtractNewRecordState on both paths: Debezium's modes, the keys before 3.2, added fields and headers."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from connect_core.sdk.transforms import DataError
from connect_core.transforms.debezium import ExtractNewRecordState
from tests.transforms.conftest import make, values

ROW = "struct<id:long,name:string>"
SOURCE = "struct<db:string,schema:string,table:string,lsn:long,ts_ms:long>"
HEADERS = "array<struct<key:string,value:string>>"
SCHEMA = (
    f"__key struct<id:long>, before {ROW}, after {ROW}, source {SOURCE}, op string, ts_ms long, "
    f"__tombstone boolean, __headers {HEADERS}"
)


def _source(lsn: int) -> dict[str, Any]:
    return {"db": "shop", "schema": "public", "table": "items", "lsn": lsn, "ts_ms": 1000 + lsn}


def event(
    op: str | None, id_: int, before: str | None = None, after: str | None = None, lsn: int = 0
) -> dict[str, Any]:
    row = lambda name: None if name is None else {"id": id_, "name": name}  # noqa: E731
    return {
        "__key": {"id": id_},
        "before": row(before),
        "after": row(after),
        "source": _source(lsn) if op else None,
        "op": op,
        "ts_ms": 2000 + lsn if op else None,
        "__tombstone": op is None,
        "__headers": [],
    }


# a read (snapshot), a create, an update, a delete with its tombstone, and a truncate
EVENTS = [
    event("r", 1, after="a", lsn=1),
    event("c", 2, after="b", lsn=2),
    event("u", 1, before="a", after="a2", lsn=3),
    event("d", 2, before="b", lsn=4),
    event(None, 2),
    {**event("t", 0, lsn=5), "__key": None},
]


def keys(rows: list[dict[str, Any]]) -> list[tuple[int | None, bool]]:
    return [((r["__key"] or {}).get("id"), bool(r["__tombstone"])) for r in rows]


def test_default_mode_turns_deletes_into_tombstones_and_drops_the_sources(both) -> None:  # type: ignore[no-untyped-def]
    out = both(make(ExtractNewRecordState), EVENTS, SCHEMA)
    assert values(out) == [
        {"id": 1, "name": "a"},
        {"id": 2, "name": "b"},
        {"id": 1, "name": "a2"},
        {"id": None, "name": None},
    ]
    # the delete became the key's tombstone; the source's own tombstone and the truncate are gone
    assert keys(out) == [(1, False), (2, False), (1, False), (2, True)]
    assert not {"before", "after", "source", "op", "ts_ms"} & set(out[0])


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({"delete.tombstone.handling.mode": "drop"}, [(1, False), (2, False), (1, False)]),
        ({"delete.tombstone.handling.mode": "tombstone"}, [(1, False), (2, False), (1, False), (2, True)]),
        ({"delete.tombstone.handling.mode": "delete-to-tombstone"}, [(1, False), (2, False), (1, False), (2, True)]),
        # before Debezium 3.2: the default is to drop both
        ({"delete.handling.mode": "drop"}, [(1, False), (2, False), (1, False)]),
        ({"drop.tombstones": "true"}, [(1, False), (2, False), (1, False)]),
        ({"delete.handling.mode": "drop", "drop.tombstones": "false"}, [(1, False), (2, False), (1, False), (2, True)]),
        ({"delete.handling.mode": "none"}, [(1, False), (2, False), (1, False), (2, True)]),
        (
            {"delete.handling.mode": "none", "drop.tombstones": False},
            [(1, False), (2, False), (1, False), (2, True), (2, True)],
        ),
        # the new key wins when both are given
        (
            {"delete.tombstone.handling.mode": "drop", "delete.handling.mode": "none"},
            [(1, False), (2, False), (1, False)],
        ),
    ],
)
def test_delete_and_tombstone_handling(both, options: dict[str, Any], expected: list[Any]) -> None:  # type: ignore[no-untyped-def]
    out = both(make(ExtractNewRecordState, **options), EVENTS, SCHEMA)
    assert keys(out) == expected
    assert "__deleted" not in out[0]


@pytest.mark.parametrize(
    ("options", "tombstone_kept"),
    [
        ({"delete.tombstone.handling.mode": "rewrite"}, False),
        ({"delete.tombstone.handling.mode": "rewrite-with-tombstone"}, True),
        ({"delete.handling.mode": "rewrite"}, False),
        ({"delete.handling.mode": "rewrite", "drop.tombstones": "false"}, True),
    ],
)
def test_rewrite_modes_mark_the_deleted_row(both, options: dict[str, Any], tombstone_kept: bool) -> None:  # type: ignore[no-untyped-def]
    out = both(make(ExtractNewRecordState, **options), EVENTS, SCHEMA)
    expected = [
        {"id": 1, "name": "a", "__deleted": "false"},
        {"id": 2, "name": "b", "__deleted": "false"},
        {"id": 1, "name": "a2", "__deleted": "false"},
        {"id": 2, "name": "b", "__deleted": "true"},  # the delete's `before` row
    ]
    if tombstone_kept:
        expected.append({"id": None, "name": None, "__deleted": None})
    assert values(out) == expected
    assert [r["__tombstone"] for r in out] == [False] * 4 + [True] * tombstone_kept


def test_add_fields_and_headers(both) -> None:  # type: ignore[no-untyped-def]
    t = make(
        ExtractNewRecordState,
        **{
            "add.fields": "op, table, source.lsn, ts_ms:changed_at",
            "add.headers": "db",
            "add.headers.prefix": "dbz.",
        },
    )
    out = both(t, EVENTS[:3], SCHEMA)
    assert values(out) == [
        {"id": 1, "name": "a", "__op": "r", "__table": "items", "__source_lsn": 1, "changed_at": 2001},
        {"id": 2, "name": "b", "__op": "c", "__table": "items", "__source_lsn": 2, "changed_at": 2002},
        {"id": 1, "name": "a2", "__op": "u", "__table": "items", "__source_lsn": 3, "changed_at": 2003},
    ]
    assert [r["__headers"] for r in out] == [[{"key": "dbz.db", "value": "shop"}]] * 3


def test_a_topic_without_envelopes_is_a_data_error(both) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(DataError, match=r"no `after`, `op`.*CDC source"):
        both(make(ExtractNewRecordState), [{"id": 1, "name": "a"}], "id long, name string")


def test_an_added_field_the_event_lacks_is_a_data_error(both) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(DataError, match="its `source` has no field `txId`"):
        both(make(ExtractNewRecordState, **{"add.fields": "source.txId"}), EVENTS[:1], SCHEMA)


def test_config_errors() -> None:
    with pytest.raises(ValidationError, match=r"route\.by\.field is not supported"):
        make(ExtractNewRecordState, **{"route.by.field": "source.table"})
    with pytest.raises(ValidationError, match=r"delete\.tombstone\.handling\.mode"):
        make(ExtractNewRecordState, **{"delete.tombstone.handling.mode": "keep"})
    with pytest.raises(ValidationError, match=r"delete\.handling\.mode"):
        make(ExtractNewRecordState, **{"delete.handling.mode": "rewrite-with-tombstone"})


def test_debezium_class_name_resolves_to_the_transform() -> None:
    from connect_core.runtime.plugins import PluginRegistry

    registry = PluginRegistry()
    for name in ("io.debezium.transforms.ExtractNewRecordState", "ExtractNewRecordState"):
        assert registry.resolve_transform(name).cls is ExtractNewRecordState
