"""Replacing segments by rewritten ones (compaction, merging), crash-safe and race-safe.

The new files are written first, under a directory no segment names (`files.rewrite_path`), so
until the swap they are invisible garbage. Then one transaction swaps the rows: it locks the
partition row (as a commit does), deletes the old segments' rows, and inserts the new one with
the same offset range; if any old row is gone (retention or another pass got there first), it
rolls back and the new files are deleted. Last the old files are deleted. A crash before the
swap leaves the old segments, after it the new one: readable either way, never both. The files of
a rewrite killed before its swap are never read; the next pass that rewrites in that partition
deletes them (`sweep_orphans`) once they are an hour old.

The new segment keeps the newest run id, creation time and offset range of those it replaces:
history pruning keeps that run (the others' runs may go, their rows no longer name them), and
time retention deletes the merged segment when its newest part is past retention.
"""

from __future__ import annotations

import logging
import posixpath
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from pyarrow import fs
from sqlalchemy import Engine, text

from connect_core.runtime.topics.files import delete_file, filesystem

__all__ = ["Stored", "SwapConflict", "Swapped", "partition_segments", "swap", "sweep_orphans"]

#: A rewrite directory no segment names is an orphan (a pass killed before its swap) once this old.
ORPHAN_AGE = timedelta(hours=1)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Stored:
    """A committed segment as the cleaner sees it, with its partition's floor (the lowest offset
    every sink reading the topic has committed; None: no sink reads it)."""

    id: int
    topic: str
    partition: int
    start_offset: int
    end_offset: int
    row_count: int
    size_bytes: int
    path: str
    run_id: int
    created_at: datetime
    floor: int | None


@dataclass(frozen=True)
class Swapped:
    old: tuple[Stored, ...]
    path: str | None  # None: every row went, no new segment
    row_count: int
    size_bytes: int


def partition_segments(engine: Engine, sql: str, params: dict[str, object]) -> dict[tuple[str, int], list[Stored]]:
    """Segments by partition, oldest first, from `sql` (selecting Stored's columns in order)."""
    with engine.connect() as conn:
        rows = conn.execute(text(sql), params).all()
    found: dict[tuple[str, int], list[Stored]] = {}
    for row in rows:
        seg = Stored(*row)
        found.setdefault((seg.topic, seg.partition), []).append(seg)
    return found


class SwapConflict(Exception):
    """The segments changed while being rewritten; the rewrite is dropped."""


def swap(engine: Engine, old: Sequence[Stored], path: str | None, row_count: int, size_bytes: int) -> Swapped:
    """Replace `old` (consecutive segments of one partition) by the segment at `path` holding their
    `row_count` surviving rows (None: none survive), in one transaction; then delete the old files.
    On a conflict the new files are deleted and SwapConflict raised."""
    first, last = old[0], old[-1]
    try:
        with engine.begin() as conn:
            conn.execute(
                text("SELECT 1 FROM connect.topic_partitions WHERE topic = :t AND partition = :p FOR UPDATE"),
                {"t": first.topic, "p": first.partition},
            )
            gone = conn.execute(
                text("DELETE FROM connect.topic_segments WHERE id = ANY(:ids) RETURNING id"),
                {"ids": [s.id for s in old]},
            ).all()
            if len(gone) != len(old):
                raise SwapConflict(f"segments of {first.topic}[{first.partition}] changed during the rewrite")
            if path is not None:
                conn.execute(
                    text(
                        "INSERT INTO connect.topic_segments (topic, partition, start_offset, end_offset, row_count,"
                        " path, run_id, created_at, size_bytes) VALUES (:t, :p, :start, :end, :rows, :path, :run,"
                        " :created, :size)"
                    ),
                    {
                        "t": first.topic,
                        "p": first.partition,
                        "start": first.start_offset,
                        "end": last.end_offset,
                        "rows": row_count,
                        "path": path,
                        "run": max(s.run_id for s in old),
                        "created": max(s.created_at for s in old),
                        "size": size_bytes,
                    },
                )
    except SwapConflict:
        if path is not None:
            delete_file(path)
        raise
    for seg in old:
        try:
            delete_file(seg.path)
        except Exception as exc:  # garbage left behind: its row is gone already
            log.warning("segment %s was rewritten; its old files are not deleted (%s)", seg.path, exc)
    return Swapped(tuple(old), path, row_count, size_bytes)


def sweep_orphans(segments: Sequence[Stored], now: datetime | None = None) -> int:
    """Delete the rewrite directories next to `segments` (all of one partition's) that none of them
    names and that are older than ORPHAN_AGE; how many. A directory whose age is unknown stays."""
    if not segments:
        return 0
    named = {s.path.rstrip("/") for s in segments}
    cutoff = (now or datetime.now(UTC)) - ORPHAN_AGE
    swept = 0
    for directory in sorted({posixpath.dirname(s.path.rstrip("/")) for s in segments}):
        try:
            filesystem_, inner = filesystem(directory)
            infos = filesystem_.get_file_info(fs.FileSelector(inner, allow_not_found=True))
            for info in infos:
                path = f"{directory}/{info.base_name}"
                if (
                    info.type == fs.FileType.Directory
                    and info.base_name.startswith("rewrite=")
                    and path not in named
                    and info.mtime is not None
                    and info.mtime.replace(tzinfo=info.mtime.tzinfo or UTC) < cutoff
                ):
                    filesystem_.delete_dir(info.path)
                    swept += 1
        except Exception as exc:  # garbage stays until a later pass; nothing is lost
            log.warning("cannot sweep the rewrites left at %s: %s", directory, exc)
    if swept:
        log.info("deleted %d rewrite(s) left by passes killed before their swap", swept)
    return swept
