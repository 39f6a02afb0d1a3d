"""Table upkeep: compaction of small files, snapshot expiry, orphan-file removal.

A sink commits once per run, so a table gathers a small data file (or one per partition) and a
snapshot per run. Three jobs keep it lean, each leaving the rows and every connector's offsets as
they were:

* `compact` rewrites a partition's data files smaller than the target into bin-packed files of
  about the target, all in ONE overwrite snapshot (pyiceberg 0.12 writes no `replace` snapshot).
  Files with delete files, or written under an older partition spec, are left alone.
* `expire_snapshots` drops snapshots older than the max age, keeping the current one, the newest
  `min_keep` of the main branch, every branch and tag with its history, and every snapshot the
  offsets are read from (`_offsets.read` walks the current snapshot's ancestors to the newest
  summary carrying a connector's offsets: expiring it or one between would lose them). When that
  last rule alone holds back snapshots old enough to go (a connector that stopped writing), a
  snapshot of no rows carrying every connector's offsets is committed first, so history does not
  grow for ever.
* `remove_orphans` deletes files under the table's `data/` and `metadata/` that no live
  snapshot's manifests, no manifest list and no metadata file of the metadata log references, once
  older than the threshold (at least an hour: a commit in flight writes its files before they are
  referenced), by the earlier of this host's clock and the file system's. A file is referenced under every spelling its path may take (percent-decoded,
  through the real path of its directory). Everything is checked before the first deletion, and
  nothing is deleted when the table's location is not a real directory strictly inside the
  warehouse, when a file its metadata names cannot be read or compared, or when a metadata file
  under its location belongs to another table (two tables sharing files: each one's are the other's
  "orphans"). It never follows a symbolic link, and deletes through the table's FileIO, which is
  confined to the warehouse (`_catalog.ConfinedFileIO`).

Every commit made here carries, in its snapshot summary, the current offsets of every connector
the table holds (`carried_offsets`): a snapshot without them would hide nothing (the offsets are
read further down the history), but expiry could then cut the history they are read from.
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from connect_core.connectors.lakehouse._upkeep import filesystem_now
from connect_core.connectors.lakehouse.iceberg import _offsets, _write
from connect_core.sdk.errors import ConfigError, DataError, RetriableError

if TYPE_CHECKING:
    from pyiceberg.table import FileScanTask, Table
    from pyiceberg.table.snapshots import Snapshot

__all__ = ["MIN_ORPHAN_AGE", "carried_offsets", "compact", "expire_snapshots", "remove_orphans"]

#: Files younger than this are never orphans: a commit in flight has written them, not yet referenced them.
MIN_ORPHAN_AGE = timedelta(hours=1)
_PREFIX = _offsets.key("")


def carried_offsets(table: Table) -> dict[str, str]:
    """Summary entries keeping every connector's offsets as they read now (`connect.offsets.<c>` →
    its offsets, `{}` too), for a commit that changes no rows: of each connector whose key a
    snapshot's summary or a table property holds. With them, the new snapshot is where every
    connector's offsets are read from, whatever history expiry removes below it."""
    names = {k[len(_PREFIX) :] for k in table.properties if k.startswith(_PREFIX)}
    for snapshot in table.metadata.snapshots:
        names.update(k[len(_PREFIX) :] for k in _offset_keys(snapshot))
    return {_offsets.key(name): _offsets.encode(_offsets.read(table, name)) for name in sorted(names)}


# -- compaction ------------------------------------------------------------------------------------


def compact(table: Table, target_size: int, log: logging.Logger) -> dict[str, Any]:
    """Rewrite the small data files of each partition, bin-packed, in one snapshot of the same rows."""
    import itertools
    import uuid

    from pyiceberg.expressions import AlwaysTrue
    from pyiceberg.io.pyarrow import ArrowScan, _dataframe_to_data_files

    bins = _small_file_bins(table, target_size)
    if not bins:
        return {"files_rewritten": 0, "files_written": 0, "bytes_rewritten": 0}
    summary = carried_offsets(table)
    metadata, schema, io = table.metadata, table.schema(), table.io
    commit_uuid, counter = uuid.uuid4(), itertools.count(0)
    rewritten = written = size = 0
    tx = _write.transaction(table)  # onto this snapshot or not at all
    with tx.update_snapshot(snapshot_properties=summary).overwrite(commit_uuid) as overwrite:
        for tasks in bins:  # one bin's rows in memory at a time
            rows = ArrowScan(metadata, io, schema, AlwaysTrue()).to_table(tasks=tasks)
            expected = sum(t.file.record_count for t in tasks)
            if rows.num_rows != expected:  # never commit a rewrite that lost or gained a row
                raise DataError(
                    f"table `{_name(table)}`: its files hold {expected} rows by their metadata and {rows.num_rows} "
                    "when read; not compacted"
                )
            new = list(_dataframe_to_data_files(metadata, rows, io, commit_uuid, counter))
            for task in tasks:
                overwrite.delete_data_file(task.file)
            for data_file in new:
                overwrite.append_data_file(data_file)
            rewritten, written = rewritten + len(tasks), written + len(new)
            size += sum(t.file.file_size_in_bytes for t in tasks)
    _commit(table, tx)
    log.info("table %s: %d small file(s) rewritten into %d", _name(table), rewritten, written)
    return {"files_rewritten": rewritten, "files_written": written, "bytes_rewritten": size}


