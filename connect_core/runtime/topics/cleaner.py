"""One cleaning pass over every topic: retention, then compaction, then merging small segments.

The rebalance sensor runs a pass about once an hour; `connect topics prune` and
`POST /topics/retention` at once (with a dry run that lists what would happen and changes
nothing). Each step's work per pass is bounded (`Budget`), so a pass stays short whatever the
backlog; the next pass goes on. Two passes never rewrite segments at the same time: compaction
and merging run under a Postgres advisory lock, and a pass that does not get it only applies
retention (which is safe to repeat).
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from typing import Any

from sqlalchemy import Engine, text

from connect_core.runtime.topics.compaction import compact
from connect_core.runtime.topics.merging import merge_small_segments
from connect_core.runtime.topics.retention import apply_retention, expired, fill_sizes

__all__ = ["Budget", "clean_topics"]

log = logging.getLogger(__name__)

#: The advisory lock of the segment rewriters (`connect` in ASCII).
_LOCK = 0x636F6E6E656374


@dataclass(frozen=True)
class Budget:
    """The most one pass does."""

    measure: int = 1_000  # segments committed before sizes were kept, measured
    retention_batches: int = 100  # of 10,000 segments
    compact_partitions: int = 10
    compact_rows: int = 20_000_000  # keys read
    merge_groups: int = 20
    merge_bytes: int = 1 << 30


def clean_topics(
    engine: Engine, default_retention_ms: int, *, dry_run: bool = False, budget: Budget | None = None
) -> dict[str, Any]:
    """Run (or with `dry_run` plan) one pass; what it did: `segments` deleted by retention (with
    their `rows`), segments `compacted`, segments `merged`."""
    budget = budget or Budget()
    if dry_run:
        deleted = expired(engine, default_retention_ms)
        compacted, merged = compact(engine, dry_run=True), merge_small_segments(engine, dry_run=True)
    else:
        fill_sizes(engine, budget.measure)
        deleted = apply_retention(engine, default_retention_ms, max_batches=budget.retention_batches)
        compacted, merged = [], []
        with engine.connect() as lock:
            if lock.execute(text("SELECT pg_try_advisory_lock(:k)"), {"k": _LOCK}).scalar():
                try:
                    compacted = compact(engine, max_partitions=budget.compact_partitions, max_rows=budget.compact_rows)
                    merged = merge_small_segments(engine, max_groups=budget.merge_groups, max_bytes=budget.merge_bytes)
                finally:
                    lock.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": _LOCK})
                    lock.commit()
            else:
                log.info("another pass is compacting and merging topic segments; this one applied retention only")
    return {
        "dry_run": dry_run,
        "segments": [
            {
                "topic": e.topic,
                "partition": e.partition,
                "offsets": [e.start_offset, e.end_offset],
                "rows": e.row_count,
                "reason": e.reason,
            }
            for e in deleted
        ],
        "rows": sum(e.row_count for e in deleted),
        "compacted": [asdict(c) for c in compacted],
        "merged": [asdict(m) for m in merged],
    }
