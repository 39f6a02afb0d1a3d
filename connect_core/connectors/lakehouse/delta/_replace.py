"""A `replace` re-read into a Delta table (`SinkBatch.replacing`): its rows go into a copy, a Delta table
of its own in the directory `_connect_resync_<g>` under the table's (a `_` directory: Delta readers
and vacuum pass it by), made with the table's columns and partitioning; when the re-read ends, one
overwrite commit of the table writes the copy's rows into it, streamed from the copy's files (never
the whole table in memory): readers see the old version or the new one, never half.

The same commit carries the topic offsets the copy reached and, as the application transaction
`connect-core/<connector>/<topic>/resync`, the re-read's generation: a batch given again after a
kill -9 finds it there and writes into the table (its offsets skip what landed). The copy's
directory is then removed (on S3 its files are left: delta-rs deletes no table; vacuum of the
table does not see them).
"""

from __future__ import annotations

import shutil
from dataclasses import replace
from typing import TYPE_CHECKING

from connect_core.connectors.lakehouse.delta import _offsets
from connect_core.connectors.lakehouse.delta._tables import Location
from connect_core.connectors.lakehouse.delta._write import _committing
from connect_core.connectors.lakehouse.delta.config import TOPIC

if TYPE_CHECKING:
    from deltalake import DeltaTable

    from connect_core.connectors.lakehouse.delta.config import DeltaSinkConfig

__all__ = ["held", "problem", "replica", "swap_in"]

_COPY = "_connect_resync_"


def problem(cfg: DeltaSinkConfig, topic: str, routes: bool) -> str | None:
    """Why a `replace` re-read of `topic` cannot swap its table: other topics' rows go there too, or
    may (`routes`: the sink's transforms may rename topics, which a sink cannot run over names)."""
    others = [t for t in cfg.topics if t != topic]
    if not others:
        return None
    if TOPIC not in cfg.location:
        return (
            f"the table {cfg.location} takes the rows of topics {', '.join(cfg.topics)}, and a replace re-read of "
            f"`{topic}` would drop the other topics' rows"
        )
    if routes:
        return (
            f"the sink's transforms may route topics {', '.join(cfg.topics)} into one table, and a replace re-read "
            f"of `{topic}` would drop the other topics' rows"
        )
    return None


def _app_id(connector: str, topic: str) -> str:
    return f"connect-core/{connector}/{topic}/resync"


def held(table: DeltaTable | None, connector: str, topic: str) -> int:
    """The re-read of `topic` the table holds (0: none)."""
    return int(table.transaction_version(_app_id(connector, topic)) or 0) if table is not None else 0


def _copy(where: Location, generation: int) -> Location:
    return replace(where, uri=f"{where.uri.rstrip('/')}/{_COPY}{generation}")


def _drop_leftovers(where: Location, keep: Location | None) -> None:
    """Remove the copies under a local table's directory but `keep` (older re-reads a kill left)."""
    import os

    if not where.local or not os.path.isdir(where.uri):
        return
    for name in os.listdir(where.uri):
        path = os.path.join(where.uri, name)
        if name.startswith(_COPY) and name[len(_COPY) :].isdigit() and (keep is None or path != keep.uri):
            shutil.rmtree(path)


def replica(where: Location, connector: str, topic: str, generation: int) -> Location:
    """Where the rows of re-read `generation` of `topic` go: the table when it holds that re-read
    already, else its copy (made like the table on first use; left for the write to create, as
    the table would be, when there is no table)."""
    from deltalake import DeltaTable

    table = where.load()
    if held(table, connector, topic) >= generation:
        _drop_leftovers(where, None)
        return where
    copy = _copy(where, generation)
    _drop_leftovers(where, copy)
    if table is not None and copy.load() is None:
        metadata = table.metadata()
        _committing(
            copy,
            lambda: DeltaTable.create(
                copy.uri,
                table.schema(),
                partition_by=list(metadata.partition_columns) or None,
                configuration=dict(metadata.configuration) or None,
                storage_options=dict(copy.storage) or None,
            ),
        )
    return copy


def swap_in(where: Location, connector: str, topic: str, generation: int) -> bool:
    """Overwrite the table with its copy's rows, in one commit marking the re-read; False when
    there was nothing to do (it held the re-read already, or neither table exists)."""
    import pyarrow as pa
    from deltalake import CommitProperties, write_deltalake

    table = where.load()
    if held(table, connector, topic) >= generation:
        _drop_leftovers(where, None)
        return False
    copy_at = _copy(where, generation)
    copy = copy_at.load()
    if copy is None and table is None:
        return False  # no rows were re-read into a table that never existed
    source: DeltaTable = copy if copy is not None else table  # type: ignore[assignment]
    schema = pa.schema(source.schema().to_arrow())
    rows = (
        copy.to_pyarrow_dataset().scanner().to_reader()  # streamed, file by file
        if copy is not None
        else pa.RecordBatchReader.from_batches(schema, [])  # a re-read of no rows: the table ends empty
    )
    reached = {}
    for partition, offset in _offsets.held(table, connector, topic, range(_offsets.MAX_PARTITIONS)).items():
        reached[partition] = offset
    if copy is not None:
        for partition, offset in _offsets.held(copy, connector, topic, range(_offsets.MAX_PARTITIONS)).items():
            reached[partition] = max(reached.get(partition, 0), offset)
    from deltalake import Transaction

    txns = [*_offsets.transactions(connector, topic, reached), Transaction(_app_id(connector, topic), generation)]
    same = table is not None and pa.schema(table.schema().to_arrow()) == schema
    _committing(
        where,
        lambda: write_deltalake(
            table if table is not None else where.uri,
            rows,
            mode="overwrite" if table is not None else "append",
            schema_mode=None if same or table is None else "overwrite",
            partition_by=list(source.metadata().partition_columns) or None,
            storage_options=(dict(where.storage) or None) if table is None else None,
            commit_properties=CommitProperties(app_transactions=txns),
        ),
    )
    _drop_leftovers(where, None)
    return True
