"""The topic store's metadata: topics, partitions and committed segments.

A topic is a set of partitions; each committed micro-batch of a source task is
one Parquet *segment* of one partition, with a contiguous offset range. The
Parquet files live under `<base>/<cluster id>/<topic>/partition=<p>/run=<run id>`;
only the paths recorded in `topic_segments` are part of the topic, so a killed
run's files are never read and need no rename to become visible.

The topic store belongs to its metadata database: run ids are only unique within
one database, so the database's *cluster id* (a random uuid made by migration
0005, as Kafka's cluster id) keeps two databases that share a topics directory
(the embedded default, then a server's) out of each other's paths. Segments
committed before there was a cluster id keep the paths they were recorded with.
"""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Engine, select, text
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session, sessionmaker

from connect_core.runtime.store.models import ClusterRow, TopicPartitionRow, TopicRow, TopicSegmentRow
from connect_core.runtime.store.readers import SINK_TOPICS
from connect_core.runtime.topics.resyncs import ResyncLog
from connect_core.runtime.topics.schema_history import SchemaHistory
from connect_core.sdk.errors import ConfigError
from connect_core.sdk.records import TopicPartition

__all__ = ["Segment", "TopicStore", "TopicUsers", "check_topic_name"]

log = logging.getLogger(__name__)

_TOPIC_NAME = re.compile(r"^[A-Za-z0-9._-]{1,249}$")


def check_topic_name(name: str) -> str:
    """Kafka's rule: letters, digits, `.`, `_`, `-`; it becomes a path component."""
    if not _TOPIC_NAME.match(name) or name in {".", ".."}:
        raise ConfigError(
            f"invalid topic name `{name}`: use 1-249 letters, digits, '.', '_' or '-'",
            {"topic": [f"invalid topic name `{name}`"]},
        )
    return name


@dataclass(frozen=True)
class Segment:
    topic: str
    partition: int
    start_offset: int
    end_offset: int
    row_count: int
    path: str
    run_id: int
    size_bytes: int | None = None  # bytes of its files; None: not measured (committed before migration 0011)


@dataclass(frozen=True)
class TopicUsers:
    """The connectors that read a topic (sinks) and that wrote the segments it keeps."""

    readers: list[str]
    writers: list[str]