def _small_file_bins(table: Table, target_size: int) -> list[list[FileScanTask]]:
    """The current snapshot's data files under `target_size`, by partition, packed first-fit
    decreasing into bins of at most `target_size` bytes; only bins of two files or more."""
    if table.current_snapshot() is None:
        return []
    spec_id = table.metadata.default_spec_id
    by_partition: dict[Any, list[FileScanTask]] = {}
    for task in table.scan().plan_files():
        data = task.file
        if task.delete_files or data.spec_id != spec_id or data.file_size_in_bytes >= target_size:
            continue  # rows a delete file hides, or an old spec's partition: left as they are
        by_partition.setdefault(data.partition, []).append(task)
    bins: list[list[FileScanTask]] = []
    for tasks in by_partition.values():
        packed: list[tuple[int, list[FileScanTask]]] = []
        for task in sorted(tasks, key=lambda t: (-t.file.file_size_in_bytes, t.file.file_path)):
            fits = next(
                (i for i, (used, _) in enumerate(packed) if used + task.file.file_size_in_bytes <= target_size), None
            )
            if fits is None:
                packed.append((task.file.file_size_in_bytes, [task]))
            else:
                used, members = packed[fits]
                packed[fits] = (used + task.file.file_size_in_bytes, [*members, task])
        bins.extend(members for _, members in packed if len(members) >= 2)
    return bins


# -- snapshot expiry -------------------------------------------------------------------------------


def expire_snapshots(
    table: Table, max_age: timedelta, min_keep: int, log: logging.Logger, now: datetime | None = None
) -> dict[str, Any]:
    """Expire the snapshots older than `max_age` that nothing keeps (see the module's docstring)."""
    cutoff = _millis((now or datetime.now(UTC)) - max_age)
    carried = False
    expired = _expirable(table, min_keep, cutoff, offsets_rule=True)
    if _expirable(table, min_keep, cutoff, offsets_rule=False) - expired:
        # the offsets alone hold back old snapshots: carry them into a new snapshot of no rows
        table = _carry(table)
        carried = True
        expired = _expirable(table, min_keep, cutoff, offsets_rule=True)
    if expired:
        table.maintenance.expire_snapshots().by_ids(sorted(expired)).commit()
        log.info("table %s: %d snapshot(s) expired", _name(table), len(expired))
    return {
        "snapshots_expired": len(expired),
        "snapshots_left": len(table.refresh().metadata.snapshots),
        "offsets_carried": carried,
    }


def _expirable(table: Table, min_keep: int, cutoff_ms: int, *, offsets_rule: bool) -> set[int]:
    """Snapshots older than `cutoff_ms` that no rule keeps (`offsets_rule`: the offsets' one too)."""
    metadata = table.metadata
    main = _ancestors(table, table.current_snapshot())
    kept = {s.snapshot_id for s in main[:min_keep]}
    for name, ref in metadata.refs.items():
        head = table.snapshot_by_id(ref.snapshot_id)
        if name != "main":  # another branch or a tag: it and its history stay
            kept.update(s.snapshot_id for s in _ancestors(table, head))
        elif head is not None:
            kept.add(head.snapshot_id)
    if offsets_rule:
        kept.update(s.snapshot_id for s in main[: _offsets_depth(table, main) + 1])
    return {s.snapshot_id for s in metadata.snapshots if s.timestamp_ms < cutoff_ms and s.snapshot_id not in kept}


def _offsets_depth(table: Table, main: list[Snapshot]) -> int:
    """How far down the main branch's history (0: the current snapshot; -1: nowhere) the offsets of
    some connector are read from: where `_offsets.read` stops, at a summary carrying them or at
    the snapshot a table property's offsets were written at."""
    since = {}
    for key, text in table.properties.items():
        if key.startswith(_PREFIX):
            try:
                since[key] = _offsets_property_since(text)
            except ValueError:
                continue
    names = {k for s in main for k in _offset_keys(s)} | set(since)
    depth = -1
    for key in names:
        for i, snapshot in enumerate(main):
            if snapshot.snapshot_id == since.get(key) or key in _offset_keys(snapshot):
                depth = max(depth, i)
                break
    return depth


