"""The Connect view's data and page (over ASGI; the live UI test opens it in Chromium)."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient

from connect_core.runtime.context import Runtime
from connect_core.runtime.execution.runner import TaskRunner
from connect_core.web.view import create_view_app
from tests.conftest import file_pair


def test_view_lists_connectors_positions_and_runs(runtime: Runtime, runner: TaskRunner, tmp_path: Path) -> None:
    source, _ = file_pair(runtime, tmp_path)
    source.write_text("a\nb\n")
    runner.run("fileSourceConnector", 0)
    client = TestClient(create_view_app(lambda: runtime))

    data = {c["name"]: c for c in client.get("/overview.json").json()}
    src = data["fileSourceConnector"]
    assert src["positions"][0]["offset"]["position"] == 4
    assert src["runs"][0]["stats"]["rows"] == 2 and src["runs"][0]["duration_s"] > 0
    assert data["fileSinkConnector"]["tasks"][0]["state"] == "UNASSIGNED"

    page = client.get("/").text
    assert "Connect: 2 connector(s)" in page and "connect__fileSourceConnector" in page
    assert "<th>records</th>" in page and "<th>duration s</th>" in page


def test_view_shows_pools_their_health_and_who_runs_what(runtime: Runtime, tmp_path: Path) -> None:
    from sqlalchemy import text

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
    page = client.get("/").text
    assert "on 2 Spark pool(s)" in page and "DEAD" in page and "spark://127.0.0.1:7077" in page
    assert "s3cr3t" not in page and "s3cr3t" not in str(pools)