class TopicStore:
    def __init__(self, engine: Engine, base_path: str) -> None:
        self._sessions = sessionmaker(engine, expire_on_commit=False)
        self.base_path = base_path.rstrip("/")
        self._cluster_id: str | None = None
        #: each topic's schema history (a run's commit records into it, in its own transaction)
        self.schemas = SchemaHistory(engine)
        #: where re-reads of source tables begin and end in the topics (`connect resync`)
        self.resyncs = ResyncLog(engine)

    def cluster_id(self) -> str:
        """This metadata database's cluster id (made once, by the migration; read once per store)."""
        if self._cluster_id is None:
            with self._sessions.begin() as s:
                found = s.scalar(select(ClusterRow.cluster_id).where(ClusterRow.id == 1))
                if found is None:  # the row was deleted by hand: a new identity, as a new database gets
                    s.execute(insert(ClusterRow).values(id=1, cluster_id=str(uuid.uuid4())).on_conflict_do_nothing())
                    found = s.scalars(select(ClusterRow.cluster_id).where(ClusterRow.id == 1)).one()
            self._cluster_id = found
        return self._cluster_id

    def segment_path(self, topic: str, partition: int, run_id: int) -> str:
        """Where run `run_id` stages its segment of `topic`'s `partition`: a path no other run of any
        metadata database sharing the base path uses (files found there were left by a run that
        never committed, and the writer replaces them)."""
        name = check_topic_name(topic)
        return f"{self.base_path}/{self.cluster_id()}/{name}/partition={partition}/run={run_id}"

    def ensure_topic(self, name: str, partitions: int = 1, config: dict[str, Any] | None = None) -> int:
        """Create the topic if it is new, with `config` (its settings: `runtime.topics.config`); returns
        its partition count (an existing topic keeps its own partitions and config)."""
        check_topic_name(name)
        with self._sessions.begin() as s:
            s.execute(
                insert(TopicRow).values(name=name, partitions=partitions, config=config or {}).on_conflict_do_nothing()
            )
            count = s.scalars(select(TopicRow.partitions).where(TopicRow.name == name)).one()
            s.execute(
                insert(TopicPartitionRow)
                .values([{"topic": name, "partition": p} for p in range(count)])
                .on_conflict_do_nothing()
            )
            return count

    def offsets_at(self, topics: Iterable[str], when: datetime) -> dict[TopicPartition, int]:
        """Per partition of `topics`: the first offset committed at or after `when` (the start of
        the first segment committed then or later), else the partition's end (Kafka's
        offsets-for-times, at a segment's grain)."""
        with self._sessions() as s:
            rows = s.execute(
                text(
                    """
                    SELECT p.topic, p.partition,
                           coalesce((SELECT min(g.start_offset) FROM connect.topic_segments g
                                     WHERE g.topic = p.topic AND g.partition = p.partition AND g.created_at >= :when),
                                    p.next_offset)
                    FROM connect.topic_partitions p WHERE p.topic = ANY(:topics)
                    """
                ),
                {"topics": list(topics), "when": when},
            ).all()
        return {TopicPartition(topic, partition): int(offset) for topic, partition, offset in rows}

    def set_config(self, topic: str, config: dict[str, Any]) -> dict[str, Any]:
        """Merge `config` into the topic's (a value None removes the key: the default applies);
        the topic's config after. KeyError if there is no such topic, TopicConfigError (a ValueError)
        naming every bad key and value."""
        from connect_core.runtime.topics.config import check_topic_changes

        clean, removed = check_topic_changes(config)
        with self._sessions.begin() as s:
            row = s.get(TopicRow, topic, with_for_update=True)
            if row is None:
                raise KeyError(topic)
            row.config = {**{k: v for k, v in row.config.items() if k not in removed}, **clean}
            return dict(row.config)

    def describe(self, default_retention_ms: int, only: str | None = None) -> list[dict[str, Any]]:
        """Every topic (or the topic `only`): partitions, segments, rows and bytes kept, end offsets,
        its settings (its own, else the defaults), and the sinks reading it with their lag (records
        not committed) per partition."""
        from connect_core.runtime.topics.config import effective_config

        with self._sessions() as s:
            topics = s.execute(text(_DESCRIBE), {"only": only}).mappings().all()
            readers = s.execute(text(_READERS), {"only": only}).mappings().all()
        lags: dict[str, list[dict[str, Any]]] = {}
        for r in readers:
            lags.setdefault(r["topic"], []).append(
                {"connector": r["connector"], "partition": r["partition"], "lag": r["lag"]}
            )
        out = []
        for t in topics:
            settings = effective_config(t["config"], default_retention_ms)
            out.append(
                {
                    "name": t["name"],
                    "partitions": t["partitions"],
                    "segments": t["segments"],
                    "rows": int(t["rows"] or 0),
                    "size_bytes": int(t["size_bytes"] or 0),
                    "end_offsets": t["end_offsets"] or {},
                    "retention.ms": settings["retention.ms"],
                    "retention.bytes": settings["retention.bytes"],
                    "cleanup.policy": settings["cleanup.policy"],
                    "config": dict(t["config"]),
                    "sinks": lags.get(t["name"], []),
                }
            )
        return out

    def partitions(self, topic: str) -> int:
        """Partition count of `topic`; 0 when it does not exist yet."""
        with self._sessions() as s:
            return s.scalars(select(TopicRow.partitions).where(TopicRow.name == topic)).one_or_none() or 0

    def topics(self) -> dict[str, int]:
        with self._sessions() as s:
            return dict(s.execute(select(TopicRow.name, TopicRow.partitions).order_by(TopicRow.name)).all())

    def segments_after(self, positions: dict[TopicPartition, int], max_rows: int | None = None) -> list[Segment]:
        """Committed segments at or after each partition's offset, oldest first.

        With `max_rows`, stops at the segment that reaches it (always at least
        one segment, so a huge segment still makes progress).
        """
        found: list[Segment] = []
        with self._sessions() as s:
            for tp, offset in sorted(positions.items()):
                rows = s.scalars(
                    select(TopicSegmentRow)
                    .where(
                        TopicSegmentRow.topic == tp.topic,
                        TopicSegmentRow.partition == tp.partition,
                        TopicSegmentRow.end_offset > offset,
                    )
                    .order_by(TopicSegmentRow.start_offset)
                )
                found.extend(_segment(r) for r in rows)
        found.sort(key=lambda seg: (seg.start_offset, seg.topic, seg.partition))
        if max_rows is None:
            return found
        taken: list[Segment] = []
        rows_taken = 0
        for seg in found:
            if taken and rows_taken + seg.row_count > max_rows:
                break
            taken.append(seg)
            rows_taken += seg.row_count
        return taken

    def owned_partitions(self, topics: Iterable[str], task_id: int, task_count: int) -> set[TopicPartition]:
        """The partitions a sink task reads: partition p of every topic belongs to task p mod task-count."""
        return {
            TopicPartition(topic, p)
            for topic in topics
            for p in range(self.partitions(topic))
            if p % task_count == task_id
        }

    def append_segment(
        self,
        s: Session,
        *,
        topic: str,
        partition: int,
        row_count: int,
        path: str,
        run_id: int,
        size_bytes: int | None = None,
    ) -> Segment:
        """Give a staged segment its offsets; part of the caller's commit transaction.

        The partition row is locked, so concurrent commits to one partition get
        consecutive, non-overlapping offset ranges. Without `size_bytes` the segment's files are
        measured first (before the lock), for `retention.bytes` and merging.
        """
        if size_bytes is None:
            size_bytes = _measure(path)
        tp = s.scalars(
            select(TopicPartitionRow)
            .where(TopicPartitionRow.topic == topic, TopicPartitionRow.partition == partition)
            .with_for_update()
        ).one()
        start = tp.next_offset
        tp.next_offset = start + row_count
        row = TopicSegmentRow(
            topic=topic,
            partition=partition,
            start_offset=start,
            end_offset=start + row_count,
            row_count=row_count,
            path=path,
            run_id=run_id,
            size_bytes=size_bytes,
        )
        s.add(row)
        s.flush()
        return _segment(row)

    def run_segments(self, run_id: int) -> list[Segment]:
        """What run `run_id` committed to its topics."""
        with self._sessions() as s:
            rows = s.scalars(
                select(TopicSegmentRow).where(TopicSegmentRow.run_id == run_id).order_by(TopicSegmentRow.id)
            ).all()
            return [_segment(r) for r in rows]

    def all_segments(self, topics: Iterable[str]) -> list[Segment]:
        with self._sessions() as s:
            rows = s.scalars(
                select(TopicSegmentRow)
                .where(TopicSegmentRow.topic.in_(list(topics)))
                .order_by(TopicSegmentRow.topic, TopicSegmentRow.partition, TopicSegmentRow.start_offset)
            )
            return [_segment(r) for r in rows]

    def users(self, topic: str) -> TopicUsers:
        """Who uses `topic`: the sinks whose config names it, and the connectors (still there) whose
        runs wrote the segments it keeps."""
        with self._sessions() as s:
            readers = s.scalars(
                text(SINK_TOPICS + " SELECT DISTINCT name FROM sink_topics WHERE topic = :t ORDER BY name"),
                {"t": topic},
            ).all()
            writers = s.scalars(text(_WRITERS), {"t": topic}).all()
        return TopicUsers(list(readers), list(writers))

    def delete_topic(self, topic: str) -> list[Segment]:
        """Delete `topic`: its rows (partitions, segments, schema history, the sinks' offsets in it) in one
        transaction, then its segments' files; the segments deleted. KeyError if there is none.
        A file whose deletion fails is left as garbage (logged), never a row without its file."""
        from connect_core.runtime.topics.files import delete_file

        with self._sessions.begin() as s:
            row = s.get(TopicRow, topic, with_for_update=True)
            if row is None:
                raise KeyError(topic)
            segments = [_segment(r) for r in s.scalars(select(TopicSegmentRow).where(TopicSegmentRow.topic == topic))]
            s.execute(text("DELETE FROM connect.sink_offsets WHERE topic = :t"), {"t": topic})
            s.delete(row)  # its partitions, segments and schema history go with it (ON DELETE CASCADE)
        for segment in segments:
            try:
                delete_file(segment.path)
            except Exception as exc:  # garbage left behind: the rows are gone already
                log.warning("topic %s deleted; the files of its segment %s not (%s)", topic, segment.path, exc)
        return segments


