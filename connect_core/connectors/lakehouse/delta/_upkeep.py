"""Table upkeep: optimize (compact small files) and vacuum (delete files no version needs).

A sink commits once per run, so a table gathers a file or more per run; `optimize` rewrites the
small ones into files of about `delta.optimize.target-file-size` (one commit of the same rows).
Replaced files stay until `vacuum` removes those no version younger than the retention needs; a
retention of at least an hour keeps the files of a commit in flight (delta-rs writes files before
its commit references them). Both leave the app transactions, and so the offsets, as they are.
"""

from __future__ import annotations

from typing import Any

from connect_core.connectors.lakehouse.delta._tables import Location
from connect_core.sdk.errors import NotFoundError

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
    """Delete the files no table version of the last `retention_hours` references; the files deleted.
    A retention under the table's own (`delta.deletedFileRetentionDuration`, a week by default) is
    taken as given: the caller chose it."""
    files = _table(where).vacuum(retention_hours=retention_hours, dry_run=False, enforce_retention_duration=False)
    return list(files)
