"""Topic retention: segments past `retention.ms` go once every sink reading them has committed them;
a sink that is behind keeps what it has not read; the run history then lets their runs go too."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from connect_core.runtime.context import Runtime
from connect_core.runtime.store.retention import prune
from connect_core.runtime.topics.retention import apply_retention
from tests.conftest import file_pair, make_runner

WEEK_MS = 7 * 24 * 3600 * 1000


def _age(runtime: Runtime, days: float) -> None:
    """Every segment and finished run so far as if made `days` ago."""
    with runtime.engine.begin() as conn:
        conn.execute(
            text("UPDATE connect.topic_segments SET created_at = now() - CAST(:d AS interval)"), {"d": f"{days} days"}
        )
        conn.execute(
            text(
                "UPDATE connect.task_runs SET finished_at = now() - CAST(:d AS interval) WHERE finished_at IS NOT NULL"
            ),
            {"d": f"{days} days"},
        )


def _segments(runtime: Runtime, topic: str = "fileTopic") -> list[tuple[int, int, str]]:
    return [(s.start_offset, s.end_offset, s.path) for s in runtime.topics.all_segments([topic])]


def _local(path: str) -> Path:
    return Path(path.removeprefix("file://"))


def test_a_sink_that_is_behind_keeps_what_it_has_not_committed(runtime: Runtime, spark: Any, tmp_path: Path) -> None:
    source, sink = file_pair(runtime, tmp_path)
    runner = make_runner(runtime, spark)
    source.write_text("one\ntwo\nthree\n")
    assert runner.run("fileSourceConnector", 0).state == "SUCCEEDED"
    assert runner.run("fileSinkConnector", 0).state == "SUCCEEDED"
    with source.open("a") as f:
        f.write("four\nfive\n")
    assert runner.run("fileSourceConnector", 0).state == "SUCCEEDED"  # the sink has not read these yet
    first, second = _segments(runtime)
    assert (first[:2], second[:2]) == ((0, 3), (3, 5))

    assert apply_retention(runtime.engine, WEEK_MS) == []  # young: kept, committed or not
    _age(runtime, 8)
    deleted = apply_retention(runtime.engine, WEEK_MS)
    assert [(d.start_offset, d.end_offset) for d in deleted] == [(0, 3)]  # the sink is behind on the second
    assert _segments(runtime) == [second]
    assert not _local(first[2]).exists() and _local(second[2]).exists()
    listed = {t["name"]: t for t in runtime.topics.describe(WEEK_MS)}["fileTopic"]
    assert (listed["segments"], listed["rows"], listed["end_offsets"]) == (1, 2, {"0": 5})
    assert listed["sinks"] == [{"connector": "fileSinkConnector", "partition": 0, "lag": 2}]

    # the run history may now let the first source run go: no segment refers to it any more
    pruned = prune(runtime.engine, 7)
    assert pruned["task_runs"] >= 1

    assert runner.run("fileSinkConnector", 0).state == "SUCCEEDED"  # reads what was kept, loses nothing
    assert sink.read_text() == "one\ntwo\nthree\nfour\nfive\n"
    _age(runtime, 8)
    assert [(d.start_offset, d.end_offset) for d in apply_retention(runtime.engine, WEEK_MS)] == [(3, 5)]
    assert _segments(runtime) == []

    # more rows after everything was deleted: the offsets go on where they were
    with source.open("a") as f:
        f.write("six\n")
    assert runner.run("fileSourceConnector", 0).state == "SUCCEEDED"
    assert runner.run("fileSinkConnector", 0).state == "SUCCEEDED"
    assert sink.read_text().endswith("five\nsix\n") and _segments(runtime)[0][:2] == (5, 6)


def test_retention_per_topic_and_topics_no_sink_reads(runtime: Runtime, spark: Any, tmp_path: Path) -> None:
    for name, retention in (("kept", "-1"), ("short", None)):
        path = tmp_path / f"{name}.txt"
        path.write_text("a\nb\n")
        config = {
            "connector.class": "FileStreamSource",
            "file": str(path),
            "topic": name,
            **({"topic.creation.default.retention.ms": retention} if retention else {}),
        }
        runtime.create_connector(name, config)
        assert make_runner(runtime, spark).run(name, 0).state == "SUCCEEDED"
    assert runtime.topics.describe(WEEK_MS)[0]["retention.ms"] == -1  # `kept`, set at its creation
    _age(runtime, 1)
    runtime.topics.set_config("short", {"retention.ms": 3_600_000})  # an hour, set later
    deleted = apply_retention(runtime.engine, WEEK_MS)
    assert {d.topic for d in deleted} == {"short"}  # no sink reads it: its retention alone decides
    assert _segments(runtime, "kept") and not _segments(runtime, "short")

    with pytest.raises(ValueError, match=r"`retention\.ms` must be -1 \(for ever\) or more.*`cleanup\.policy` must be"):
        runtime.topics.set_config("kept", {"retention.ms": "-5", "cleanup.policy": "shrink"})
    for wrong in (True, 1.5, [1], "10 days", "9" * 30, 10**30):  # never read as a number of milliseconds
        with pytest.raises(ValueError, match="whole number of milliseconds"):
            runtime.topics.set_config("kept", {"retention.ms": wrong})
    with pytest.raises(KeyError):
        runtime.topics.set_config("nope", {"retention.ms": 1})
    assert runtime.topics.set_config("kept", {"retention.ms": None}) == {}  # back to the default
