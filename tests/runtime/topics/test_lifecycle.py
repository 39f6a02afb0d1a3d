"""A topic's lifecycle past `retention.ms`: `retention.bytes`, compaction by key (tombstones too),
merging small segments, all with sinks winning, offsets kept and files rewritten crash-safely."""

from __future__ import annotations

import json
import os
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.orm import sessionmaker

from connect_core.runtime.context import Runtime
from connect_core.runtime.store.retention import prune
from connect_core.runtime.topics.cleaner import clean_topics
from connect_core.runtime.topics.compaction import compact
from connect_core.runtime.topics.merging import merge_small_segments
from connect_core.runtime.topics.retention import apply_retention, expired
from connect_core.runtime.topics.segments import arrow_topics, read_topics, write_segment
from connect_core.sdk.errors import ConfigError
from tests.conftest import make_runner

WEEK_MS = 7 * 24 * 3600 * 1000
_SCHEMA = "__key struct<id:int>, __tombstone boolean, line string, ts timestamp"
_TS = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)


def _commit(runtime: Runtime, spark: Any, topic: str, rows: list[tuple[int | None, str | None]]) -> int:
    """Commit `rows` ((key id or None, line or None: a tombstone)) as one segment of `topic`'s partition 0,
    written by Spark as a source run writes it (two Spark partitions, in order); the run's id."""
    with runtime.engine.begin() as conn:
        run_id = conn.execute(
            text(
                "INSERT INTO connect.task_runs (connector, task_id, generation, state, lease_expires_at, finished_at)"
                " VALUES ('src', 0, 0, 'SUCCEEDED', now(), now()) RETURNING id"
            )
        ).scalar_one()
    runtime.topics.ensure_topic(topic, 1)
    path = runtime.topics.segment_path(topic, 0, run_id)
    data = [({"id": k} if k is not None else None, line is None, line, _TS) for k, line in rows]
    assert write_segment(
        spark, spark.createDataFrame(spark.sparkContext.parallelize(data, 2), _SCHEMA), path, run_id
    ) == len(rows)
    with sessionmaker(runtime.engine).begin() as s:
        runtime.topics.append_segment(s, topic=topic, partition=0, row_count=len(rows), path=path, run_id=run_id)
    return int(run_id)


def _sink(runtime: Runtime, tmp_path: Path, name: str, topic: str, committed: int | None = None) -> Path:
    out = tmp_path / f"{name}.txt"
    runtime.create_connector(
        name,
        {
            "connector.class": "org.apache.rocketmq.connect.file.FileSinkConnector",
            "filename": str(out),
            "connect.topicnames": topic,
        },
    )
    if committed is not None:
        _commit_sink(runtime, name, topic, committed)
    return out


def _commit_sink(runtime: Runtime, name: str, topic: str, offset: int) -> None:
    with runtime.engine.begin() as conn:
        conn.execute(
            text(
                'INSERT INTO connect.sink_offsets (connector, topic, partition, "offset") VALUES (:c, :t, 0, :o)'
                ' ON CONFLICT (connector, topic, partition) DO UPDATE SET "offset" = :o'
            ),
            {"c": name, "t": topic, "o": offset},
        )


def _segments(runtime: Runtime, topic: str) -> list[tuple[int, int, int]]:
    return [(s.start_offset, s.end_offset, s.row_count) for s in runtime.topics.all_segments([topic])]


def _read(runtime: Runtime, spark: Any, topic: str) -> list[tuple[int, int | None, str | None, bool]]:
    """(offset, key, line, tombstone) of every row, by the Spark reader and by the Arrow reader, which agree."""
    segments = runtime.topics.all_segments([topic])
    frame = read_topics(spark, segments)[topic]
    by_spark = sorted(
        (r["__offset"], r["__key"]["id"] if r["__key"] else None, r["line"], r["__tombstone"]) for r in frame.collect()
    )
    assert all(r["ts"] == _TS.replace(tzinfo=None) for r in frame.select("ts").collect())  # INT96 kept its meaning
    arrow = arrow_topics(spark, segments, {topic: frame})[topic]
    table = arrow.collect_arrow(lambda batches: batches)  # the Arrow path: pyarrow over the files
    by_arrow = sorted(
        (r["__offset"], r["__key"]["id"] if r["__key"] else None, r["line"], r["__tombstone"])
        for r in table.to_pylist()
    )
    assert by_spark == by_arrow
    assert len({r[0] for r in by_spark}) == len(by_spark)  # no offset twice
    return by_spark


