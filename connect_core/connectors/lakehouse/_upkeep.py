"""What the table upkeep of every lakehouse sink shares.

* `each_table`: one job over every table of a connector, each table's failure its own. A connector
  writes many tables (one per topic, routed ones): a job that stopped at the first table it cannot
  upkeep (a location another table shares, a store that did not answer) would leave every table
  after it without upkeep for as long as that one stays broken.
* `filesystem_now`: the clock the files' ages are read by. A file's age is its modification time,
  set by the clock of whoever wrote it (a Spark worker, the file server of a shared disk), and
  measured against the upkeep's own clock: running ahead of the writers', it would see the files of
  a commit in flight as old enough to delete. The earlier of the two clocks is the one trusted.
"""

from __future__ import annotations

import logging
import os
import tempfile
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import TypeVar

__all__ = ["each_table", "filesystem_now"]

T = TypeVar("T")
R = TypeVar("R")


def each_table(tables: Iterable[tuple[str, T]], job: Callable[[T], R], log: logging.Logger) -> dict[str, R]:
    """Table name → what `job` did to it, every table's turn taken: a table whose job fails is logged
    and the others still get theirs; then the first failure is raised (the job fails, stays due)."""
    done: dict[str, R] = {}
    failed: list[Exception] = []
    for name, table in tables:
        try:
            done[name] = job(table)
        except Exception as exc:
            log.error("table %s: upkeep failed: %s: %s", name, type(exc).__name__, exc)
            failed.append(exc)
    if failed:
        raise failed[0]
    return done


def filesystem_now(directory: str, now: datetime | None = None) -> datetime:
    """The earlier of `now` (default: this host's clock) and the time the file system holding
    `directory` stamps a file made there now (a hidden file, made and removed at once). Only `now`
    when no file can be made there."""
    local = now or datetime.now(UTC)
    try:
        handle, path = tempfile.mkstemp(prefix=".connect-clock-", dir=directory)
    except OSError:
        return local
    try:
        stamped = os.fstat(handle).st_mtime
    finally:
        os.close(handle)
        os.unlink(path)
    return min(local, datetime.fromtimestamp(stamped, UTC))
