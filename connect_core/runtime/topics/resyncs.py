"""Where re-reads of source tables (`connect resync`) begin and end in topics, and what a sink is told.

A source marks the rows of a re-read (`SourceBatch.resyncs`); the commit of the run records, per
topic partition, the offset of the re-read's first row and, once it ends, the offset after its last
(`connect.topic_resyncs`, in the commit's transaction: a killed run records nothing). A re-read
begins and ends at a source run's boundary, so at segment boundaries.

A sink's batch never straddles a `replace` re-read's beginning or end (`plan_batch` cuts it there);
its rows of a topic inside re-read g come with `SinkBatch.replacing[topic] = Resync(g, "replace")`,
`ends=True` on the batch that reaches the end. When the sink had every row before the end was known
(the source's last window had no rows, or the table was empty), its next batch tells it `ends` with
no rows of the topic. The sink's committed offset metadata remembers, under `TOLD`, the last
generation it was told the end of per topic partition: it is told once, or again only when the run
that was told did not commit. `retain` re-reads are recorded but never in `replacing`: their rows
are ordinary writes.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from sqlalchemy import Engine, func, select, tuple_
from sqlalchemy.orm import Session, sessionmaker

from connect_core.runtime.store.models import RESYNC_ABANDONED, TopicPartitionRow, TopicResyncRow
from connect_core.sdk.errors import RetriableError
from connect_core.sdk.records import Resync, TopicPartition


class Segment(Protocol):
    """A committed segment as this module reads it (`runtime.topics.store.Segment`, which holds a
    ResyncLog: named structurally here, so the two modules do not import each other)."""

    @property
    def topic(self) -> str: ...
    @property
    def partition(self) -> int: ...
    @property
    def start_offset(self) -> int: ...
    @property
    def end_offset(self) -> int: ...
    @property
    def row_count(self) -> int: ...


__all__ = ["ABANDONED", "TOLD", "ReRead", "ResyncLog", "SinkPlan", "plan_batch", "told_of", "with_told"]

log = logging.getLogger(__name__)

#: The key of a sink's committed offset metadata holding `{topic: {partition: generation}}`: the last
#: `replace` re-read whose end the sink was told (and, its run committed, swapped in).
TOLD = "connect.resyncs.told"
#: The mode a re-read gets when it will never end: a newer one of its partition began before it ended
#: (its source's positions were reset midway), its source was deleted or its positions forgotten, or
#: another connector wrote into its partition. Its rows are then ordinary writes; no sink is told its end.
ABANDONED = RESYNC_ABANDONED


@dataclass(frozen=True)
class ReRead:
    """One re-read as recorded in one topic partition: offsets [begin, end), end None while it runs."""

    tp: TopicPartition
    generation: int
    mode: str
    begin: int
    end: int | None

    def holds(self, offset: int) -> bool:
        return self.begin <= offset and (self.end is None or offset < self.end)


class ResyncLog:
    def __init__(self, engine: Engine) -> None:
        self._sessions = sessionmaker(engine, expire_on_commit=False)

    def last_generations(self, topics: Iterable[str]) -> dict[str, int]:
        """Each topic's last re-read generation (topics never re-read: absent)."""
        with self._sessions() as s:
            rows = s.execute(
                select(TopicResyncRow.topic, func.max(TopicResyncRow.generation))
                .where(TopicResyncRow.topic.in_(list(topics)))
                .group_by(TopicResyncRow.topic)
            ).all()
        return {topic: int(g) for topic, g in rows}

    def replacing(self, partitions: Iterable[TopicPartition]) -> list[ReRead]:
        """The `replace` re-reads recorded in `partitions`, oldest first."""
        keys = [(tp.topic, tp.partition) for tp in partitions]
        if not keys:
            return []
        with self._sessions() as s:
            rows = s.scalars(
                select(TopicResyncRow)
                .where(
                    tuple_(TopicResyncRow.topic, TopicResyncRow.partition).in_(keys),
                    TopicResyncRow.mode == "replace",
                )
                .order_by(TopicResyncRow.topic, TopicResyncRow.partition, TopicResyncRow.generation)
            ).all()
        return [
            ReRead(TopicPartition(r.topic, r.partition), r.generation, r.mode, r.begin_offset, r.end_offset)
            for r in rows
        ]

    def all(self, topic: str) -> list[ReRead]:
        """Every re-read recorded in `topic`, by partition and generation (for `connect` views and tests)."""
        with self._sessions() as s:
            rows = s.scalars(
                select(TopicResyncRow)
                .where(TopicResyncRow.topic == topic)
                .order_by(TopicResyncRow.partition, TopicResyncRow.generation)
            ).all()
        return [
            ReRead(TopicPartition(r.topic, r.partition), r.generation, r.mode, r.begin_offset, r.end_offset)
            for r in rows
        ]

    @staticmethod
    def record(
        s: Session, connector: str, run_id: int, marks: Mapping[TopicPartition, Resync], segments: Sequence[Segment]
    ) -> None:
        """Record where the re-reads of a source run's batch begin and end; part of its commit, after its
        segments got their offsets. A re-read begins at its first row's offset, or at the partition's
        end when the batch has no rows of it; it ends after its last row, or at the partition's end.
        A re-read this connector's rows no longer belong to (its positions were reset midway) is
        abandoned where they begin: no sink waits for its end for ever."""
        for seg in sorted(segments, key=lambda seg: (seg.topic, seg.partition)):
            if TopicPartition(seg.topic, seg.partition) in marks:
                continue
            dropped = s.scalars(
                select(TopicResyncRow)
                .where(
                    TopicResyncRow.topic == seg.topic,
                    TopicResyncRow.partition == seg.partition,
                    TopicResyncRow.end_offset.is_(None),
                )
                .with_for_update()
            ).one_or_none()
            if dropped is not None:
                why = "dropped by its source" if dropped.connector == connector else f"written into by `{connector}`"
                log.warning("re-read %s of topic %s was %s; abandoned", dropped.generation, seg.topic, why)
                dropped.end_offset, dropped.end_run, dropped.mode = seg.start_offset, run_id, ABANDONED
        for tp, mark in sorted(marks.items()):
            mine = [seg for seg in segments if seg.topic == tp.topic and seg.partition == tp.partition]
            part = s.scalars(
                select(TopicPartitionRow)
                .where(TopicPartitionRow.topic == tp.topic, TopicPartitionRow.partition == tp.partition)
                .with_for_update()
            ).one()
            first = min((seg.start_offset for seg in mine), default=part.next_offset)
            after = max((seg.end_offset for seg in mine), default=part.next_offset)
            running = s.scalars(
                select(TopicResyncRow)
                .where(
                    TopicResyncRow.topic == tp.topic,
                    TopicResyncRow.partition == tp.partition,
                    TopicResyncRow.end_offset.is_(None),
                )
                .with_for_update()
            ).one_or_none()
            if mark.begins:
                last = s.scalar(select(func.max(TopicResyncRow.generation)).where(TopicResyncRow.topic == tp.topic))
                if last is not None and mark.generation <= last:
                    raise RetriableError(
                        f"re-read generation {mark.generation} of topic `{tp.topic}` is taken (its last is {last}): "
                        "the run is repeated with the next number"
                    )
                if running is not None:  # its source began anew (positions reset midway): it never ends
                    running.end_offset, running.end_run, running.mode = first, run_id, ABANDONED
                running = TopicResyncRow(
                    topic=tp.topic,
                    partition=tp.partition,
                    generation=mark.generation,
                    mode=mark.mode,
                    connector=connector,
                    begin_offset=first,
                    begin_run=run_id,
                )
                s.add(running)
            if mark.ends:
                if running is None or running.generation != mark.generation:
                    log.warning(
                        "re-read %s of topic %s partition %s ends, but its beginning is not recorded; ignored",
                        mark.generation,
                        tp.topic,
                        tp.partition,
                    )
                    continue
                running.end_offset, running.end_run = after, run_id
        s.flush()


