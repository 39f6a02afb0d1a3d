"""The Connect view's data and page (over ASGI; the live UI test opens it in Chromium)."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient

from connect_core.runtime.context import Runtime
from connect_core.runtime.runner import TaskRunner
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