def _age(runtime: Runtime, topic: str, days: float) -> None:
    with runtime.engine.begin() as conn:
        conn.execute(
            text("UPDATE connect.topic_segments SET created_at = now() - CAST(:d AS interval) WHERE topic = :t"),
            {"d": f"{days} days", "t": topic},
        )


def test_retention_bytes_deletes_the_oldest_but_never_what_a_sink_behind_has_not_committed(
    runtime: Runtime, spark: Any, tmp_path: Path
) -> None:
    for i in range(4):
        _commit(runtime, spark, "sized", [(i * 10 + j, f"row {i}.{j}") for j in range(5)])
    sizes = [s.size_bytes for s in runtime.topics.all_segments(["sized"])]
    assert all(size and size > 0 for size in sizes)  # measured when committed
    _sink(runtime, tmp_path, "behind", "sized", committed=10)  # has read the first two segments
    runtime.topics.set_config("sized", {"retention.ms": -1})
    assert apply_retention(runtime.engine, WEEK_MS) == []  # no byte limit: all kept

    # at most the newest segment's bytes: Kafka deletes the oldest while the rest still holds that much,
    # which would leave only the newest, but the sink has not committed the third
    runtime.topics.set_config("sized", {"retention.bytes": sizes[-1]})
    listed = runtime.topics.describe(WEEK_MS, only="sized")[0]
    assert (listed["retention.bytes"], listed["size_bytes"]) == (sizes[-1], sum(sizes))
    planned = expired(runtime.engine, WEEK_MS)
    assert [(e.start_offset, e.reason) for e in planned] == [(0, "retention.bytes"), (5, "retention.bytes")]
    assert [(e.start_offset, e.end_offset) for e in apply_retention(runtime.engine, WEEK_MS)] == [(0, 5), (5, 10)]
    assert _segments(runtime, "sized") == [(10, 15, 5), (15, 20, 5)]

    _commit_sink(runtime, "behind", "sized", 20)  # caught up: the third goes, the newest stays
    assert [(e.start_offset, e.end_offset) for e in apply_retention(runtime.engine, WEEK_MS)] == [(10, 15)]
    assert _segments(runtime, "sized") == [(15, 20, 5)]

    # a compacted-only topic is not deleted by retention
    _commit(runtime, spark, "sized", [(99, "x")])
    runtime.topics.set_config("sized", {"retention.bytes": 0, "cleanup.policy": "compact"})
    assert apply_retention(runtime.engine, WEEK_MS) == []
    runtime.topics.set_config("sized", {"cleanup.policy": "compact,delete"})
    assert [(e.start_offset, e.end_offset) for e in apply_retention(runtime.engine, WEEK_MS)] == [(15, 20)]