S = TypeVar("S", bound=Segment)


@dataclass
class SinkPlan(Generic[S]):
    """What a sink's run takes: its segments, what they (or the lack of them) tell about `replace`
    re-reads, and the generations it is told the end of (for `TOLD`, when the run commits)."""

    segments: list[S]
    replacing: dict[str, Resync] = field(default_factory=dict)
    told: dict[TopicPartition, int] = field(default_factory=dict)


def plan_batch(
    segments: Sequence[S],
    rereads: Sequence[ReRead],
    start: Mapping[TopicPartition, int],
    told: Mapping[TopicPartition, int],
    max_rows: int | None,
) -> SinkPlan[S]:
    """A sink's next batch from the `segments` after its offsets `start` (oldest first): cut where a
    `replace` re-read begins or ends, each topic's rows inside one re-read or outside all, at most
    `max_rows` rows (at least one segment). A topic whose re-read the sink has every row of, but was
    not told the end of, gets that end with no rows (its segments wait for the next run)."""
    plan: SinkPlan[S] = SinkPlan([])
    by_tp: dict[TopicPartition, list[ReRead]] = {}
    for r in rereads:
        by_tp.setdefault(r.tp, []).append(r)
    for tp, found in sorted(by_tp.items()):
        if tp.topic in plan.replacing:
            continue
        owed = _owed_end(found, start.get(tp, 0), told.get(tp, 0))
        if owed is not None:
            plan.replacing[tp.topic] = Resync(owed.generation, "replace", ends=True)
            plan.told[tp] = owed.generation
    zone: dict[str, ReRead | None] = {}  # topic → the re-read its rows in this batch are in (None: none)
    stopped: set[TopicPartition] = set()
    started: set[TopicPartition] = set()
    taken: list[S] = []
    for seg in segments:
        tp = TopicPartition(seg.topic, seg.partition)
        if seg.topic in plan.replacing or tp in stopped or seg.end_offset <= start.get(tp, 0):
            continue
        found = by_tp.get(tp, [])
        inside = next((r for r in found if r.holds(seg.start_offset)), None)
        zone.setdefault(seg.topic, inside)
        at_boundary = any(seg.start_offset in (r.begin, r.end) for r in found)
        if zone[seg.topic] != inside or (tp in started and at_boundary):
            stopped.add(tp)  # a re-read begins or ends here: the rest of the partition waits for a later batch
            continue
        started.add(tp)
        taken.append(seg)
    rows = 0
    for seg in taken:
        if plan.segments and max_rows is not None and rows + seg.row_count > max_rows:
            break
        plan.segments.append(seg)
        rows += seg.row_count
    for topic, inside in zone.items():
        if inside is None or not any(seg.topic == topic for seg in plan.segments):
            continue
        reached = max(seg.end_offset for seg in plan.segments if seg.topic == topic)
        ends = inside.end is not None and reached >= inside.end
        plan.replacing[topic] = Resync(inside.generation, "replace", ends=ends)
        if ends:
            plan.told[inside.tp] = inside.generation
    return plan


