"""One Iceberg commit per table per batch: the batch's changes and the offsets they reach.

Deletes are copy-on-write (pyiceberg 0.12 writes no delete files: `Transaction.delete` rewrites
the data files holding matching rows, and falls back to that even under `write.delete.mode=
merge-on-read`). The filter is `id IN (keys of the batch)`, so pyiceberg reads and rewrites only
the files whose column metrics (min/max) may hold one of the keys; the others are not touched. The
delete and the append are one transaction: readers see the batch whole or not at all, and both
snapshots carry the offsets, so a rerun finds them whichever it reads first.

Above `ARROW_DELETE_KEYS` keys, pyiceberg's `In` filter is itself the cost (binding a million
literals takes it over 30 s, measured on 1M keys; 100k: 2.7 s): the files are then chosen by the
keys' range (min/max metrics), read, and rewritten without the batch's keys by an Arrow join, in
one overwrite snapshot of the same transaction, as pyiceberg's own delete does.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any, NamedTuple

import pyarrow as pa

from connect_core.sdk.errors import RetriableError
from connect_core.sdk.testing import faults

if TYPE_CHECKING:
    from pyiceberg.manifest import DataFile
    from pyiceberg.table import Table

__all__ = [
    "ARROW_DELETE_KEYS",
    "Committed",
    "FileWriter",
    "commit",
    "commit_files",
    "commit_replacing",
    "key_filter",
    "transaction",
]

#: Above this many keys a batch's rows are deleted by an Arrow join rather than pyiceberg's filter.
ARROW_DELETE_KEYS = 100_000

#: Composite keys are deleted this many keys per filter: pyiceberg binds an `Or` of `And`s
#: recursively, and a tree of thousands would exceed Python's recursion limit.
_COMPOSITE_CHUNK = 200


def key_filter(keys: pa.Table) -> list[Any]:
    """Filters matching exactly the rows of `keys` (one per chunk for composite keys)."""
    from pyiceberg.expressions import And, EqualTo, In, Or

    names = keys.column_names
    if len(names) == 1:
        values = keys[names[0]].to_pylist()
        return [In(names[0], values)] if values else []  # type: ignore[call-arg,misc,unused-ignore]  # pydantic-typed __init__
    rows = keys.to_pylist()
    found = []
    for start in range(0, len(rows), _COMPOSITE_CHUNK):
        chunk = rows[start : start + _COMPOSITE_CHUNK]
        terms = [And(*[EqualTo(n, row[n]) for n in names]) for row in chunk]  # type: ignore[call-arg,misc,unused-ignore]
        found.append(Or(*terms) if len(terms) > 1 else terms[0])
    return found


def commit(
    table: Table,
    rows: pa.Table,
    keys: pa.Table | None,
    summary: dict[str, str],
    arrow_delete_keys: int | None = None,
) -> Committed:
    """Delete the rows of `keys` (None: append only), append `rows`, in one commit whose snapshots
    carry `summary`: the data files it added, their bytes, the snapshot after it. A commit refused because another
    writer committed first is retriable."""
    arrow_delete_keys = ARROW_DELETE_KEYS if arrow_delete_keys is None else arrow_delete_keys
    before = {s.snapshot_id for s in table.snapshots()}
    tx = transaction(table)
    if keys is not None and keys.num_rows and _holds_rows(table):
        if keys.num_rows > arrow_delete_keys:
            _delete_by_join(tx, table, keys, summary)
        else:
            with warnings.catch_warnings():
                # "did not match any records": new keys; merge-on-read: pyiceberg writes copy-on-write anyway
                warnings.simplefilter("ignore")
                for expr in key_filter(keys):
                    tx.delete(expr, snapshot_properties=summary)
    tx.append(rows, snapshot_properties=summary)  # an empty batch still records its offsets
    return _commit(table, tx, before)


def commit_files(table: Table, files: list[DataFile], summary: dict[str, str]) -> Committed:
    """Append the data files `files` (written by `FileWriter`s), in one commit whose snapshot
    carries `summary` (none: it still records the offsets), as `commit`."""
    before = {s.snapshot_id for s in table.snapshots()}
    tx = transaction(table)
    with tx.update_snapshot(snapshot_properties=summary).fast_append() as append:
        for data_file in files:
            append.append_data_file(data_file)
    return _commit(table, tx, before)


def commit_replacing(
    table: Table, rows_of: Table | None, summary: dict[str, str], properties: dict[str, str]
) -> Committed:
    """Replace every data file of `table` by those of table `rows_of` (None: by none), taking its
    columns, and set `properties`, in one commit whose snapshot carries `summary`: readers see the
    old rows or the new ones. The files are referenced where they are, not rewritten (`rows_of`
    shares `table`'s schema ids: made by `_replace` from its metadata)."""
    from pyiceberg.exceptions import CommitFailedException

    before = {s.snapshot_id for s in table.snapshots()}
    tx = transaction(table)
    if rows_of is not None and rows_of.schema() != table.schema():
        with tx.update_schema() as update:  # columns the re-read added (by the same ids: checked)
            update.union_by_name(rows_of.schema())
        wanted = {f.name: (f.field_id, f.field_type) for f in rows_of.schema().fields}
        got = {f.name: (f.field_id, f.field_type) for f in tx.table_metadata.schema().fields}
        if any(got.get(n) != w for n, w in wanted.items()):
            raise CommitFailedException(f"the columns of `{'.'.join(rows_of.name())}` changed apart from the table's")
    old = [t.file for t in table.scan().plan_files()] if table.current_snapshot() is not None else []
    new = [t.file for t in rows_of.scan().plan_files()] if rows_of is not None and rows_of.current_snapshot() else []
    with tx.update_snapshot(snapshot_properties=summary).overwrite() as overwrite:
        for data_file in old:
            overwrite.delete_data_file(data_file)
        for data_file in new:
            overwrite.append_data_file(data_file)
    tx.set_properties(properties)
    return _commit(table, tx, before)


def transaction(table: Table) -> Any:
    """A transaction on `table` that commits onto the snapshot `table` is at, or fails (pyiceberg's
    `CommitFailedException`): never retried by pyiceberg on a newer head.

    pyiceberg 0.12 retries a commit that lost its race (`commit.retry.num-retries`, 4 by default)
    on the head that won, with the snapshot summary it was given. Every commit here carries offsets
    read at the old head: replayed on top of another commit, a stale run's rows land twice and its
    offsets go back (a zombie run after the one that replaced it), or an upkeep commit takes back the
    offsets a sink run just committed. A failed commit is retried by its caller, which reads anew."""
    from pyiceberg.table import Table, TableProperties

    properties = {**table.metadata.properties, TableProperties.COMMIT_NUM_RETRIES: "0"}
    # the copy's properties only say how pyiceberg commits: they are no update, the catalog never sees them
    pinned = Table(
        table.name(),
        table.metadata.model_copy(update={"properties": properties}),
        table.metadata_location,
        table.io,
        table.catalog,
    )
    return pinned.transaction()


class Committed(NamedTuple):
    """What one commit added (data files, their bytes) and the table's snapshot after it."""

    files: int
    size: int
    snapshot: int | None


def _commit(table: Table, tx: Any, before: set[int]) -> Committed:
    from pyiceberg.exceptions import CommitFailedException, ValidationException

    faults.checkpoint("mid_sink")  # data files written, nothing committed
    try:
        committed = tx.commit_transaction()
    except (CommitFailedException, ValidationException) as exc:
        raise RetriableError(
            f"table `{'.'.join(table.name())}` changed under this commit; the run is retried: {exc}"
        ) from exc
    added = [s.summary for s in committed.snapshots() if s.snapshot_id not in before and s.summary is not None]
    current = committed.current_snapshot()
    return Committed(
        sum(int(a.get("added-data-files") or 0) for a in added),
        sum(int(a.get("added-files-size") or 0) for a in added),
        current.snapshot_id if current is not None else None,
    )


class FileWriter:
    """Rows → the table's Parquet data files, as pyiceberg's append writes them (file size,
    statistics, the table's write properties), without committing them: made in the driver, called
    in a Spark worker (`_spread`), so it holds what a worker needs, not the table or its catalog.
    Its FileIO is confined to the same warehouse as the table's."""

    def __init__(self, table: Table) -> None:
        from connect_core.connectors.lakehouse.iceberg._catalog import ConfinedFileIO

        io = table.io
        if not isinstance(io, ConfinedFileIO):
            raise TypeError("the sink's tables are read through a ConfinedFileIO")
        self.metadata = table.metadata
        self.root = io.root

    def __call__(self, rows: pa.RecordBatchReader) -> list[DataFile]:
        import uuid

        from pyiceberg.io.pyarrow import _dataframe_to_data_files

        from connect_core.connectors.lakehouse.iceberg._catalog import ROOT, ConfinedFileIO

        io = ConfinedFileIO({ROOT: self.root})
        # pyiceberg streams a reader into files of its target size on an unpartitioned table only
        source = rows if self.metadata.spec().is_unpartitioned() else rows.read_all()
        if isinstance(source, pa.Table) and source.num_rows == 0:
            return []  # a worker whose records the table holds already
        return list(_dataframe_to_data_files(self.metadata, source, io, uuid.uuid4()))


def _holds_rows(table: Table) -> bool:
    """Whether the table has rows a delete could match (a first load into a new table has none,
    and building a filter over a million keys costs pyiceberg tens of seconds)."""
    snapshot = table.current_snapshot()
    if snapshot is None or snapshot.summary is None:
        return False
    return snapshot.summary.get("total-records", "1") != "0"


def _delete_by_join(tx: Any, table: Table, keys: pa.Table, summary: dict[str, str]) -> None:
    """Rewrite the data files that may hold `keys` (by their range) without those keys' rows."""
    import itertools
    import uuid

    import pyarrow.compute as pc
    from pyiceberg.expressions import AlwaysTrue, And, GreaterThanOrEqual, LessThanOrEqual
    from pyiceberg.io.pyarrow import ArrowScan, _dataframe_to_data_files

    names = keys.column_names
    ranges = [
        And(GreaterThanOrEqual(n, pc.min(keys[n]).as_py()), LessThanOrEqual(n, pc.max(keys[n]).as_py()))  # type: ignore[call-arg,misc,unused-ignore]
        for n in names
    ]
    metadata, schema = table.metadata, table.schema()
    commit_uuid, counter = uuid.uuid4(), itertools.count(0)
    replaced = []
    for task in table.scan(row_filter=ranges[0] if len(ranges) == 1 else And(*ranges)).plan_files():
        rows = ArrowScan(metadata, table.io, schema, AlwaysTrue()).to_table(tasks=[task])
        kept = rows.filter(pc.invert(_matches(rows, keys)))
        if kept.num_rows != rows.num_rows:
            new = (
                list(_dataframe_to_data_files(metadata, kept, table.io, commit_uuid, counter)) if kept.num_rows else []
            )
            replaced.append((task.file, new))
    if replaced:
        with tx.update_snapshot(snapshot_properties=summary).overwrite() as overwrite:
            overwrite.commit_uuid = commit_uuid
            for old, new in replaced:
                overwrite.delete_data_file(old)
                for data_file in new:
                    overwrite.append_data_file(data_file)


def _matches(rows: pa.Table, keys: pa.Table) -> Any:
    """True for each row of `rows` whose key columns are one of `keys`' rows (never null)."""
    import pyarrow.compute as pc

    names = keys.column_names
    index = "__connect_row"
    probe = pa.table({**{n: rows[n] for n in names}, index: pa.array(range(rows.num_rows), pa.int64())})
    wanted = pa.table({n: keys[n].cast(rows[n].type) for n in names})
    hit = probe.join(wanted, keys=names, join_type="left semi")[index]
    return pc.is_in(probe[index], value_set=hit.combine_chunks())
