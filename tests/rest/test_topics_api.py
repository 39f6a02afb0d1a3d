"""`/topics` and `connect topics` over real HTTP: what a topic keeps, its sinks' lag, its retention."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
from sqlalchemy import text

from connect_core.runtime.context import Runtime
from connect_core.runtime.execution.runner import TaskRunner
from tests.conftest import file_pair
from tests.rest.conftest import Served
from tests.rest.test_cli_over_http import _cli


def test_topics_over_rest_and_the_cli(api: Served, runtime: Runtime, runner: TaskRunner, tmp_path: Path) -> None:
    source, _sink = file_pair(runtime, tmp_path)
    source.write_text("a\nb\nc\n")
    assert runner.run("fileSourceConnector", 0).state == "SUCCEEDED"
    with httpx.Client(base_url=api.url, timeout=30) as client:
        (topic,) = client.get("/topics").json()
        assert topic.pop("size_bytes") > 0  # the segment's files, measured when it was committed
        assert topic == {
            "name": "fileTopic",
            "partitions": 1,
            "segments": 1,
            "rows": 3,
            "end_offsets": {"0": 3},
            "retention.ms": 7 * 24 * 3600 * 1000,
            "retention.bytes": -1,
            "cleanup.policy": "delete",
            "config": {},
            "sinks": [{"connector": "fileSinkConnector", "partition": 0, "lag": 3}],
        }
        assert client.get("/topics/nope").status_code == 404
        bad = client.put("/topics/fileTopic/config", json={"retention.ms": "soon"})
        assert bad.status_code == 400 and "whole number of milliseconds" in bad.json()["message"]
        assert client.put("/topics/fileTopic/config", json={"retention.ms": 0}).json()["retention.ms"] == 0

        # past retention (0 ms), but the sink has not read it: kept, and the dry run says nothing would go
        with runtime.engine.begin() as conn:
            conn.execute(text("UPDATE connect.topic_segments SET created_at = now() - interval '1 minute'"))
        assert client.post("/topics/retention", params={"dryRun": "true"}).json()["segments"] == []
        assert runner.run("fileSinkConnector", 0).state == "SUCCEEDED"

    planned = _cli(api, "topics", "prune", "--dry-run").stdout
    assert "would delete 1 segment(s), 3 row(s)" in planned
    assert "deleted 1 segment(s), 3 row(s)" in _cli(api, "topics", "prune").stdout
    listed = json.loads(_cli(api, "topics", "list", "-o", "json").stdout)
    assert (listed[0]["segments"], listed[0]["sinks"][0]["lag"]) == (0, 0)
    assert "retention for ever" in _cli(api, "topics", "alter", "fileTopic", "--retention-ms", "-1").stdout
    assert "fileTopic" in _cli(api, "topics", "list").stdout


def test_a_sink_replays_from_a_time(api: Served, runtime: Runtime, runner: TaskRunner, tmp_path: Path) -> None:
    source, sink = file_pair(runtime, tmp_path)
    source.write_text("one\ntwo\n")
    assert runner.run("fileSourceConnector", 0).state == "SUCCEEDED"
    with runtime.engine.begin() as conn:  # the first segment: committed two hours ago
        conn.execute(text("UPDATE connect.topic_segments SET created_at = now() - interval '2 hours'"))
    with source.open("a") as f:
        f.write("three\n")
    assert runner.run("fileSourceConnector", 0).state == "SUCCEEDED"
    assert runner.run("fileSinkConnector", 0).state == "SUCCEEDED"

    refused = _cli(api, "offsets", "reset", "fileSinkConnector", "--to-time", "2026-01-01T00:00:00Z", check=False)
    assert refused.returncode == 2 and "STOPPED" in refused.stderr
    _cli(api, "stop", "fileSinkConnector")
    bad = _cli(api, "offsets", "reset", "fileSinkConnector", "--to-time", "yesterday", check=False)
    assert bad.returncode == 2 and "not an ISO 8601 time" in bad.stderr
    an_hour_ago = (datetime.now(UTC) - timedelta(hours=1)).isoformat()
    moved = _cli(api, "offsets", "reset", "fileSinkConnector", "--to-time", an_hour_ago).stdout
    assert "fileTopic[0] → 2" in moved
    offsets = json.loads(_cli(api, "offsets", "get", "fileSinkConnector", "-o", "json").stdout)["offsets"]
    assert [o["offset"]["kafka_offset"] for o in offsets] == [2]
    _cli(api, "resume", "fileSinkConnector")
    assert runner.run("fileSinkConnector", 0).state == "SUCCEEDED"
    assert sink.read_text() == "one\ntwo\nthree\nthree\n"  # replayed from the hour: the second segment again


def test_topic_settings_and_delete_over_rest_and_the_cli(
    api: Served, runtime: Runtime, runner: TaskRunner, tmp_path: Path
) -> None:
    source, _sink = file_pair(runtime, tmp_path)
    source.write_text("a\nb\n")
    assert runner.run("fileSourceConnector", 0).state == "SUCCEEDED"
    with httpx.Client(base_url=api.url, timeout=30) as client:
        hostile = {
            "retention.bytes": -5,
            "cleanup.policy": "shrink",
            "delete.retention.ms": True,
            "segment.bytes": "big",
            "retention.ms": [1],
            "unclean.leader.election.enable": "true",
        }
        bad = client.put("/topics/fileTopic/config", json=hostile)
        assert bad.status_code == 400
        assert all(f"`{key}`" in bad.json()["message"] for key in hostile)  # every bad key named at once
        for wrong in ({"cleanup.policy": ["compact", "compact"]}, {"retention.bytes": 2**70}, {"segment.bytes": 0}):
            assert client.put("/topics/fileTopic/config", json=wrong).status_code == 400
        assert client.get("/topics/fileTopic").json()["config"] == {}  # nothing of a refused change is kept
        body = {"retention.bytes": "1048576", "cleanup.policy": "delete,compact", "delete.retention.ms": 0}
        topic = client.put("/topics/fileTopic/config", json=body).json()
        assert (topic["retention.bytes"], topic["cleanup.policy"]) == (1048576, "compact,delete")
        assert topic["config"] == {
            "retention.bytes": 1048576,
            "cleanup.policy": "compact,delete",
            "delete.retention.ms": 0,
        }

        # a topic in use is not deleted without force: 409 naming who uses it
        refused = client.delete("/topics/fileTopic")
        assert refused.status_code == 409
        assert (
            "`fileSinkConnector`" in refused.json()["message"] and "`fileSourceConnector`" in refused.json()["message"]
        )
        assert client.delete("/topics/nope").status_code == 404

    altered = _cli(api, "topics", "alter", "fileTopic", "-c", "cleanup.policy=compact", "-c", "retention.bytes=").stdout
    assert "cleanup.policy compact" in altered and "retention.bytes no limit" in altered
    bad_cli = _cli(api, "topics", "alter", "fileTopic", "-c", "cleanup.policy=shrink", check=False)
    assert bad_cli.returncode == 2 and "cleanup.policy" in bad_cli.stderr
    (listed,) = json.loads(_cli(api, "topics", "list", "-o", "json").stdout)
    assert (listed["cleanup.policy"], listed["retention.bytes"], listed["size_bytes"] > 0) == ("compact", -1, True)
    refused_cli = _cli(api, "topics", "delete", "fileTopic", check=False)
    assert refused_cli.returncode == 1 and "is in use" in refused_cli.stderr
    segment_paths = [s.path for s in runtime.topics.all_segments(["fileTopic"])]
    assert (
        "deleted topic fileTopic: 1 segment(s), 2 row(s)"
        in _cli(api, "topics", "delete", "fileTopic", "--force").stdout
    )
    assert runtime.topics.topics() == {} and runtime.connectors.sink_offsets("fileSinkConnector") == {}
    assert not any(Path(p.removeprefix("file://")).exists() for p in segment_paths)

    # the source writes again: the topic comes back, its offsets from 0
    with source.open("a") as f:
        f.write("c\n")
    assert runner.run("fileSourceConnector", 0).state == "SUCCEEDED"
    assert "fileTopic" in runtime.topics.topics()
    planned = _cli(api, "topics", "prune", "--dry-run").stdout
    assert "would delete 0 segment(s)" in planned
