"""A `replace` re-read into an Iceberg table (`SinkBatch.replacing`): its rows go into a copy, a table
`<name>__connect_resync_<g>` of the same namespace, swapped in when the re-read ends by one commit
of the target that replaces all its data files by the copy's (`_write.commit_replacing`): readers
see the old snapshot or the new one, never half.

The copy is made from the target's own metadata (its schemas and their column ids, partition
specs, sort orders, properties; no snapshots, a location of its own beside the target's), so the
data files written into it are files of the target as they are: the swap references them, it
rewrites nothing. Where there is no target yet, the copy is made as the target would be, and the
swap registers it under the target's name (one catalog step).

The target records the re-read it holds in the table property `connect.resync.<connector>.<topic>`,
set by the swap's commit: a batch given again after a kill -9 finds it and writes into the target
(its offsets, merged from the copy's by the same commit, skip what landed). The copy's entry is then
dropped from the catalog, never its files (the target's now); a copy of an older re-read a kill left
is dropped the same way (its directory stays: remove it by hand). A copy made from a target carries
the property `connect.resync-copy.<connector>` (`<topic>/<generation>`): only such copies are
dropped, and a table of a copy's name without it is refused, never written. A `replace` re-read is
refused (`problem`) where the tables take other topics' rows too (`iceberg.tables` fan-in) or rows
name their tables (route field, dynamic routing): the swap would drop rows it did not re-read.
"""

from __future__ import annotations

import hashlib
import time
import uuid
from typing import TYPE_CHECKING

from connect_core.connectors.lakehouse.iceberg import _offsets, _schema, _write
from connect_core.sdk.errors import ConfigError

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from pyiceberg.table import Table

    from connect_core.connectors.lakehouse.iceberg.config import IcebergSinkConfig

__all__ = ["copy_name", "held", "problem", "replica", "swap_in"]

_COPY = "__connect_resync_"


#: The property marking a copy as one this connector made: `<topic>/<generation>` under `.<connector>`.
_OWNER = "connect.resync-copy."


def problem(cfg: IcebergSinkConfig, topic: str) -> str | None:
    """Why a `replace` re-read of `topic` cannot swap the connector's tables: they take other
    topics' rows too (`iceberg.tables` fan-in), or which table a row goes to is in the row."""
    if cfg.dynamic_enabled or cfg.route_field:
        return (
            "the sink routes records to tables by their route field (`iceberg.tables.route-field`): a replace "
            f"re-read of `{topic}` cannot know every table its rows were in"
        )
    others = [t for t in cfg.topics if t != topic]
    if others:
        return (
            f"the tables {', '.join(cfg.tables)} take the rows of topics {', '.join(cfg.topics)}, and a replace "
            f"re-read of `{topic}` would drop the other topics' rows"
        )
    return None


def copy_name(name: str, topic: str, generation: int) -> str:
    return f"{name}{_COPY}{generation}_{hashlib.sha256(topic.encode()).hexdigest()[:6]}"


def _owned(table: Table, connector: str) -> str | None:
    """`<topic>/<generation>` of the re-read copy `table` is, when this connector made it."""
    return table.properties.get(_OWNER + connector)


def _key(connector: str, topic: str) -> str:
    return f"connect.resync.{connector}.{topic}"


def held(table: Table | None, connector: str, topic: str) -> int:
    """The re-read of `topic` table `table` holds (0: none)."""
    if table is None:
        return 0
    found = table.properties.get(_key(connector, topic), "")
    return int(found) if found.isdigit() else 0


def _drop_leftovers(catalog: Catalog, name: str, connector: str, keep: str | None) -> None:
    """Drop the catalog entries of the target's copies this connector made but `keep` (their files
    stay: a swapped-in copy's are the target's); a table it did not mark is never dropped."""
    from pyiceberg.exceptions import NoSuchNamespaceError

    namespace, table = name.rsplit(".", 1)
    try:
        listed = catalog.list_tables(namespace)
    except NoSuchNamespaceError:
        return
    for found in listed:
        other = f"{namespace}.{found[-1]}"
        if found[-1].startswith(table + _COPY) and other != keep:
            copy = _schema.load_table(catalog, other)
            if copy is not None and _owned(copy, connector) is not None:
                catalog.drop_table(other)


