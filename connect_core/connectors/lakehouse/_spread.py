"""An append written where the records are read: each Spark worker writes the table's data files.

A sink that took a big batch into the driver (10M rows: a gigabyte of Arrow, through the JVM
twice) would need a driver as big as its batch, and would write the files on one core. Here every
Python worker reads its share of the topic's files (`ArrowRecords`), keeps the records the table
does not hold yet (`held`), shapes their values to the table's columns, and hands them as a
stream to `writer`, which writes data files and says what it wrote. Only those descriptions (a few
hundred bytes per file) and each partition's next offset come back to the driver, which commits
them in one table commit, as before. A small batch runs the same code in the driver itself.

`writer` is sent to the workers: a picklable callable (`RecordBatchReader` → descriptions).
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from connect_core.connectors.lakehouse import _changes
from connect_core.sdk.evolution import cast
from connect_core.sdk.records import ArrowRecords

__all__ = ["Spread", "empty", "shaped", "spread"]

_OUT = "kind string, payload binary, partition int, next_offset long, rows long"


@dataclass(frozen=True)
class Spread:
    """What the workers wrote: `files` (the writer's descriptions), the next offset of each topic
    partition they read past the held ones (`reached`), the value rows written, the records read."""

    files: list[Any]
    reached: dict[int, int]
    rows: int
    records: int


def empty(records: ArrowRecords) -> pa.Table:
    """A table of no records, with the columns of `records`: what the checks of columns take."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(records.schema, timezone="UTC").empty_table()


def shaped(values: pa.Table, target: pa.Schema) -> pa.Table:
    """`values` as `target`'s columns: cast, null where they lack one (a table's older columns)."""
    arrays = [
        cast(values[f.name], f.type) if f.name in values.column_names else pa.nulls(values.num_rows, f.type)
        for f in target
    ]
    return pa.Table.from_arrays(arrays, schema=target)


def spread(
    records: ArrowRecords,
    held: Mapping[int, int],
    target: pa.Schema,
    writer: Callable[[pa.RecordBatchReader], Iterable[Any]],
) -> Spread:
    """Write the records of `records` past `held` (partition → next offset the table holds) as
    `target`'s rows, by `writer`, in Spark's workers (in the driver for a batch it holds)."""
    held = dict(held)

    def write(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        reached: dict[int, int] = {}
        counted = {"rows": 0, "records": 0}

        def fresh_values() -> Iterator[pa.RecordBatch]:
            for batch in batches:
                fresh = _changes.past(pa.Table.from_batches([batch]), held)
                if fresh.num_rows == 0:
                    continue
                counted["records"] += fresh.num_rows
                for partition, offset in _changes.next_offsets(fresh).items():
                    reached[partition] = max(offset, reached.get(partition, 0))
                values = shaped(_changes.value_rows(fresh), target)
                counted["rows"] += values.num_rows
                yield from values.to_batches()

        files = list(writer(pa.RecordBatchReader.from_batches(target, fresh_values())))
        out: list[dict[str, Any]] = [
            {"kind": "file", "payload": pickle.dumps(f), "partition": None, "next_offset": None, "rows": None}
            for f in files
        ]
        out += [
            {"kind": "offset", "payload": None, "partition": p, "next_offset": o, "rows": None}
            for p, o in reached.items()
        ]
        # the records read past `held` (in `next_offset`) and the value rows written
        out.append(
            {
                "kind": "count",
                "payload": None,
                "partition": None,
                "next_offset": counted["records"],
                "rows": counted["rows"],
            }
        )
        yield pa.RecordBatch.from_pylist(out, schema=_out_schema())

    found = records.collect_mapped(write, _OUT)
    reached: dict[int, int] = {}
    files, rows, read = [], 0, 0
    for row in found:
        if row["kind"] == "file":
            files.append(pickle.loads(row["payload"]))  # our own workers' output
        elif row["kind"] == "offset":
            partition = int(row["partition"])
            reached[partition] = max(int(row["next_offset"]), reached.get(partition, 0))
        else:
            rows += int(row["rows"])
            read += int(row["next_offset"])
    return Spread(files, reached, rows, read)


def _out_schema() -> pa.Schema:
    return pa.schema(
        [
            ("kind", pa.string()),
            ("payload", pa.binary()),
            ("partition", pa.int32()),
            ("next_offset", pa.int64()),
            ("rows", pa.int64()),
        ]
    )