def _measure(path: str) -> int | None:
    from connect_core.runtime.topics.files import path_bytes

    try:
        return path_bytes(path)
    except Exception as exc:  # measured later by the cleaner (`retention.fill_sizes`)
        log.warning("cannot measure the segment at %s: %s", path, exc)
        return None


def _segment(r: TopicSegmentRow) -> Segment:
    return Segment(r.topic, r.partition, r.start_offset, r.end_offset, r.row_count, r.path, r.run_id, r.size_bytes)


_WRITERS = """
    SELECT DISTINCT r.connector
    FROM connect.topic_segments g
    JOIN connect.task_runs r ON r.id = g.run_id
    JOIN connect.connectors c ON c.name = r.connector
    WHERE g.topic = :t
    ORDER BY r.connector
"""


_DESCRIBE = """
    SELECT t.name, t.partitions, t.config, g.segments, g.rows, g.size_bytes,
           (SELECT jsonb_object_agg(p.partition::text, p.next_offset)
            FROM connect.topic_partitions p WHERE p.topic = t.name) AS end_offsets
    FROM connect.topics t
    CROSS JOIN LATERAL (SELECT count(*) AS segments, sum(row_count) AS rows, sum(size_bytes) AS size_bytes
                        FROM connect.topic_segments WHERE topic = t.name) g
    WHERE CAST(:only AS text) IS NULL OR t.name = :only
    ORDER BY t.name
"""
_READERS = (
    SINK_TOPICS
    + """
    SELECT st.name AS connector, p.topic, p.partition, p.next_offset - coalesce(o.offset, 0) AS lag
    FROM sink_topics st
    JOIN connect.topic_partitions p ON p.topic = st.topic
    LEFT JOIN connect.sink_offsets o ON o.connector = st.name AND o.topic = p.topic AND o.partition = p.partition
    WHERE CAST(:only AS text) IS NULL OR p.topic = :only
    ORDER BY p.topic, st.name, p.partition
    """
)