def _offsets_property_since(text: str) -> int | None:
    import json

    value = json.loads(text)
    since = value.get("snapshot-id") if isinstance(value, dict) else None
    return since if isinstance(since, int) else None


def _carry(table: Table) -> Table:
    """Commit a snapshot of no rows whose summary carries every connector's offsets."""
    tx = _write.transaction(table)  # onto this snapshot or not at all
    with tx.update_snapshot(snapshot_properties=carried_offsets(table)).fast_append():
        pass
    return _commit(table, tx)


def _offset_keys(snapshot: Snapshot) -> set[str]:
    """The offsets keys (`connect.offsets.<connector>`) of a snapshot's summary."""
    summary = snapshot.summary
    return {k for k in summary.additional_properties if k.startswith(_PREFIX)} if summary is not None else set()


def _ancestors(table: Table, snapshot: Snapshot | None) -> list[Snapshot]:
    """`snapshot` and its ancestors, newest first, as far as they are in the table's metadata."""
    found: list[Snapshot] = []
    seen: set[int] = set()
    while snapshot is not None and snapshot.snapshot_id not in seen:
        found.append(snapshot)
        seen.add(snapshot.snapshot_id)
        parent = snapshot.parent_snapshot_id
        snapshot = table.snapshot_by_id(parent) if parent is not None else None
    return found


# -- orphan files ----------------------------------------------------------------------------------


def remove_orphans(
    table: Table, older_than: timedelta, log: logging.Logger, now: datetime | None = None
) -> dict[str, Any]:
    """Delete the table's unreferenced files older than `older_than` (see the module's docstring).
    Every check comes before the first deletion: a refusal deletes nothing."""
    if older_than < MIN_ORPHAN_AGE:
        raise ValueError(
            f"orphan files must be at least {MIN_ORPHAN_AGE} old: younger ones may be a commit's in flight"
        )
    io = table.io
    root = _own_location(table)
    referenced = _comparable(table, _readable_references(table))
    # by the earlier of this host's clock and the file system's: a clock ahead of the writers' would
    # make the files of a commit in flight look old
    cutoff = filesystem_now(root, now).timestamp() - older_than.total_seconds()
    orphans: list[tuple[str, int]] = []
    young = unverified = 0
    for path, info in _files(root):
        if path in referenced or os.path.basename(path) == _VERSION_HINT:
            continue
        if path.endswith(_METADATA_SUFFIXES):
            owner = _metadata_owner(path)  # young or old: a table living here shows by its metadata
            if owner is not None and owner != str(table.metadata.table_uuid):
                raise ConfigError(
                    f"metadata file `{os.path.relpath(path, root)}` under the location of table `{_name(table)}` "
                    f"belongs to another table (uuid {owner}): two tables share its files, so none is removed "
                    "(give each table a location of its own, or delete a dropped table's files by hand)"
                )
            if owner is None:  # torn or unreadable: whose it is cannot be told, so it stays
                unverified += 1
                continue
        if info.st_mtime > cutoff:
            young += 1
            continue
        orphans.append((path, info.st_size))
    deleted = size = 0
    for path, bytes_ in orphans:
        try:
            io.delete(path)  # the FileIO refuses a path outside the warehouse
        except FileNotFoundError:
            continue  # deleted meanwhile (another upkeep of a table two connectors write)
        deleted, size = deleted + 1, size + bytes_
    if deleted:
        log.info("table %s: %d orphan file(s) deleted (%d bytes)", _name(table), deleted, size)
    return {
        "files_deleted": deleted,
        "bytes_deleted": size,
        "unreferenced_too_young": young,
        **({"unreadable_metadata_kept": unverified} if unverified else {}),
    }


#: Metadata files (`….metadata.json`, gzip-compressed `….gz.metadata.json` or `….metadata.json.gz`).
_METADATA_SUFFIXES = (".metadata.json", ".metadata.json.gz")
#: A Hadoop catalog's pointer to the current metadata file: referenced by no metadata, never an orphan.
_VERSION_HINT = "version-hint.text"
#: The most of a metadata file read to tell which table it belongs to.
_METADATA_READ_MAX = 64 * 1024 * 1024


def _own_location(table: Table) -> str:
    """The table's location as a real path strictly inside the warehouse its FileIO is confined to.
    ConfigError otherwise: a location through a link, outside the warehouse, or the warehouse itself
    (whose `data/` and `metadata/` may be another table's) has files that are not this table's."""
    from connect_core.connectors.lakehouse.iceberg._catalog import ConfinedFileIO

    io = table.io
    if not isinstance(io, ConfinedFileIO):
        raise TypeError("the sink's tables are read through a ConfinedFileIO")
    root = _local_path(table, table.location())
    if os.path.realpath(root) != root:
        raise ConfigError(
            f"the location of table `{_name(table)}` leads through a symbolic link: its files are not removed"
        )
    if root == io.root or not Path(root).is_relative_to(io.root):
        raise ConfigError(
            f"the location of table `{_name(table)}` is not a directory inside the warehouse "
            "(`iceberg.catalog.warehouse`): its files are not removed"
        )
    return root


