"""Pause and resume while Airflow cannot be reached: the connector's state changes, and the answer says
its DAG did not follow (a `Connect-Warning` header: Kafka's 202 has no body), over the REST API, the
CLI through it and the view's calls alike."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI

from connect_core.rest.app import create_app
from connect_core.rest.auth import bearer_or_loopback
from connect_core.rest.client import RestClient
from connect_core.runtime.context import Runtime
from connect_core.runtime.settings import Settings
from connect_core.web.view import create_view_app
from tests.rest.conftest import Served, serve
from tests.web.test_view_browser import CHROMIUM_ARGS


@pytest.fixture
def no_airflow(database_url: str, tmp_path: Path) -> Iterator[Served]:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    settings = Settings(
        database_url=database_url,
        home=tmp_path / "home",
        airflow_url=f"http://127.0.0.1:{port}",
        airflow_password="af-Secret-9",
        file_allowed_paths=str(tmp_path),
    )
    runtime = Runtime.open(settings)
    (tmp_path / "in.txt").write_text("a\n")
    runtime.create_connector(
        "src", {"connector.class": "FileSourceConnector", "file": str(tmp_path / "in.txt"), "topic": "t"}
    )
    site = FastAPI()  # as Airflow's api-server mounts them
    site.mount("/connect", create_app(lambda: runtime, auth=[bearer_or_loopback(None)]))
    site.mount("/connect-ui", create_view_app(lambda: runtime, auth=[bearer_or_loopback(None)], poll_ms=1000))
    gen = serve(site)
    yield next(gen)
    next(gen, None)
    runtime.close()


def test_pause_and_resume_say_the_dag_was_not_updated(no_airflow: Served, monkeypatch: pytest.MonkeyPatch) -> None:
    with httpx.Client(base_url=f"{no_airflow.url}/connect", timeout=60) as http:
        paused = http.put("/connectors/src/pause")
        assert paused.status_code == 202 and paused.content == b""
        warning = paused.headers["Connect-Warning"]
        assert "127.0.0.1" in warning and "af-Secret-9" not in warning
        assert http.get("/connectors/src/status").json()["connector"]["state"] == "PAUSED"  # paused all the same
        resumed = http.put("/connectors/src/resume")
        assert resumed.status_code == 202 and "Connect-Warning" in resumed.headers
        assert http.get("/connectors/src/status").json()["connector"]["state"] == "RUNNING"
        rocketmq = http.get("/connectors/src/pause")  # RocketMQ's route, same answer
        assert rocketmq.json()["body"] == "success" and "Connect-Warning" in rocketmq.headers
        assert http.put("/connectors/src/stop").headers.get("Connect-Warning") is None  # no DAG call to fail

    client = RestClient(f"{no_airflow.url}/connect")
    try:
        assert client.set_state("src", "PAUSED") == paused.headers["Connect-Warning"]
    finally:
        client.close()


def test_the_view_shows_the_warning(no_airflow: Served) -> None:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.goto(f"{no_airflow.url}/connect-ui/")
        page.get_by_role("button", name="Pause", exact=True).click()
        page.locator("#status.error", has_text="src: paused (warning: its DAG was not updated: ").wait_for(
            timeout=30_000
        )
        assert "af-Secret-9" not in page.content()
        page.get_by_role("button", name="Resume", exact=True).wait_for(timeout=15_000)  # the row shows PAUSED
        browser.close()
