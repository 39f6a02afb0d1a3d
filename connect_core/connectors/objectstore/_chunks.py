"""Cutting a topic's records into files, the same way every time, and writing them.

The cut depends only on the records from the committed offset on, in offset order: per Kafka
partition and per directory (encoded partition), a file takes the next records until it holds
`flush.size` of them or (with `rotate.interval.ms`) a record's time is that far past the time of
the file's first record. A file is named by its first record's offset. So a rerun of the same
records cuts the same files under the same names, and a rerun that reads more records (new data
arrived since) cuts the same files up to the last one, which it extends: each object is
overwritten whole, never written beside.

`write_partitioned` is the same cut and write as a `mapInArrow` function, for Spark's executors:
each Spark partition holds whole Kafka partitions in offset order, and writes their files itself.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from connect_core.connectors.objectstore._formats import Format
from connect_core.connectors.objectstore._keys import file_name, object_key
from connect_core.connectors.objectstore._partitioners import Layout
from connect_core.connectors.objectstore._store import Store
from connect_core.sdk import DataError
from connect_core.sdk.transforms import TOMBSTONE_COLUMN, is_value_column

__all__ = ["WRITTEN_SCHEMA", "Chunk", "Plan"]

#: What each written object reports back to the driver.
WRITTEN_SCHEMA = "key string, records long, bytes long"


@dataclass(frozen=True)
class Chunk:
    key: str
    table: Any  # the file's records: value columns only, in offset order


@dataclass(frozen=True)
class Plan:
    """Everything a writer needs, as plain data (the driver and each executor build the same)."""

    store: Store
    layout: Layout
    format: Format
    prefix: str
    topic: str  # as the object keys name it (after a router's renaming)
    flush_size: int
    skip_tombstones: bool

    def chunks(self, table: Any) -> list[Chunk]:
        """`table` (one topic's records with `__partition` and `__offset`, any order) cut into files."""
        import numpy as np
        import pyarrow.compute as pc

        table = self._values_only_rows(table)
        if table.num_rows == 0:
            return []
        table = table.sort_by([("__partition", "ascending"), ("__offset", "ascending")])
        values = [c for c in table.column_names if is_value_column(c)]
        partitions = table.column("__partition").to_numpy(zero_copy_only=False)
        offsets = table.column("__offset").to_numpy(zero_copy_only=False)
        found: list[Chunk] = []
        for partition in pc.unique(table.column("__partition")).to_pylist():
            rows = np.flatnonzero(partitions == partition)
            part = table.take(rows)
            directories = self.layout.directories(part, partition)
            times = self.layout.times_ms(part) if self.layout.rotate_interval_ms > 0 else None
            for directory, members in _grouped(directories).items():
                for cut in self._cut(members, times):
                    start = int(offsets[rows[cut[0]]])
                    key = object_key(
                        self.prefix,
                        self.topic,
                        directory,
                        file_name(self.topic, partition, start, self.format.extension),
                    )
                    found.append(Chunk(key, part.take(cut).select(values)))
        return found

    def write(self, filesystem: Any, chunk: Chunk) -> tuple[str, int, int]:
        size = self.store.write(filesystem, chunk.key, self.format.payload(chunk.table))
        return chunk.key, chunk.table.num_rows, size

    def _cut(self, members: list[int], times: Any) -> Iterator[list[int]]:
        """`members` (row numbers of one directory, in offset order) as the row numbers of each file."""
        if times is None:
            for i in range(0, len(members), self.flush_size):
                yield members[i : i + self.flush_size]
            return
        interval = self.layout.rotate_interval_ms
        current: list[int] = []
        first = 0
        for row in members:
            if current and (len(current) >= self.flush_size or times[row] >= first + interval):
                yield current
                current = []
            if not current:
                first = int(times[row])
            current.append(row)
        if current:
            yield current

    def _values_only_rows(self, table: Any) -> Any:
        """The records that have a value: a tombstone fails the run or is skipped (`behavior.on.null.values`)."""
        import pyarrow.compute as pc

        if TOMBSTONE_COLUMN not in table.column_names:
            return table
        dead = pc.fill_null(table.column(TOMBSTONE_COLUMN), False)
        count = pc.sum(dead).as_py() or 0
        if not count:
            return table
        if not self.skip_tombstones:
            raise DataError(
                f"topic `{self.topic}` has {count} tombstone(s) (records with no value) in this batch; set "
                "`behavior.on.null.values` to `ignore` to skip them"
            )
        return table.filter(pc.invert(dead))


def _grouped(directories: list[str]) -> dict[str, list[int]]:
    """Row numbers by directory, in row order within each (rows come in offset order)."""
    if directories and directories[0] == directories[-1] and len(set(directories)) == 1:
        return {directories[0]: list(range(len(directories)))}
    groups: dict[str, list[int]] = {}
    for i, directory in enumerate(directories):
        groups.setdefault(directory, []).append(i)
    return groups


def write_partitioned(plan: Plan) -> Any:
    """A `mapInArrow` function: the Spark partition's records (whole Kafka partitions) cut and written
    by the executor; one row per object (`WRITTEN_SCHEMA`)."""

    def write(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        found = list(batches)
        if not found:
            return
        filesystem = plan.store.filesystem()
        written = [plan.write(filesystem, chunk) for chunk in plan.chunks(pa.Table.from_batches(found))]
        if written:
            keys, records, sizes = zip(*written, strict=True)
            yield pa.RecordBatch.from_pydict({"key": list(keys), "records": list(records), "bytes": list(sizes)})

    return write