def _readable_references(table: Table) -> list[str]:
    """`_referenced`, all of it read before anything is deleted: a manifest that cannot be read is a
    DataError (its files would all look unreferenced)."""
    try:
        return list(_referenced(table))
    except OSError as exc:
        raise DataError(
            f"table `{_name(table)}`: a file its metadata names cannot be read ({type(exc).__name__}: "
            f"{str(exc)[:300]}); no file is removed"
        ) from exc


def _comparable(table: Table, locations: Iterable[str]) -> set[str]:
    """Every path a referenced file may be listed under: its path as the FileIO reads it, also
    percent-decoded, through the real path of its directory, and the real path of a referenced link.
    Listing a file under a name none of these is is what makes it an orphan, so every spelling counts."""
    from urllib.parse import unquote

    real_dirs: dict[str, str] = {}
    found: set[str] = set()
    for location in locations:
        path = _local_path(table, location)
        for spelled in {path, os.path.normpath(unquote(path))}:
            folder, name = os.path.split(spelled)
            if folder not in real_dirs:
                real_dirs[folder] = os.path.realpath(folder)
            real = os.path.join(real_dirs[folder], name)
            found.update((spelled, real))
            if os.path.islink(real):
                found.add(os.path.realpath(real))
    return found


def _metadata_owner(path: str) -> str | None:
    """The `table-uuid` a metadata file names (None: it cannot be read, is too large, or names none)."""
    import gzip
    import json

    try:
        with open(path, "rb") as file:
            raw = file.read(_METADATA_READ_MAX + 1)
        if len(raw) > _METADATA_READ_MAX:
            return None
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
        owner = json.loads(raw).get("table-uuid")
    except (OSError, ValueError, EOFError, AttributeError):
        return None
    return str(owner) if isinstance(owner, str) else None


def _referenced(table: Table) -> Iterable[str]:
    """Every file the table's metadata references: its metadata files (current and the log), and
    of every live snapshot the manifest list, the manifests and their live data and delete files."""
    metadata, io = table.metadata, table.io
    yield table.metadata_location
    yield from (entry.metadata_file for entry in metadata.metadata_log)
    yield from (s.statistics_path for s in metadata.statistics)
    yield from (s.statistics_path for s in metadata.partition_statistics)
    manifests: set[str] = set()
    for snapshot in metadata.snapshots:
        yield snapshot.manifest_list
        for manifest in snapshot.manifests(io):
            if manifest.manifest_path in manifests:
                continue  # shared by the snapshots after the one that wrote it
            manifests.add(manifest.manifest_path)
            yield manifest.manifest_path
            for entry in manifest.fetch_manifest_entry(io, discard_deleted=True):
                yield entry.data_file.file_path


def _files(root: str) -> Iterable[tuple[str, os.stat_result]]:
    """The regular files under `root`'s `data/` and `metadata/`, never through a symbolic link."""
    for part in ("data", "metadata"):
        top = os.path.join(root, part)
        if not os.path.isdir(top) or os.path.islink(top):
            continue
        for folder, dirs, names in os.walk(top):  # links to directories are listed, never entered
            dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(folder, d))]
            for name in names:
                path = os.path.join(folder, name)
                info = os.lstat(path)
                if stat.S_ISREG(info.st_mode):  # not a link, a socket or a fifo
                    yield path, info


def _local_path(table: Table, location: str) -> str:
    """`location` as the absolute local path the table's FileIO reads; ConfigError for anything else
    (another store, `file://host/…`): a file whose path cannot be compared is never called an orphan."""
    from pyiceberg.io.pyarrow import PyArrowFileIO

    scheme, _, path = PyArrowFileIO.parse_location(location)  # as the table's FileIO reads locations
    if scheme != "file" or not os.path.isabs(path) or "\x00" in path:
        raise ConfigError(
            f"table `{_name(table)}` names `{location[:200]}`, which is no absolute local path: not upkept"
        )
    return os.path.normpath("/" + path.lstrip("/"))  # `//wh/…` is `/wh/…` on Linux, as the listing spells it


# -- shared ----------------------------------------------------------------------------------------


def _commit(table: Table, tx: Any) -> Table:
    from pyiceberg.exceptions import CommitFailedException, ValidationException

    try:
        committed: Table = tx.commit_transaction()
    except (CommitFailedException, ValidationException) as exc:
        raise RetriableError(
            f"table `{_name(table)}` changed under the upkeep's commit; tried again later: {exc}"
        ) from exc
    return committed


def _millis(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


def _name(table: Table) -> str:
    return ".".join(table.name())
