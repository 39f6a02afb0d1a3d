"""Topic retention: Kafka's per-topic `retention.ms` and `retention.bytes`, so that topic storage
does not grow forever.

A segment is deleted when it is past its topic's retention — its age (since its run committed it)
is past `retention.ms`, or its partition's newer segments hold at least `retention.bytes` without
it (Kafka's rule: a partition keeps at least that much) — **and** every sink that reads the topic
has committed past it. When they disagree the sinks win: a sink that is behind (stopped, failing,
paused) keeps every segment it has not committed, past retention or not, and `connect topics
list` shows the segments held that way. A topic no sink reads loses its segments at retention
alone, as in Kafka; a sink created later starts at the oldest segment left. `retention.ms` -1
keeps a topic's segments for ever; retention applies only to topics whose `cleanup.policy` has
`delete` (a `compact` topic keeps the latest record of every key instead: `compaction`).

The rows go first, in one transaction, then the files: a file whose deletion fails is left as
garbage (logged), never a row without its file. The rebalance sensor applies retention about
once an hour; `connect topics prune` at once.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from sqlalchemy import Engine, text

from connect_core.runtime.store.readers import SINK_TOPICS
from connect_core.runtime.topics.config import TOPIC_KEYS, check_topic_config
from connect_core.runtime.topics.files import delete_file, path_bytes

__all__ = ["TOPIC_KEYS", "Expired", "apply_retention", "check_topic_config", "expired", "fill_sizes"]

log = logging.getLogger(__name__)

#: Per partition: the lowest offset any sink reading its topic has committed (a sink that never
#: committed: 0); no row when no sink reads the topic. Shared with compaction and merging.
FLOORS = (
    SINK_TOPICS
    + """,
    floors AS (
        SELECT st.topic, p.partition, min(coalesce(o.offset, 0)) AS committed
        FROM sink_topics st
        JOIN connect.topic_partitions p ON p.topic = st.topic
        LEFT JOIN connect.sink_offsets o ON o.connector = st.name AND o.topic = p.topic AND o.partition = p.partition
        GROUP BY st.topic, p.partition)
    """
)

# Per segment: its topic's retention (its own, else the default), the bytes of its partition's
# newer segments, and the floor of the sinks' offsets. It goes when it is past either retention
# and below the floor.
_EXPIRED = text(
    FLOORS
    + """,
    segs AS (
        SELECT g.id, g.topic, g.partition, g.start_offset, g.end_offset, g.row_count, g.path, g.created_at,
               coalesce(g.size_bytes, 0) AS size_bytes, f.committed,
               coalesce((t.config->>'retention.ms')::bigint, :default_ms) AS retention_ms,
               coalesce((t.config->>'retention.bytes')::bigint, -1) AS retention_bytes,
               coalesce(sum(coalesce(g.size_bytes, 0)) OVER (
                   PARTITION BY g.topic, g.partition ORDER BY g.start_offset DESC
                   ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS newer_bytes
        FROM connect.topic_segments g
        JOIN connect.topics t ON t.name = g.topic
        LEFT JOIN floors f ON f.topic = g.topic AND f.partition = g.partition
        WHERE coalesce(t.config->>'cleanup.policy', 'delete') LIKE '%delete%')
    SELECT id, topic, partition, start_offset, end_offset, row_count, path, size_bytes,
           CASE WHEN retention_ms >= 0 AND created_at < now() - make_interval(secs => retention_ms / 1000.0)
                THEN 'retention.ms' ELSE 'retention.bytes' END AS reason
    FROM segs
    WHERE (committed IS NULL OR end_offset <= committed)
      AND ((retention_ms >= 0 AND created_at < now() - make_interval(secs => retention_ms / 1000.0))
           OR (retention_bytes >= 0 AND newer_bytes >= retention_bytes))
    ORDER BY id
    LIMIT :batch
    """
)


@dataclass(frozen=True)
class Expired:
    id: int
    topic: str
    partition: int
    start_offset: int
    end_offset: int
    row_count: int
    path: str
    size_bytes: int = 0
    reason: str = "retention.ms"  # or `retention.bytes`


def fill_sizes(engine: Engine, batch: int = 1_000) -> int:
    """Measure the files of up to `batch` segments committed before sizes were kept (migration
    0011); how many were measured. A segment whose files cannot be reached stays unmeasured."""
    with engine.connect() as conn:
        rows = conn.execute(
            text("SELECT id, path FROM connect.topic_segments WHERE size_bytes IS NULL ORDER BY id LIMIT :n"),
            {"n": batch},
        ).all()
    sizes = []
    for id_, path in rows:
        try:
            sizes.append({"id": id_, "size": path_bytes(path)})
        except Exception as exc:  # measured on a later pass
            log.warning("cannot measure segment %s: %s", path, exc)
    if sizes:
        with engine.begin() as conn:
            conn.execute(text("UPDATE connect.topic_segments SET size_bytes = :size WHERE id = :id"), sizes)
    return len(sizes)


def expired(engine: Engine, default_ms: int, batch: int = 10_000) -> list[Expired]:
    """Segments past retention and committed by every sink that reads them, oldest first."""
    with engine.connect() as conn:
        rows = conn.execute(_EXPIRED, {"default_ms": default_ms, "batch": batch}).all()
    return [Expired(*row) for row in rows]


def apply_retention(engine: Engine, default_ms: int, *, batch: int = 10_000, max_batches: int = 100) -> list[Expired]:
    """Delete what `expired` finds: the rows, then the files. What was deleted."""
    done: list[Expired] = []
    for _ in range(max_batches):
        found = expired(engine, default_ms, batch)
        if not found:
            break
        with engine.begin() as conn:
            conn.execute(
                text("DELETE FROM connect.topic_segments WHERE id = ANY(:ids)"), {"ids": [e.id for e in found]}
            )
        for segment in found:
            try:
                delete_file(segment.path)
            except Exception as exc:  # garbage left behind, no data lost: the row is gone already
                log.warning(
                    "segment %s of %s: its row is deleted, its files not (%s)", segment.path, segment.topic, exc
                )
        done.extend(found)
        if len(found) < batch:
            break
    if done:
        log.info("topic retention deleted %d segment(s), %d row(s)", len(done), sum(e.row_count for e in done))
    return done
