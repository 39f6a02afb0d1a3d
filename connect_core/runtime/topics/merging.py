"""Merging small segments: every committing run makes a segment, so a source that runs every
minute leaves many small files, slow to list and to read. Consecutive segments of a partition are
merged into one while together they stay under the topic's `segment.bytes`.

The merged segment keeps every row's offset (`files`: its rows are one Spark partition of its
newest run, `__seq` = offset - its start), its offset range is the union of theirs, and it
replaces them atomically (`rewrite.swap`: new files first, one transaction swaps the rows, then
the old files go). As compaction, merging touches only segments every sink reading the topic has
committed and never a partition's newest segment, so a sink never finds the files it is reading
replaced. Segments whose files differ in schema (the topic gained a column) are not merged
together. A pass merges at most `max_groups` groups and `max_bytes` bytes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine, text

from connect_core.runtime.topics.config import DEFAULTS
from connect_core.runtime.topics.files import SegmentFile, layout, read_rows, rewrite_path, schema_of, write_rewritten
from connect_core.runtime.topics.retention import FLOORS
from connect_core.runtime.topics.rewrite import Stored, SwapConflict, partition_segments, swap, sweep_orphans

__all__ = ["Merged", "merge_small_segments"]

log = logging.getLogger(__name__)

_SEGMENTS = (
    FLOORS
    + """
    SELECT g.id, g.topic, g.partition, g.start_offset, g.end_offset, g.row_count, coalesce(g.size_bytes, 0),
           g.path, g.run_id, g.created_at, f.committed
    FROM connect.topic_segments g
    JOIN connect.topics t ON t.name = g.topic
    LEFT JOIN floors f ON f.topic = g.topic AND f.partition = g.partition
    ORDER BY g.topic, g.partition, g.start_offset
    """
)
_LIMITS = "SELECT name, coalesce((config->>'segment.bytes')::bigint, :segment_bytes) FROM connect.topics"


@dataclass(frozen=True)
class Merged:
    """Segments merged (or, in a dry run, to be merged) into one."""

    topic: str
    partition: int
    start_offset: int
    end_offset: int
    segments: int
    rows: int
    size_bytes: int  # the merged segments' bytes (before)


def merge_small_segments(
    engine: Engine,
    *,
    dry_run: bool = False,
    max_groups: int = 20,
    max_bytes: int = 1 << 30,
    before_swap: Callable[[], None] | None = None,
) -> list[Merged]:
    """Merge runs of small consecutive segments (module doc); what was (with `dry_run`: would be)
    merged. `before_swap` runs between writing the merged files and swapping them in."""
    params = {"segment_bytes": DEFAULTS["segment.bytes"]}
    with engine.connect() as conn:
        limits = {str(name): int(size) for name, size in conn.execute(text(_LIMITS), params)}
    with engine.connect() as conn:
        newest = dict(
            ((t, p), int(o))
            for t, p, o in conn.execute(
                text("SELECT topic, partition, max(start_offset) FROM connect.topic_segments GROUP BY 1, 2")
            ).all()
        )
    done: list[Merged] = []
    budget = max_bytes
    for (topic, partition), segments in partition_segments(engine, _SEGMENTS, params).items():
        bound = newest[topic, partition]
        floor = segments[0].floor
        if floor is not None:
            bound = min(bound, floor)
        mergeable = [s for s in segments if s.end_offset <= bound and s.start_offset < newest[topic, partition]]
        groups = list(_groups(mergeable, limits[topic]))
        if groups and not dry_run:
            sweep_orphans(segments)
        for group in groups:
            if len(done) >= max_groups or sum(s.size_bytes for s in group) > budget:
                return done
            try:
                merged = _merge(engine, group, dry_run, before_swap)
            except SwapConflict as exc:
                log.info("merge in %s[%s] skipped: %s", topic, partition, exc)
                continue
            except Exception as exc:  # one group's unreadable files must not stop the other merges
                log.warning("merge in %s[%s] failed: %s", topic, partition, exc, exc_info=True)
                continue
            if merged is not None:
                done.append(merged)
                budget -= merged.size_bytes
    return done


def _groups(segments: list[Stored], limit: int) -> Iterator[list[Stored]]:
    """Runs of consecutive segments (all of a partition's, in order) whose bytes together stay
    under `limit`, of two or more; a segment of `limit` bytes or more is merged with none."""
    group: list[Stored] = []
    for seg in segments:
        if group and sum(s.size_bytes for s in group) + seg.size_bytes > limit:
            if len(group) > 1:
                yield group
            group = []
        if seg.size_bytes < limit:
            group.append(seg)
    if len(group) > 1:
        yield group


def _merge(engine: Engine, group: list[Stored], dry_run: bool, before_swap: Callable[[], None] | None) -> Merged | None:
    laid: list[tuple[Any, list[SegmentFile]]] = []
    for seg in group:
        found = layout(seg.path, seg.start_offset)
        if found is None or not found[1]:
            return None
        laid.append(found)
    schemas = [schema_of(filesystem, files[0]) for filesystem, files in laid]
    int96 = {f.int96 for _, files in laid for f in files}
    if len(int96) > 1 or any(not s.equals(schemas[0], check_metadata=True) for s in schemas[1:]):
        log.info(
            "segments of %s[%s] at %s differ in schema: not merged",
            group[0].topic,
            group[0].partition,
            group[0].start_offset,
        )
        return None
    first, last = group[0], group[-1]
    merged = Merged(
        first.topic,
        first.partition,
        first.start_offset,
        last.end_offset,
        len(group),
        sum(s.row_count for s in group),
        sum(s.size_bytes for s in group),
    )
    if dry_run:
        return merged
    path = rewrite_path(first.path)
    rows = (row for filesystem, files in laid for row in read_rows(filesystem, files))
    run_id = max(s.run_id for s in group)
    written, size = write_rewritten(
        path, schemas[0], rows, run_id=run_id, start_offset=first.start_offset, int96=int96.pop()
    )
    if written != merged.rows:  # the rows and their count disagree: leave the segments as they are
        from connect_core.runtime.topics.files import delete_file

        delete_file(path)
        log.warning(
            "segments of %s[%s] hold %d rows, not %d: not merged", first.topic, first.partition, written, merged.rows
        )
        return None
    if before_swap is not None:
        before_swap()
    swap(engine, group, path, written, size)
    return merged
