"""One Delta commit per table per batch: the batch's rows and the offsets they reach.

An append is `write_deltalake(mode="append")`; changes by key are one `merge`: its source is the
newest row of each upserted key and the key of each deleted one, flagged, so that matched keys
are deleted or updated, and new keys inserted, in one commit. delta-rs scans only the files whose
statistics may hold a key of the batch and rewrites those. Either commit carries the topic
partitions' app transactions (`_offsets`), so the rows and the offsets they reach land together.

delta-rs writes the data files and commits in one call, so `mid_sink` stands right before it: a
kill inside the call leaves at most data files no version references (vacuum removes them).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pyarrow as pa

from connect_core.connectors.lakehouse.delta._tables import Location
from connect_core.sdk.errors import DataError, RetriableError
from connect_core.sdk.testing import faults

if TYPE_CHECKING:
    from deltalake import DeltaTable, Transaction

#: The directory, under a table's, of one worker's data files (no leading `_`: a Delta reader
#: skips such directories when it lists files, and vacuum must see what no version references).
STAGING_PREFIX = "connect-"

__all__ = ["DELETE_FLAG", "FileWriter", "append", "commit_files", "live_files", "merge", "merge_source"]

#: The merge source's column marking a deleted key (a `__` name: never a value column of a topic).
DELETE_FLAG = "__connect_delete"


def append(
    where: Location,
    table: DeltaTable | None,
    rows: pa.Table,
    txns: list[Transaction],
    partition_by: list[str] | None = None,
) -> None:
    """Append `rows` (creating the table with them, partitioned by `partition_by`, when `table` is None)."""
    from deltalake import CommitProperties, write_deltalake

    faults.checkpoint("mid_sink")
    _committing(
        where,
        lambda: write_deltalake(
            table if table is not None else where.uri,
            rows,
            mode="append",
            partition_by=partition_by if table is None else None,
            storage_options=(dict(where.storage) or None) if table is None else None,
            commit_properties=CommitProperties(app_transactions=txns),
        ),
    )


def merge_source(rows: pa.Table, keys: pa.Table) -> pa.Table:
    """`rows` (flag false) and the keys of `keys` that no row has (flag true, other columns null)."""
    names = keys.column_names
    keys = pa.table({n: keys[n].cast(rows.schema.field(n).type) for n in names})
    gone = keys.join(rows.select(names), names, join_type="left anti") if rows.num_rows else keys
    columns = []
    for f in rows.schema:
        column = gone[f.name].cast(f.type) if f.name in names else pa.nulls(gone.num_rows, f.type)
        columns.append(
            pa.concat_arrays(
                [
                    rows[f.name].combine_chunks(),
                    column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column,
                ]
            )
        )
    flags = pa.array([False] * rows.num_rows + [True] * gone.num_rows, pa.bool_())
    return pa.Table.from_arrays([*columns, flags], names=[*rows.column_names, DELETE_FLAG])


def merge(
    where: Location, table: DeltaTable, rows: pa.Table, keys: pa.Table, txns: list[Transaction]
) -> dict[str, Any]:
    """Delete the keys of `keys` that `rows` lacks, update or insert `rows`, by the columns of `keys`, in one commit."""
    from deltalake import CommitProperties

    source = merge_source(rows, keys)
    on = " AND ".join(f't."{k}" = s."{k}"' for k in keys.column_names)
    flag = f's."{DELETE_FLAG}"'
    merger = (
        table.merge(
            source,
            on,
            source_alias="s",
            target_alias="t",
            commit_properties=CommitProperties(app_transactions=txns),
        )
        .when_matched_delete(flag)
        .when_matched_update_all(f"NOT {flag}", except_cols=[DELETE_FLAG])
        .when_not_matched_insert_all(f"NOT {flag}", except_cols=[DELETE_FLAG])
    )
    faults.checkpoint("mid_sink")
    return dict(_committing(where, merger.execute))


def live_files(table: DeltaTable | None) -> dict[str, int]:
    """The data files of `table`'s version (path → bytes); none without a table."""
    if table is None:
        return {}
    actions = pa.table(table.get_add_actions(flatten=False))
    return dict(zip(actions["path"].to_pylist(), actions["size_bytes"].to_pylist(), strict=True))