def _owed_end(found: Sequence[ReRead], offset: int, told: int) -> ReRead | None:
    """The ended re-read whose every row the sink has (its offset is at the end) but whose end it
    was not told: the sink's rows came before the end was known. A sink whose offset was moved past
    a re-read's end is not told (it did not write the re-read's copy; a swap would empty its table)."""
    for r in found:
        if r.end is not None and r.generation > told and r.end == offset:
            return r
    return None


def told_of(metadata: Mapping[str, Any] | None) -> dict[TopicPartition, int]:
    """`TOLD` of a sink's committed offset metadata."""
    metadata = metadata or {}
    found = metadata.get(TOLD)  # the sink's offset metadata, not a config
    out: dict[TopicPartition, int] = {}
    if isinstance(found, Mapping):
        for topic, parts in found.items():
            if isinstance(parts, Mapping):
                for p, g in parts.items():
                    if str(p).isdigit() and isinstance(g, int):
                        out[TopicPartition(str(topic), int(p))] = g
    return out


def with_told(metadata: Mapping[str, Any], told: Mapping[TopicPartition, int]) -> dict[str, Any]:
    """`metadata` with `told` under `TOLD` (each partition's highest generation kept)."""
    merged = told_of(metadata)
    for tp, g in told.items():
        merged[tp] = max(g, merged.get(tp, 0))
    if not merged:
        return dict(metadata)
    shaped: dict[str, dict[str, int]] = {}
    for tp, g in sorted(merged.items()):
        shaped.setdefault(tp.topic, {})[str(tp.partition)] = g
    return {**metadata, TOLD: shaped}