def test_compaction_keeps_each_keys_latest_record_at_its_offset(runtime: Runtime, spark: Any, tmp_path: Path) -> None:
    _commit(runtime, spark, "keyed", [(1, "a1"), (2, "b1"), (3, "c1"), (None, "no key")])  # 0-3
    _commit(runtime, spark, "keyed", [(1, "a2"), (2, None), (4, "d1"), (3, "c2")])  # 4-7, key 2 deleted
    _commit(runtime, spark, "keyed", [(1, "a3"), (4, "d2")])  # 8-9
    runtime.topics.set_config("keyed", {"cleanup.policy": "compact"})
    _sink(runtime, tmp_path, "behind", "keyed", committed=4)
    everything = _read(runtime, spark, "keyed")

    planned = compact(runtime.engine, dry_run=True)
    assert [(c.start_offset, c.rows_before, c.rows_after) for c in planned] == [(0, 4, 1)]
    assert _read(runtime, spark, "keyed") == everything  # a dry run changes nothing

    # only what the sink committed is compacted: the first segment; every key there has a later record
    # (the keyless row stays: no key, nothing supersedes it)
    assert [(c.start_offset, c.rows_after) for c in compact(runtime.engine)] == [(0, 1)]
    assert _segments(runtime, "keyed") == [(0, 4, 1), (4, 8, 4), (8, 10, 2)]
    assert _read(runtime, spark, "keyed") == [r for r in everything if r[0] >= 3]
    assert compact(runtime.engine) == []  # nothing new past the checkpoint: the pass does nothing

    _commit_sink(runtime, "behind", "keyed", 8)
    assert [(c.start_offset, c.rows_after) for c in compact(runtime.engine)] == [(4, 2)]
    # key 1's a2 and key 4's d1 are superseded; key 2's tombstone is kept (delete.retention.ms: a day)
    assert _read(runtime, spark, "keyed") == [
        (3, None, "no key", False),
        (5, 2, None, True),
        (7, 3, "c2", False),
        (8, 1, "a3", False),
        (9, 4, "d2", False),
    ]

    # two days later, with new records: the tombstone has done its work and goes too
    _age(runtime, "keyed", 2)
    _commit(runtime, spark, "keyed", [(5, "e1")])  # 10
    _commit_sink(runtime, "behind", "keyed", 10)
    compacted = compact(runtime.engine)
    assert [(c.start_offset, c.rows_after) for c in compacted] == [(4, 1)]
    kept = [(3, None, "no key", False), (7, 3, "c2", False), (8, 1, "a3", False), (9, 4, "d2", False)]
    assert _read(runtime, spark, "keyed") == [*kept, (10, 5, "e1", False)]

    # merged afterwards, gaps and all: the same rows at the same offsets
    merged = merge_small_segments(runtime.engine)
    assert [(m.start_offset, m.end_offset, m.segments, m.rows) for m in merged] == [(0, 10, 3, 4)]
    assert _segments(runtime, "keyed") == [(0, 10, 4), (10, 11, 1)]
    assert _read(runtime, spark, "keyed") == [*kept, (10, 5, "e1", False)]

    # a sink created now reads the compacted log: the latest value per key, in offset order, once each
    late = _sink(runtime, tmp_path, "late", "keyed")
    assert make_runner(runtime, spark).run("late", 0).state == "SUCCEEDED"
    assert [json.loads(line)["line"] for line in late.read_text().splitlines()] == ["no key", "c2", "a3", "d2", "e1"]
    assert runtime.connectors.sink_offsets("late")[next(iter(runtime.connectors.sink_offsets("late")))].offset == 11


def test_merge_keeps_offsets_and_survives_a_crash_before_the_swap(runtime: Runtime, spark: Any, tmp_path: Path) -> None:
    runs = [_commit(runtime, spark, "small", [(None, f"r{i}.{j}") for j in range(3)]) for i in range(5)]
    everything = _read(runtime, spark, "small")
    assert [r[0] for r in everything] == list(range(15))
    _sink(runtime, tmp_path, "reader", "small", committed=12)  # committed the first four segments
    old_paths = [s.path for s in runtime.topics.all_segments(["small"])]

    class Killed(BaseException):
        """A kill, not an error a pass would log and go on from."""

    def crash() -> None:
        raise Killed("killed between writing the merged files and swapping them in")

    with pytest.raises(Killed, match="killed"):
        merge_small_segments(runtime.engine, before_swap=crash)
    assert _segments(runtime, "small") == [(3 * i, 3 * i + 3, 3) for i in range(5)]
    assert _read(runtime, spark, "small") == everything  # the orphan files are never read: no row twice
    assert all(Path(p.removeprefix("file://")).exists() for p in old_paths)
    (orphan,) = Path(old_paths[0].removeprefix("file://")).parent.glob("rewrite=*")  # written, never swapped in
    assert list(orphan.glob("*.parquet"))
    os.utime(orphan, (time.time() - 7200, time.time() - 7200))  # two hours later, the next pass deletes it

    assert [(m.start_offset, m.end_offset, m.segments) for m in merge_small_segments(runtime.engine)] == [(0, 12, 4)]
    assert _segments(runtime, "small") == [(0, 12, 12), (12, 15, 3)]  # the newest, uncommitted one is not merged
    assert _read(runtime, spark, "small") == everything
    assert not any(Path(p.removeprefix("file://")).exists() for p in old_paths[:4])  # the old files went
    assert not orphan.exists()
    merged = runtime.topics.all_segments(["small"])[0]
    assert merged.run_id == runs[3] and merged.size_bytes and "/rewrite=" in merged.path

    # history pruning keeps the run the merged segment names; the merged-away runs may go
    with runtime.engine.begin() as conn:
        conn.execute(text("UPDATE connect.task_runs SET finished_at = now() - interval '30 days'"))
    prune(runtime.engine, 7)
    with runtime.engine.connect() as conn:
        left = set(conn.execute(text("SELECT id FROM connect.task_runs")).scalars())
    assert {runs[3], runs[4]} <= left and not {runs[0], runs[1], runs[2]} & left

    # the reader reads on from its offset, through the merged segment's neighbour
    out = tmp_path / "reader.txt"
    assert make_runner(runtime, spark).run("reader", 0).state == "SUCCEEDED"
    assert [json.loads(line)["line"] for line in out.read_text().splitlines()] == ["r4.0", "r4.1", "r4.2"]