def _committing(where: Location, commit: Any) -> Any:
    """Run `commit`: one refused because another writer committed first, or a store that did not
    answer, is retriable; rows the table's schema refuses are a data error. Messages are scrubbed
    of the storage credentials."""
    from deltalake.exceptions import CommitFailedError, DeltaError, SchemaMismatchError

    try:
        return commit()
    except CommitFailedError as exc:
        raise RetriableError(
            f"Delta table `{where.uri}` changed under this commit; the run is retried: {where.scrub(str(exc))[:500]}"
        ) from None
    except SchemaMismatchError as exc:
        raise DataError(f"Delta table `{where.uri}` refused the rows: {where.scrub(str(exc))[:500]}") from None
    except (OSError, DeltaError) as exc:
        raise RetriableError(f"Delta table `{where.uri}` could not be written: {where.scrub(str(exc))[:500]}") from None


class FileWriter:
    """Rows → data files of a local Delta table, with the statistics delta-rs writes, not committed:
    made in the driver, called in a Spark worker (`_spread`).

    delta-rs writes files only as part of a commit, so the worker writes a table of its own in a
    fresh directory under the table's (`connect-<uuid>`), takes the add actions of its one commit
    (path, size, partition values, statistics) with the path made relative to the main table, and
    deletes that directory's log: its files are then the main table's, once the driver commits
    them (`commit_files`); a run killed before leaves files no version references (vacuum's)."""

    def __init__(self, where: Location, partition_by: list[str]) -> None:
        if not where.local:
            raise ValueError("the workers write local Delta tables only")
        self.uri = where.uri
        self.partition_by = list(partition_by)

    def __call__(self, rows: pa.RecordBatchReader) -> list[dict[str, Any]]:
        import json
        import os
        import shutil
        import uuid
        from urllib.parse import unquote

        from deltalake import write_deltalake

        prefix = f"{STAGING_PREFIX}{uuid.uuid4().hex}"
        staging = os.path.join(self.uri, prefix)
        write_deltalake(staging, rows, mode="append", partition_by=self.partition_by or None)
        log = os.path.join(staging, "_delta_log")
        adds = []
        with open(os.path.join(log, f"{0:020d}.json"), encoding="utf-8") as actions:
            for line in actions:
                add = json.loads(line).get("add") if line.strip() else None
                if add is not None:
                    # a log spells paths percent-encoded, and `AddAction` encodes the path it is given:
                    # given as the log spells it, a partition value that needs escaping (`a/b`, a
                    # timestamp's `:`) named a file that does not exist
                    adds.append({**add, "path": f"{prefix}/{unquote(add['path'])}"})
        shutil.rmtree(log)
        if not adds:
            shutil.rmtree(staging)
        return adds


def commit_files(
    where: Location,
    table: DeltaTable | None,
    schema: pa.Schema,
    adds: list[dict[str, Any]],
    txns: list[Transaction],
    partition_by: list[str],
) -> None:
    """Commit the data files `adds` (`FileWriter`'s) with the app transactions `txns`, as one
    version: the table's first (made of `schema`) when `table` is None."""
    from deltalake import CommitProperties, Schema
    from deltalake.transaction import AddAction, RemoveAction, create_table_with_add_actions

    actions = [
        AddAction(
            a["path"], a["size"], a.get("partitionValues") or {}, a["modificationTime"], True, a.get("stats") or ""
        )
        for a in adds
    ]
    written: list[AddAction | RemoveAction] = list(actions)
    commit = CommitProperties(app_transactions=txns)
    faults.checkpoint("mid_sink")
    if table is None:
        delta_schema = Schema.from_arrow(schema)
        _committing(
            where,
            lambda: create_table_with_add_actions(
                where.uri,
                delta_schema,
                actions,
                mode="error",
                partition_by=partition_by or None,
                commit_properties=commit,
            ),
        )
    else:
        _committing(
            where,
            lambda: table.create_write_transaction(
                written, mode="append", schema=schema, partition_by=partition_by or None, commit_properties=commit
            ),
        )
