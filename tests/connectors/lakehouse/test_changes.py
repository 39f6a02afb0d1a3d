"""The newest change per key of a batch (`lakehouse._changes`), on Arrow tables as a sink holds them."""

from __future__ import annotations

import pyarrow as pa
import pytest

from connect_core.connectors.lakehouse._changes import changes, next_offsets, value_rows
from connect_core.sdk.errors import DataError


def _records(rows: list[dict], key: bool = False) -> pa.Table:
    table = pa.Table.from_pylist(
        [{k: v for k, v in r.items() if k != "__key"} for r in rows],
        schema=pa.schema(
            [
                ("id", pa.int64()),
                ("name", pa.string()),
                ("__op", pa.string()),
                ("__tombstone", pa.bool_()),
                ("__partition", pa.int32()),
                ("__offset", pa.int64()),
            ]
        ),
    )
    if key:
        ids = [r["__key"] for r in rows]
        table = table.append_column("__key", pa.StructArray.from_arrays([pa.array(ids, pa.int64())], names=["id"]))
    return table


def _row(
    offset: int, id_: int | None, name: str | None, op: str | None, tomb: bool = False, partition: int = 0
) -> dict:
    return {
        "id": id_,
        "name": name,
        "__op": op,
        "__tombstone": tomb,
        "__partition": partition,
        "__offset": offset,
        "__key": id_,
    }


def test_newest_change_per_key_wins_and_deletes_drop_the_key() -> None:
    rows = [
        _row(0, 1, "a", "c"),
        _row(1, 2, "b", "c"),
        _row(2, 1, "a2", "u"),
        _row(3, 1, "a3", "u"),  # updated twice in the batch: the newest wins
        _row(4, 2, "b", "d"),  # deleted
        _row(5, 3, "c", "c"),
        _row(6, 3, "c", "d"),
        _row(7, 3, "c-again", "c"),  # deleted, then its key inserted again
    ]
    found = changes(_records(rows[::-1]), ["id"], "__op")  # in any order: offsets decide
    assert sorted(found.rows.select(["id", "name"]).to_pylist(), key=lambda r: r["id"]) == [
        {"id": 1, "name": "a3"},
        {"id": 3, "name": "c-again"},
    ]
    assert sorted(found.keys["id"].to_pylist()) == [1, 2, 3]
    assert found.deleted == 1
    assert "__partition" not in found.rows.column_names and "__op" in found.rows.column_names


def test_tombstones_take_their_key_from_the_record_key_and_rewrite_flags_delete() -> None:
    rows = [_row(0, 1, "a", None), _row(1, 2, "b", None), _row(2, None, None, None, tomb=True)]
    rows[2]["__key"] = 2  # the tombstone's value is null: its key comes from `__key`
    table = _records(rows, key=True)
    found = changes(table, ["id"])
    assert found.rows.select(["id", "name"]).to_pylist() == [{"id": 1, "name": "a"}]
    assert found.deleted == 1

    flagged = pa.table(
        {
            "id": pa.array([5, 6], pa.int64()),
            "__deleted": ["false", "true"],
            "__partition": pa.array([0, 0], pa.int32()),
            "__offset": pa.array([10, 11], pa.int64()),
        }
    )
    found = changes(flagged, ["id"])
    assert found.rows["id"].to_pylist() == [5] and found.deleted == 1


def test_a_record_without_its_id_column_is_a_data_error_naming_where_it_is() -> None:
    with pytest.raises(DataError, match="partition/offset 0/1 has no value for id column `id`"):
        changes(_records([_row(0, 1, "a", "c"), _row(1, None, "x", "c")]), ["id"], "__op")
    with pytest.raises(DataError, match="id column `nope`"):
        changes(_records([_row(0, 1, "a", "c")]), ["nope"])


def test_appends_drop_tombstones_and_offsets_reach_past_the_last_record() -> None:
    table = _records([_row(3, 1, "a", None), _row(4, None, None, None, tomb=True), _row(9, 2, "b", None, partition=1)])
    assert value_rows(table).column_names == ["id", "name", "__op"]
    assert value_rows(table).num_rows == 2
    assert next_offsets(table) == {0: 5, 1: 10}