def test_a_pass_cleans_and_its_dry_run_changes_nothing(runtime: Runtime, spark: Any) -> None:
    for i in range(3):
        _commit(runtime, spark, "pass", [(1, f"v{i}"), (2, f"w{i}")])
    runtime.topics.set_config("pass", {"cleanup.policy": "compact,delete", "segment.bytes": 10 << 20})
    planned = clean_topics(runtime.engine, WEEK_MS, dry_run=True)
    assert (planned["segments"], len(planned["compacted"]), len(planned["merged"])) == ([], 2, 1)
    assert _segments(runtime, "pass") == [(0, 2, 2), (2, 4, 2), (4, 6, 2)]
    done = clean_topics(runtime.engine, WEEK_MS)
    assert [c["rows_after"] for c in done["compacted"]] == [0, 0]  # both keys' latest are in the newest
    assert _segments(runtime, "pass") == [(4, 6, 2)]
    assert json.dumps(done)  # JSON-able, as REST returns it


def test_topic_settings_at_creation_and_hostile_values(runtime: Runtime, tmp_path: Path) -> None:
    source = tmp_path / "in.txt"
    source.write_text("a\n")
    base = {"connector.class": "FileStreamSource", "file": str(source), "topic": "made"}
    with pytest.raises(ConfigError):
        runtime.create_connector("bad", {**base, "topic.creation.default.cleanup.policy": "shrink"})
    with pytest.raises(ConfigError):
        runtime.create_connector("bad", {**base, "topic.creation.default.retention.bytes": "-2"})
    with pytest.raises(ConfigError):  # a boolean is never read as a number
        runtime.create_connector("bad", {**base, "topic.creation.default.delete.retention.ms": True})

    from connect_core.runtime.topics.config import TopicConfigError, creation_config

    made = {**base, "topic.creation.default.cleanup.policy": "delete,compact"}
    made["topic.creation.default.retention.bytes"] = "1048576"
    assert creation_config(made) == {"cleanup.policy": "compact,delete", "retention.bytes": 1048576}
    runtime.topics.ensure_topic("made", 1, creation_config(made))
    listed = runtime.topics.describe(WEEK_MS, only="made")[0]
    assert (listed["cleanup.policy"], listed["retention.bytes"], listed["retention.ms"]) == (
        "compact,delete",
        1048576,
        WEEK_MS,
    )

    hostile: dict[str, Any] = {
        "retention.bytes": -2,
        "cleanup.policy": "compact,compact",
        "delete.retention.ms": True,
        "segment.bytes": 0,
        "retention.ms": "1e9",
        "max.message.bytes": 1,
    }
    with pytest.raises(TopicConfigError) as caught:
        runtime.topics.set_config("made", hostile)
    assert set(caught.value.problems) == set(hostile)  # every bad key named, at once
    for wrong in ("shrink", "", ",", ["compact", 1], 1, None.__class__):
        with pytest.raises(TopicConfigError, match=r"cleanup\.policy"):
            runtime.topics.set_config("made", {"cleanup.policy": wrong})
    with pytest.raises(TopicConfigError, match="not a topic setting"):
        runtime.topics.set_config("made", {"bogus": None})
    assert runtime.topics.set_config("made", {"cleanup.policy": None, "retention.bytes": -1}) == {"retention.bytes": -1}


def test_the_rebalance_sensors_hourly_pass_merges_too(runtime: Runtime, spark: Any) -> None:
    from connect_core.airflow.rebalance import _prune

    for i in range(3):
        _commit(runtime, spark, "hourly", [(None, f"h{i}")])
    everything = _read(runtime, spark, "hourly")
    _prune(runtime.engine, runtime.settings)
    assert _segments(runtime, "hourly") == [(0, 2, 2), (2, 3, 1)]
    assert _read(runtime, spark, "hourly") == everything
