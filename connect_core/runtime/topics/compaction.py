"""Log compaction (Kafka's `cleanup.policy=compact`): the latest record of every key is kept.

Records carry their key in `__key` (any type; a struct for a table's primary key) and a delete
marker in `__tombstone` (`connectors/cdc/envelope.py`). For each partition of a compacted topic,
the pass finds the offset of every key's latest record in the whole partition, then rewrites the
*cleanable* segments keeping only those records (and every record without a key: Kafka refuses
them on compacted topics; here they are kept, never guessed at). Surviving records keep their
offsets (gaps are allowed, as in Kafka: `files`), so sink offsets stay valid. A tombstone that is
a key's latest record is kept while its segment is younger than `delete.retention.ms`, so that a
sink catching up still sees the delete; then it goes too.

What may be compacted — sinks win, as for retention: a segment is cleanable when every sink that
reads the topic has committed past it, and it is not its partition's newest (Kafka's active
segment is never cleaned either). Kafka also compacts records a consumer has not read yet (a
consumer that is behind sees only the latest value per key); this runtime does not: a sink that
is behind reads every record it has not committed, and no sink ever finds the files of a segment
it is reading replaced under it. A sink created (or reset) later reads the compacted log: the
latest value per key at its original offset, Kafka's contract. Records newer than the cleanable
segments still count as a key's latest: a record committed by every sink is removed once a newer
one of its key exists anywhere in the partition.

Each partition keeps a checkpoint (`topic_partitions.cleaned_offset`, Kafka's cleaner offset): a
pass picks only partitions with cleanable records past it, dirtiest first, at most
`max_partitions` of them and `max_rows` keys read. The keys of a partition are held in memory
while it is compacted (Kafka bounds its offset map the same way, by a dedupe buffer).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from sqlalchemy import Engine, text

from connect_core.runtime.topics.config import DEFAULTS
from connect_core.runtime.topics.files import layout, read_rows, rewrite_path, schema_of, write_rewritten
from connect_core.runtime.topics.retention import FLOORS
from connect_core.runtime.topics.rewrite import Stored, SwapConflict, swap, sweep_orphans

__all__ = ["Compacted", "compact"]

log = logging.getLogger(__name__)

KEY_COLUMN = "__key"  # as connect_core.sdk.transforms names them
TOMBSTONE_COLUMN = "__tombstone"

_SEGMENTS = (
    FLOORS
    + """
    SELECT g.id, g.topic, g.partition, g.start_offset, g.end_offset, g.row_count, coalesce(g.size_bytes, 0),
           g.path, g.run_id, g.created_at, f.committed,
           g.created_at < now() - make_interval(secs => coalesce((t.config->>'delete.retention.ms')::bigint,
                                                                 :delete_ms) / 1000.0) AS tombstones_expire,
           p.cleaned_offset
    FROM connect.topic_segments g
    JOIN connect.topics t ON t.name = g.topic
    JOIN connect.topic_partitions p ON p.topic = g.topic AND p.partition = g.partition
    LEFT JOIN floors f ON f.topic = g.topic AND f.partition = g.partition
    WHERE t.config->>'cleanup.policy' LIKE '%compact%'
    ORDER BY g.topic, g.partition, g.start_offset
    """
)


@dataclass(frozen=True)
class Compacted:
    """What compaction did (or would do) to one segment."""

    topic: str
    partition: int
    start_offset: int
    end_offset: int
    rows_before: int
    rows_after: int


@dataclass
class _Partition:
    segments: list[Stored]
    expire: dict[int, bool]  # segment id → its tombstones are past delete.retention.ms
    cleaned_offset: int

    def cleanable(self) -> list[Stored]:
        newest = self.segments[-1].start_offset
        floor = self.segments[0].floor
        bound = newest if floor is None else min(floor, newest)
        return [s for s in self.segments if s.end_offset <= bound]

    def dirty_rows(self) -> int:
        return sum(s.row_count for s in self.cleanable() if s.end_offset > self.cleaned_offset)


def compact(
    engine: Engine,
    *,
    dry_run: bool = False,
    max_partitions: int = 10,
    max_rows: int = 20_000_000,
    before_swap: Callable[[], None] | None = None,
) -> list[Compacted]:
    """Compact the dirtiest partitions of compacted topics (module doc); what was (with `dry_run`:
    would be) removed, per segment that loses records. `before_swap` runs between writing a
    rewritten segment and swapping it in (a test's crash point)."""
    with engine.connect() as conn:
        rows = conn.execute(text(_SEGMENTS), {"delete_ms": DEFAULTS["delete.retention.ms"]}).all()
    partitions: dict[tuple[str, int], _Partition] = {}
    for row in rows:
        seg = Stored(*row[:11])
        part = partitions.setdefault((seg.topic, seg.partition), _Partition([], {}, int(row[12])))
        part.segments.append(seg)
        part.expire[seg.id] = bool(row[11])
    dirty = sorted(((p.dirty_rows(), key) for key, p in partitions.items() if p.dirty_rows()), reverse=True)
    done: list[Compacted] = []
    rows_read = 0
    for _, key in dirty[:max_partitions]:
        part = partitions[key]
        if rows_read and rows_read + sum(s.row_count for s in part.segments) > max_rows:
            break
        rows_read += sum(s.row_count for s in part.segments)
        try:
            done.extend(_compact_partition(engine, part, dry_run, before_swap))
        except SwapConflict as exc:
            log.info("compaction of %s[%s] skipped: %s", *key, exc)
        except Exception as exc:  # one partition's unreadable files must not stop the others' compaction
            log.warning("compaction of %s[%s] failed: %s", *key, exc, exc_info=True)
    if done and not dry_run:
        removed = sum(c.rows_before - c.rows_after for c in done)
        log.info("compaction removed %d record(s) from %d segment(s)", removed, len(done))
    return done


def _compact_partition(
    engine: Engine, part: _Partition, dry_run: bool, before_swap: Callable[[], None] | None
) -> list[Compacted]:
    cleanable = part.cleanable()
    if not dry_run:
        sweep_orphans(part.segments)
    latest, tombstones = _latest_offsets(part.segments)
    if latest is None:  # keys this pass cannot read (files it cannot place): left as they are
        return []
    done = []
    for seg in cleanable:
        expired = tombstones if part.expire[seg.id] else np.empty(0, np.int64)
        keep = _Keep(latest, expired, seg.start_offset, seg.end_offset)
        found = layout(seg.path, seg.start_offset)
        if found is None:
            continue
        filesystem, files = found
        kept = sum(int(keep(b, o).sum()) for b, o in read_rows(filesystem, files, [KEY_COLUMN, TOMBSTONE_COLUMN]))
        if kept == seg.row_count:
            continue
        done.append(Compacted(seg.topic, seg.partition, seg.start_offset, seg.end_offset, seg.row_count, kept))
        if dry_run:
            continue
        path, size = None, 0
        if kept:
            path = rewrite_path(seg.path)
            rows = ((b.filter(pa.array(m)), o[m]) for b, o, m in _masked(read_rows(filesystem, files), keep))
            written, size = write_rewritten(
                path,
                schema_of(filesystem, files[0]),
                rows,
                run_id=seg.run_id,
                start_offset=seg.start_offset,
                int96=files[0].int96,
            )
            assert written == kept, (written, kept)
        if before_swap is not None:
            before_swap()
        swap(engine, [seg], path, kept, size)
    if not dry_run and cleanable:
        with engine.begin() as conn:
            conn.execute(
                text(
                    "UPDATE connect.topic_partitions SET cleaned_offset = greatest(cleaned_offset, :o)"
                    " WHERE topic = :t AND partition = :p"
                ),
                {"o": cleanable[-1].end_offset, "t": cleanable[-1].topic, "p": cleanable[-1].partition},
            )
    return done


def _masked(rows: Iterator[tuple[pa.RecordBatch, np.ndarray]], keep: _Keep) -> Iterator[Any]:
    for batch, offsets in rows:
        yield batch, offsets, keep(batch, offsets)


class _Keep:
    """Which rows of a segment's batches survive: no key, or the key's latest record, unless that is a
    tombstone whose time is up. A bitmap over the segment's offset range (one byte per offset),
    built once from the sorted latest offsets: no hash table per batch."""

    def __init__(self, latest: np.ndarray, expired_tombstones: np.ndarray, start: int, end: int) -> None:
        self.start = start
        self.alive = np.zeros(end - start, dtype=bool)
        self.alive[_within(latest, start, end) - start] = True
        self.alive[_within(expired_tombstones, start, end) - start] = False

    def __call__(self, batch: pa.RecordBatch, offsets: np.ndarray) -> np.ndarray:
        if KEY_COLUMN not in batch.schema.names:
            return np.ones(len(offsets), dtype=bool)
        no_key = pc.is_null(batch.column(KEY_COLUMN)).to_numpy(zero_copy_only=False)
        return np.asarray(no_key | self.alive[offsets - self.start], dtype=bool)


def _within(sorted_offsets: np.ndarray, start: int, end: int) -> np.ndarray:
    lo, hi = np.searchsorted(sorted_offsets, [start, end])
    return sorted_offsets[lo:hi]


def _latest_offsets(segments: list[Stored]) -> tuple[np.ndarray | None, np.ndarray]:
    """The offset of every key's latest record in `segments`, and which of those are tombstones
    (both sorted)."""
    keys: list[pa.Array] = []
    offsets: list[np.ndarray] = []
    flags: list[np.ndarray] = []
    for seg in segments:
        found = layout(seg.path, seg.start_offset)
        if found is None:
            return None, np.empty(0, np.int64)
        filesystem, files = found
        for batch, at in read_rows(filesystem, files, [KEY_COLUMN, TOMBSTONE_COLUMN]):
            if KEY_COLUMN not in batch.schema.names:
                continue
            key = batch.column(KEY_COLUMN)
            valid = pc.is_valid(key).to_numpy(zero_copy_only=False)
            keys.append(key.filter(pa.array(valid)))
            offsets.append(at[valid])
            names = batch.schema.names
            tomb = batch.column(TOMBSTONE_COLUMN) if TOMBSTONE_COLUMN in names else pa.nulls(len(at), pa.bool_())
            flags.append(pc.fill_null(tomb, False).to_numpy(zero_copy_only=False)[valid])
    if not keys:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    all_offsets = np.concatenate(offsets)
    latest = np.sort(_max_per_key(keys, all_offsets).to_numpy(zero_copy_only=False).astype(np.int64))
    tombstones = np.sort(all_offsets[np.concatenate(flags)])
    latest_tombstones = tombstones[np.isin(tombstones, latest, assume_unique=True)]
    return latest, latest_tombstones


def _max_per_key(keys: list[pa.Array], offsets: np.ndarray) -> pa.Array:
    """The greatest offset of each distinct key: grouped by Arrow over the key's leaf columns, or in
    Python for keys Arrow cannot group (lists, or types that changed between segments)."""
    try:
        table = pa.table({"k": pa.concat_arrays(keys), "__o": pa.array(offsets, pa.int64())})
        while any(pa.types.is_struct(f.type) for f in table.schema):
            table = table.flatten()
        leaves = [n for n in table.column_names if n != "__o"]
        return table.group_by(leaves, use_threads=False).aggregate([("__o", "max")]).column("__o_max").combine_chunks()
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        latest: dict[str, int] = {}
        position = 0
        for array in keys:
            for value in array.to_pylist():
                text_ = json.dumps(value, sort_keys=True, default=str)
                latest[text_] = max(latest.get(text_, -1), int(offsets[position]))
                position += 1
        return pa.array(sorted(latest.values()), pa.int64())