def replica(catalog: Catalog, name: str, connector: str, topic: str, generation: int) -> str:
    """Where the rows of re-read `generation` of `topic` go: table `name` when it holds that re-read
    already, else its copy (made from its metadata on first use; left for the write to create, as the
    target would be, when there is no target). A table of the copy's name this connector did not
    make for this re-read is a ConfigError, never written."""
    target = _schema.load_table(catalog, name)
    if held(target, connector, topic) >= generation:
        _drop_leftovers(catalog, name, connector, None)
        return name
    copy = copy_name(name, topic, generation)
    _drop_leftovers(catalog, name, connector, copy)
    found = _schema.load_table(catalog, copy)
    if found is not None and target is not None and _owned(found, connector) != f"{topic}/{generation}":
        raise ConfigError(
            f"Iceberg table {copy} is in the way of the re-read of topic `{topic}` into {name} (not a copy this "
            "sink made): rename or drop it, then run the sink again"
        )
    if target is not None and found is None:
        _fork(catalog, target, copy, {_OWNER + connector: f"{topic}/{generation}"})
    return copy


def _fork(catalog: Catalog, target: Table, copy: str, owner: dict[str, str]) -> Table:
    """An empty table `copy` with `target`'s metadata (schemas, specs, sort orders, properties), no
    snapshot, in a directory of its own beside the target's."""
    from pyiceberg.serializers import ToOutputFile

    location = f"{target.location().rstrip('/')}{copy[copy.rindex(_COPY) :]}"
    metadata = target.metadata.model_copy(
        update={
            "location": location,
            "table_uuid": uuid.uuid4(),
            "last_updated_ms": int(time.time() * 1000),
            "current_snapshot_id": None,
            "snapshots": [],
            "snapshot_log": [],
            "metadata_log": [],
            "refs": {},
            "statistics": [],
            "partition_statistics": [],
            "properties": {
                **{k: v for k, v in target.properties.items() if not k.startswith("connect.")},
                **owner,
            },
        }
    )
    path = f"{location}/metadata/00000-{uuid.uuid4()}.metadata.json"
    ToOutputFile.table_metadata(metadata, target.io.new_output(path))
    return catalog.register_table(copy, path)


def swap_in(catalog: Catalog, name: str, connector: str, topic: str, generation: int) -> int | None:
    """Swap the copy of re-read `generation` in for table `name`, marking it: the table's snapshot
    after, or None when there was nothing to do (it held the re-read already, or no table exists)."""
    target = _schema.load_table(catalog, name)
    if held(target, connector, topic) >= generation:
        _drop_leftovers(catalog, name, connector, None)
        return None
    copy = _schema.load_table(catalog, copy_name(name, topic, generation))
    mark = {_key(connector, topic): str(generation)}
    if target is None:
        if copy is None:
            return None  # no rows were re-read into a table that never existed
        with copy.transaction() as tx:
            tx.set_properties(mark)
        catalog.register_table(name, catalog.load_table(copy_name(name, topic, generation)).metadata_location)
        catalog.drop_table(copy_name(name, topic, generation))  # its entry: the target's now
        _drop_leftovers(catalog, name, connector, None)
        return _snapshot(catalog.load_table(name))
    offsets = _offsets.read(target, connector)
    for t, partitions in (_offsets.read(copy, connector) if copy is not None else {}).items():
        mine = offsets.setdefault(t, {})
        for p, o in partitions.items():
            mine[p] = max(mine.get(p, 0), o)
    summary = {_offsets.key(connector): _offsets.encode(offsets)}
    committed = _write.commit_replacing(target, copy, summary, mark)
    _drop_leftovers(catalog, name, connector, None)
    return committed.snapshot


def _snapshot(table: Table) -> int | None:
    current = table.current_snapshot()
    return current.snapshot_id if current is not None else None
