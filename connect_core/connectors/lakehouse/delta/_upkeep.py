"""Table upkeep: optimize (compact small files) and vacuum (delete files no version needs).

A sink commits once per run, so a table gathers a file or more per run; `optimize` rewrites the
small ones into files of about `delta.optimize.target-file-size` (one commit of the same rows).
Replaced files stay until `vacuum` removes those no version younger than the retention needs; a
retention of at least an hour keeps the files of a commit in flight (delta-rs writes files before
its commit references them). Both leave the app transactions, and so the offsets, as they are.

delta-rs's vacuum removes replaced files only; a commit that never happened (a run killed between
the workers' writes and the driver's commit, or inside delta-rs's own write) leaves data files no
version ever named. Of a local table, `vacuum` also deletes those, when older than the retention,
and only those: what delta-rs's full vacuum lists as unreferenced, kept to Parquet files where this
table's writers put them (its partition directories, under a worker's `connect-<uuid>/` or not) and
a worker's staging log. Any other file under the table's directory is not its to delete, and a
Delta table inside it (its own `_delta_log`) makes vacuum refuse, before anything is deleted.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path
from typing import Any

from connect_core.connectors.lakehouse.delta._tables import Location
from connect_core.connectors.lakehouse.delta._write import STAGING_PREFIX
from connect_core.sdk.errors import ConfigError, NotFoundError

__all__ = ["optimize", "vacuum"]


def _table(where: Location) -> Any:
    table = where.load()
    if table is None:
        raise NotFoundError(f"there is no Delta table at `{where.uri}` yet")
    return table


def optimize(where: Location, target_size: int | None = None) -> dict[str, Any]:
    """Compact the table's small files; delta-rs's metrics (`numFilesAdded`, `numFilesRemoved` …)."""
    return dict(_table(where).optimize.compact(target_size=target_size))


def vacuum(where: Location, retention_hours: int) -> list[str]:
    """Delete the files no table version of the last `retention_hours` references, and of a local
    table the data files of commits that never happened (see the module's docstring); the files
    deleted. A retention under the table's own (`delta.deletedFileRetentionDuration`, a week by
    default) is taken as given: the caller chose it."""
    table = _table(where)
    unreferenced: list[str] = []
    if where.local:
        columns = list(table.metadata().partition_columns)
        listed = table.vacuum(
            retention_hours=retention_hours, dry_run=True, enforce_retention_duration=False, full=True
        )
        unreferenced = _own_unreferenced(where.uri, columns, listed)  # checked before any deletion
    files = list(table.vacuum(retention_hours=retention_hours, dry_run=False, enforce_retention_duration=False))
    replaced = set(files)
    return files + _delete(where.uri, [f for f in unreferenced if f not in replaced])


#: A worker's staging directory (`_write.FileWriter`) and the log of its one-commit table.
_STAGING = re.compile(re.escape(STAGING_PREFIX) + r"[0-9a-f]{32}")
_STAGING_LOG = re.compile(r"0{20}\.json|_commit_[0-9a-f-]+\.json\.tmp")


def _own_unreferenced(root: str, columns: list[str], listed: list[str]) -> list[str]:
    """Of `listed` (paths relative to the table's directory), the files this table's writers made:
    Parquet files in its partition directories, maybe under a worker's staging directory, and a
    staging table's log. ConfigError when another Delta table lies inside the table's directory."""
    nested = _nested_tables(root)
    if nested:
        raise ConfigError(
            f"another Delta table lies inside the Delta table at `{root}` (`{nested[0]}`): its files would be "
            "this one's orphans, so none is vacuumed (give each table a directory of its own)",
            {"delta.table.path": ["a Delta table lies inside this table's directory"]},
        )
    own = []
    for rel in listed:
        parts = rel.split("/")
        if _STAGING.fullmatch(parts[0]) and len(parts) == 3 and parts[1] == "_delta_log":
            if _STAGING_LOG.fullmatch(parts[2]):
                own.append(rel)
            continue
        if _STAGING.fullmatch(parts[0]):
            parts = parts[1:]
        folders, name = parts[:-1], parts[-1]
        in_partition = len(folders) == len(columns) and all(
            f.startswith(f"{c}=") for f, c in zip(folders, columns, strict=True)
        )
        if in_partition and name.endswith(".parquet") and not name.startswith(("_", ".")):
            own.append(rel)
    return own


def _nested_tables(root: str) -> list[str]:
    """Every `_delta_log` below the table's own, other than a worker's staging log (one commit)."""
    found = []
    for folder, dirs, _ in os.walk(root):  # links are never followed (and refused when the table is found)
        for name in dirs:
            rel = os.path.relpath(os.path.join(folder, name), root)
            if name != "_delta_log" or rel == "_delta_log":
                continue
            parts = rel.split(os.sep)
            if len(parts) == 2 and _STAGING.fullmatch(parts[0]) and _one_commit_log(os.path.join(root, rel)):
                continue
            found.append(rel)
    return found


def _one_commit_log(log: str) -> bool:
    """Whether the `_delta_log` directory `log` holds a worker's staging table's one commit only."""
    try:
        return all(_STAGING_LOG.fullmatch(name) for name in os.listdir(log))
    except FileNotFoundError:  # its worker deleted it meanwhile
        return True


def _delete(root: str, relative: list[str]) -> list[str]:
    """Delete the regular files `relative` under `root` (never through a link), then the staging
    directories they leave empty; those deleted."""
    deleted = []
    for rel in relative:
        path = os.path.join(root, rel)
        if not Path(os.path.realpath(path)).is_relative_to(root):
            continue  # a link swapped in since the table was checked: never followed
        try:
            if not stat.S_ISREG(os.lstat(path).st_mode):
                continue
            os.unlink(path)
        except FileNotFoundError:
            continue  # gone meanwhile
        deleted.append(rel)
    for staging in {rel.split("/")[0] for rel in deleted if _STAGING.fullmatch(rel.split("/")[0])}:
        for folder, _, _ in sorted(os.walk(os.path.join(root, staging)), key=lambda w: -len(w[0])):
            try:
                os.rmdir(folder)  # only when empty
            except OSError:
                pass
    return deleted
