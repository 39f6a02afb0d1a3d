"""The Connect view's data and page (over ASGI; tests/web drives the page in Chromium)."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

from fastapi.testclient import TestClient
from sqlalchemy import event, text

from connect_core.runtime.context import Runtime
from connect_core.runtime.execution.runner import TaskRunner
from connect_core.web._data import next_run
from connect_core.web.view import create_view_app
from tests.conftest import file_pair


def test_view_lists_connectors_lag_throughput_and_runs(runtime: Runtime, runner: TaskRunner, tmp_path: Path) -> None:
    source, _ = file_pair(runtime, tmp_path)
    source.write_text("a\nb\n")
    runner.run("fileSourceConnector", 0)
    client = TestClient(create_view_app(lambda: runtime))

    data = {c["name"]: c for c in client.get("/overview.json").json()}
    src, sink = data["fileSourceConnector"], data["fileSinkConnector"]
    assert src["rows"] == [2] and src["last_run"]["state"] == "SUCCEEDED" and src["last_run"]["duration_s"] > 0
    assert src["lag"] is None and src["dag_id"] == "connect__fileSourceConnector" and src["pools"] == ["local"]
    assert sink["lag"] == 2 and sink["tasks"][0]["state"] == "UNASSIGNED" and sink["last_run"] is None
    assert "config" not in src and str(source) not in json.dumps(data)  # config values are never shown

    # the next scheduled run: the source's default hourly schedule, at the next full hour; the sink on its data
    next_run = datetime.fromisoformat(src["next_run"])
    assert src["schedule"] == "@hourly" and next_run > datetime.now(UTC) and next_run.minute == next_run.second == 0
    assert (sink["schedule"], sink["next_run"]) == ("on new data", None)

    runner.run("fileSinkConnector", 0)
    assert {c["name"]: c for c in client.get("/data.json").json()["connectors"]}["fileSinkConnector"]["lag"] == 0

    response = client.get("/")
    page = response.text
    assert "Connect: 2 connector(s)" in page and "connect__fileSourceConnector" in page
    assert "records per run" in page and "SUCCEEDED" in page
    assert "script-src 'self'" in response.headers["content-security-policy"]
    assert client.get("/view.js").headers["content-type"].startswith("text/javascript")


def test_view_reads_a_fixed_number_of_queries_whatever_the_number_of_connectors(
    runtime: Runtime, tmp_path: Path
) -> None:
    """The page polls data.json every few seconds: its cost must not be some queries per connector."""
    client = TestClient(create_view_app(lambda: runtime))

    def statements() -> int:
        seen: list[str] = []

        def count(*_args: object) -> None:
            seen.append("q")

        event.listen(runtime.engine, "before_cursor_execute", count)
        try:
            assert client.get("/data.json").status_code == 200
        finally:
            event.remove(runtime.engine, "before_cursor_execute", count)
        return len(seen)

    file_pair(runtime, tmp_path)
    few = statements()
    for i in range(12):
        runtime.create_connector(
            f"more-{i}",
            {"connector.class": "FileSinkConnector", "filename": str(tmp_path / f"o{i}"), "topics": "fileTopic"},
        )
    assert statements() == few


def test_view_masks_errors_and_embeds_hostile_names_inertly(runtime: Runtime, tmp_path: Path) -> None:
    hostile = 'x"><img src=x onerror=alert(1)></script><script>alert(2)</script>'
    runtime.connectors.create(  # a name stored before the naming rule: the store takes it
        hostile, connector_class="FileSourceConnector", type="source", config={}, task_configs=[{}]
    )
    with runtime.engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO connect.task_runs (connector, task_id, generation, state, lease_expires_at, finished_at, "
                "error) VALUES (:c, 0, 1, 'FAILED', now(), now(), :e)"
            ),
            {"c": hostile, "e": "boom: jdbc:postgresql://app:hunter2@db/x </script>"},
        )
    client = TestClient(create_view_app(lambda: runtime))
    page = client.get("/").text
    assert "<img" not in page and "<script>alert" not in page and "hunter2" not in page
    embedded = re.search(r'<script type="application/json" id="initial">(.*?)</script>', page, re.S)
    assert embedded is not None
    [c] = json.loads(embedded.group(1))["connectors"]
    assert c["name"] == hostile and c["failures"] == 1 and "hunter2" not in c["last_error"]["error"]
    history = client.get("/errors.json", params={"connector": hostile}).json()
    assert len(history) == 1 and history[0]["error"].startswith("boom") and "hunter2" not in history[0]["error"]


def test_view_shows_pools_their_health_and_who_runs_what(runtime: Runtime, tmp_path: Path) -> None:
    runtime.pools.add("east", "spark://127.0.0.1:7077", capacity=2, conf={"spark.hadoop.fs.s3a.secret.key": "s3cr3t"})
    file_pair(runtime, tmp_path)
    with runtime.engine.begin() as conn:
        conn.execute(text("UPDATE connect.spark_pools SET heartbeat_at = now() - interval '1 hour' WHERE name='east'"))
    client = TestClient(create_view_app(lambda: runtime))
    pools = {p["name"]: p for p in client.get("/pools.json").json()}
    assert pools["local"]["alive"] and not pools["east"]["alive"]
    placed = pools["local"]["running"] + pools["east"]["running"]
    assert sorted(placed) == sorted(
        ["fileSourceConnector", "fileSourceConnector-0", "fileSinkConnector", "fileSinkConnector-0"]
    )
    assert sum(p["connectors"] for p in pools.values()) == 2 and sum(p["tasks"] for p in pools.values()) == 2
    data = client.get("/data.json").json()
    page = client.get("/").text
    assert "on 2 Spark pool(s)" in page and "spark://127.0.0.1:7077" in page and "running" not in data["pools"][0]
    assert "s3cr3t" not in page and "s3cr3t" not in str(pools)


def test_the_next_run_follows_the_schedule_and_the_state() -> None:
    now = datetime(2026, 11, 25, 10, 17, 30, tzinfo=UTC)
    last = {"finished_at": (now - timedelta(minutes=10)).isoformat()}
    assert next_run("*/15 * * * *", "source", "RUNNING", last, now) == ("*/15 * * * *", "2026-11-25T10:30:00+00:00")
    assert next_run("@daily", "sink", "RUNNING", None, now) == ("@daily", "2026-11-26T00:00:00+00:00")
    assert next_run("30m", "source", "RUNNING", last, now) == ("every 30m", "2026-11-25T10:37:30+00:00")
    assert next_run("5m", "source", "RUNNING", last, now) == ("every 5m", now.isoformat())  # overdue: due now
    assert next_run("30m", "source", "RUNNING", None, now) == ("every 30m", now.isoformat())
    assert next_run("@hourly", "source", "PAUSED", last, now) == ("paused", None)
    assert next_run("@continuous", "source", "RUNNING", last, now) == ("@continuous", None)
    assert next_run("none", "source", "RUNNING", last, now) == ("by hand", None)
    assert next_run("@continuous", "sink", "RUNNING", last, now) == ("invalid schedule", None)
