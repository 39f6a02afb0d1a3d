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
        assert topic == {
            "name": "fileTopic",
            "partitions": 1,
            "segments": 1,
            "rows": 3,
            "end_offsets": {"0": 3},
            "retention.ms": 7 * 24 * 3600 * 1000,
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
