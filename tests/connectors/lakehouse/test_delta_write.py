"""The Delta sink's append by the workers (`delta._write.FileWriter`, `commit_files`) without Spark:
the files each worker writes under a staging directory and the driver's commit of them read back,
by delta-rs, as the rows written, whatever the partition values."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable, Transaction

from connect_core.connectors.lakehouse.delta import _write
from connect_core.connectors.lakehouse.delta._tables import Location

#: Values a partition directory escapes (`/`, `=`, `%`, `:`, blanks, non-ASCII), or that look like a
#: way out of the table (`..`), an escape already (`%2F`), or nothing (empty, null).
HOSTILE = ["a/b", "..", "../../../etc", "x%y", "%2F", "a=b", "2024-01-01T10:00:00", " sp", "é €", "", None, "plain"]


def _reader(rows: pa.Table) -> pa.RecordBatchReader:
    return pa.RecordBatchReader.from_batches(rows.schema, rows.to_batches())


def test_workers_files_in_partitions_of_any_value_are_committed_readable_and_stay_in_the_table(
    tmp_path: Path,
) -> None:
    """The staging table's log spells each path percent-encoded; the commit encoded it again, so
    every file in a partition whose value needs escaping (a `:` of a timestamp) was named where no
    file is: the table could no longer be read at all."""
    table = tmp_path / "lake" / "orders"
    table.mkdir(parents=True)
    where = Location(str(table), local=True)
    rows = pa.table({"id": pa.array(range(len(HOSTILE)), pa.int64()), "r": pa.array(HOSTILE, pa.string())})
    adds = _write.FileWriter(where, ["r"])(_reader(rows))  # one worker
    _write.commit_files(where, None, rows.schema, adds, [Transaction("x", 1)], ["r"])
    more = pa.table({"id": pa.array([100, 101], pa.int64()), "r": pa.array(["a/b", "é €"], pa.string())})
    adds = _write.FileWriter(where, ["r"])(_reader(more))  # the next run, into the table made
    _write.commit_files(where, DeltaTable(str(table)), more.schema, adds, [Transaction("x", 2)], ["r"])
    empty = _write.FileWriter(where, ["r"])(_reader(more.slice(0, 0)))  # a worker with no fresh rows
    assert empty == []

    read = DeltaTable(str(table)).to_pyarrow_table().sort_by("id").to_pylist()
    written = sorted(rows.to_pylist() + more.to_pylist(), key=lambda r: r["id"])
    # Delta reads an empty partition value as null (its protocol: as delta-rs's own writes do)
    assert read == [{**r, "r": r["r"] or None} for r in written]
    assert all(Path(u.removeprefix("file://")).is_relative_to(table) for u in DeltaTable(str(table)).file_uris())
    assert [p.name for p in tmp_path.iterdir()] == ["lake"] and [p.name for p in (tmp_path / "lake").iterdir()] == [
        "orders"
    ]
    assert not [p for p in table.rglob("_delta_log") if p.parent != table]  # each staging log deleted
