"""A sink's batch and `replace` re-reads (`runtime.topics.resyncs.plan_batch`): never across a re-read's
beginning or end, `replacing` on the rows inside one, `ends` exactly when the sink has every row of it
(also when the end came with no rows), told once; `retain` re-reads are ordinary rows."""

from __future__ import annotations

import itertools

from connect_core.runtime.topics.resyncs import TOLD, ReRead, plan_batch, told_of, with_told
from connect_core.runtime.topics.store import Segment
from connect_core.sdk.records import Resync, TopicPartition

A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)


def _segments(tp: TopicPartition, *bounds: int) -> list[Segment]:
    return [
        Segment(tp.topic, tp.partition, lo, hi, hi - lo, f"/{tp.topic}/{lo}", run_id=lo)
        for lo, hi in itertools.pairwise(bounds)
    ]


def _sorted(*groups: list[Segment]) -> list[Segment]:
    return sorted((s for g in groups for s in g), key=lambda s: (s.start_offset, s.topic, s.partition))


def _spans(plan_segments: list[Segment]) -> list[tuple[str, int, int]]:
    return [(s.topic, s.start_offset, s.end_offset) for s in plan_segments]


def test_a_batch_stops_where_a_replace_re_read_begins_and_ends() -> None:
    segments = _sorted(_segments(A0, 0, 5, 10, 14, 18, 20), _segments(B0, 0, 3, 6))
    reread = ReRead(A0, 1, "replace", begin=10, end=18)
    start = {A0: 0, B0: 0}
    first = plan_batch(segments, [reread], start, {}, None)
    assert _spans(first.segments) == [("a", 0, 5), ("b", 0, 3), ("b", 3, 6), ("a", 5, 10)]
    assert first.replacing == {} and first.told == {}

    second = plan_batch(segments, [reread], {A0: 10, B0: 6}, {}, None)
    assert _spans(second.segments) == [("a", 10, 14), ("a", 14, 18)]
    assert second.replacing == {"a": Resync(1, "replace", ends=True)} and second.told == {A0: 1}

    # a row limit inside the re-read: its first rows without `ends`
    part = plan_batch(segments, [reread], {A0: 10, B0: 6}, {}, 5)
    assert _spans(part.segments) == [("a", 10, 14)] and part.replacing == {"a": Resync(1, "replace")}

    after = plan_batch(segments, [reread], {A0: 18, B0: 6}, {A0: 1}, None)
    assert _spans(after.segments) == [("a", 18, 20)] and after.replacing == {}


def test_a_running_re_read_is_never_told_its_end() -> None:
    segments = _segments(A0, 0, 4, 8)
    running = ReRead(A0, 3, "replace", begin=4, end=None)
    plan = plan_batch(segments, [running], {A0: 4}, {A0: 2}, None)
    assert _spans(plan.segments) == [("a", 4, 8)] and plan.replacing == {"a": Resync(3, "replace")}


def test_the_end_known_after_the_rows_is_told_once_with_no_rows() -> None:
    # the sink had rows 4..8 of the re-read before its end was known; rows after it wait a run
    segments = _segments(A0, 0, 4, 8, 12)
    ended = ReRead(A0, 1, "replace", begin=4, end=8)
    owed = plan_batch(segments, [ended], {A0: 8}, {}, None)
    assert owed.segments == [] and owed.replacing == {"a": Resync(1, "replace", ends=True)} and owed.told == {A0: 1}
    told = told_of(with_told({"sink": "own"}, owed.told))
    assert told == {A0: 1}
    done = plan_batch(segments, [ended], {A0: 8}, told, None)
    assert _spans(done.segments) == [("a", 8, 12)] and done.replacing == {}


def test_an_empty_re_read_is_a_boundary_and_is_told_with_no_rows() -> None:
    segments = _segments(A0, 0, 4, 8)
    empty = ReRead(A0, 2, "replace", begin=4, end=4)
    before = plan_batch(segments, [empty], {A0: 0}, {}, None)
    assert _spans(before.segments) == [("a", 0, 4)] and before.replacing == {}
    at = plan_batch(segments, [empty], {A0: 4}, {}, None)
    assert at.segments == [] and at.replacing == {"a": Resync(2, "replace", ends=True)}
    # a sink whose offset was moved past a re-read it never wrote is not told to swap in an empty copy
    moved = plan_batch(segments, [empty], {A0: 8}, {}, None)
    assert moved.replacing == {} and moved.told == {}


def test_a_topic_s_rows_in_a_batch_are_in_one_re_read_or_in_none() -> None:
    segments = _sorted(_segments(A0, 0, 4, 8), _segments(A1, 0, 3, 6))
    reread = ReRead(A0, 1, "replace", begin=0, end=8)
    plan = plan_batch(segments, [reread], {A0: 0, A1: 0}, {}, None)
    assert _spans(plan.segments) == [("a", 0, 4), ("a", 4, 8)]  # partition 1's rows wait for the next batch
    assert plan.replacing == {"a": Resync(1, "replace", ends=True)}
    nxt = plan_batch(segments, [reread], {A0: 8, A1: 0}, {A0: 1}, None)
    assert _spans(nxt.segments) == [("a", 0, 3), ("a", 3, 6)] and nxt.replacing == {}


def test_told_generations_survive_the_sink_s_own_metadata() -> None:
    merged = with_told({"x": 1, TOLD: {"a": {"0": 1}}}, {B0: 4, A0: 0})
    assert merged["x"] == 1 and told_of(merged) == {A0: 1, B0: 4}
    assert told_of({TOLD: {"a": {"zero": 1, "1": "2"}}}) == {}  # what is not a number is not read
