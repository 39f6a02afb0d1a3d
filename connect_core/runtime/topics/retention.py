"""Topic retention: Kafka's per-topic `retention.ms`, so that topic storage does not grow forever.

A segment is deleted when it is past its topic's retention (its age: since its run committed it)
**and** every sink that reads the topic has committed past it. When they disagree the sinks win:
a sink that is behind (stopped, failing, paused) keeps every segment it has not committed, past
retention or not, and `connect topics list` shows the segments held that way. A topic no sink
reads loses its segments at retention alone, as in Kafka; a sink created later starts at the
oldest segment left. `retention.ms` -1 keeps a topic's segments for ever.

The rows go first, in one transaction, then the files: a file whose deletion fails is left as
garbage (logged), never a row without its file. The rebalance sensor applies retention about
once an hour; `connect topics prune` at once.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine, text

from connect_core.runtime.store.readers import SINK_TOPICS

__all__ = ["TOPIC_KEYS", "Expired", "apply_retention", "check_topic_config", "expired"]

log = logging.getLogger(__name__)

#: The per-topic keys a topic's config takes, as Kafka's.
TOPIC_KEYS = ("retention.ms",)

# Per segment: its topic's retention (its own, else the default) and the lowest offset any sink
# reading the topic has committed for the partition (a sink that never committed: 0). The
# segment goes when both its age and that offset are past it.
_EXPIRED = text(
    SINK_TOPICS
    + """,
    floors AS (
        SELECT st.topic, p.partition, min(coalesce(o.offset, 0)) AS committed
        FROM sink_topics st
        JOIN connect.topic_partitions p ON p.topic = st.topic
        LEFT JOIN connect.sink_offsets o ON o.connector = st.name AND o.topic = p.topic AND o.partition = p.partition
        GROUP BY st.topic, p.partition)
    SELECT g.id, g.topic, g.partition, g.start_offset, g.end_offset, g.row_count, g.path
    FROM connect.topic_segments g
    JOIN connect.topics t ON t.name = g.topic
    LEFT JOIN floors f ON f.topic = g.topic AND f.partition = g.partition
    WHERE coalesce((t.config->>'retention.ms')::bigint, :default_ms) >= 0
      AND g.created_at < now() - make_interval(secs => coalesce((t.config->>'retention.ms')::bigint, :default_ms) / 1000.0)
      AND (f.committed IS NULL OR g.end_offset <= f.committed)
    ORDER BY g.id
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


def check_topic_config(config: dict[str, Any]) -> dict[str, Any]:
    """`config` as stored (numbers as numbers); ValueError naming each bad key."""
    problems, clean = [], {}
    for key, value in config.items():
        if key not in TOPIC_KEYS:
            problems.append(f"`{str(key)[:100]}` is not a topic setting ({', '.join(TOPIC_KEYS)})")
            continue
        number = _whole(value)
        if number is None:  # a bool, a fraction, a list: never read as a number of ms
            problems.append(f"`{key}` must be a whole number of milliseconds (-1: for ever), not `{str(value)[:100]}`")
            continue
        if number < -1:
            problems.append(f"`{key}` must be -1 (for ever) or more, not {number}")
            continue
        clean[key] = number
    if problems:
        raise ValueError("; ".join(problems))
    return clean


def _whole(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if abs(value) < 2**63 else None  # stored as a bigint
    if isinstance(value, str) and value.strip().lstrip("-").isdigit() and len(value.strip()) <= 19:
        return int(value.strip())
    return None


def expired(engine: Engine, default_ms: int, batch: int = 10_000) -> list[Expired]:
    """Segments past retention and committed by every sink that reads them, oldest first."""
    with engine.connect() as conn:
        rows = conn.execute(_EXPIRED, {"default_ms": default_ms, "batch": batch}).all()
    return [Expired(*row) for row in rows]


def apply_retention(engine: Engine, default_ms: int, *, batch: int = 10_000, max_batches: int = 100) -> list[Expired]:
    """Delete what `expired` finds: the rows, then the files. What was deleted."""
    from connect_core.runtime.topics.segments import delete_file

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
