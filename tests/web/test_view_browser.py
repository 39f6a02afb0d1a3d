"""The Connect view in headless Chromium, acting through the real REST app over real runs.

One uvicorn server on loopback serves both apps as Airflow's api-server mounts them (the REST
app under `/connect`, the view under `/connect-ui`, so the view's default `../connect` finds
the API); every check of an action reads the result back through the REST API.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import text

from connect_core.rest.app import create_app
from connect_core.rest.auth import bearer_or_loopback
from connect_core.runtime.cluster.runs import CommitRequest
from connect_core.runtime.context import Runtime
from connect_core.runtime.execution.runner import _write_report
from connect_core.runtime.store.states import RunState
from connect_core.web.view import create_view_app
from tests.conftest import file_pair, make_runner
from tests.connectors.jdbc_helpers import (  # noqa: F401  (fixtures)
    Database,
    create_upsert_sink,
    postgres,
    synced,
    target,
)
from tests.rest.conftest import Served, serve

ARTIFACTS = Path(__file__).resolve().parents[1] / "_artifacts"
HOSTILE = 'x"><img src=x onerror=alert(1)>'
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"]


@pytest.fixture
def site(runtime: Runtime) -> Iterator[Served]:
    app = FastAPI()
    app.mount("/connect", create_app(lambda: runtime, auth=[bearer_or_loopback(None)]))
    app.mount("/connect-ui", create_view_app(lambda: runtime, auth=[bearer_or_loopback(None)], poll_ms=1000))
    yield from serve(app)


def _until(check: Callable[[], Any], what: str, timeout: float = 15) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def test_view_acts_through_the_rest_api(runtime: Runtime, spark: Any, tmp_path: Path, site: Served) -> None:
    from playwright.sync_api import sync_playwright

    source, _ = file_pair(runtime, tmp_path)
    runner = make_runner(runtime, spark)
    source.write_text("a\nb\n")
    runner.run("fileSourceConnector", 0)
    runner.run("fileSinkConnector", 0)
    with source.open("a") as f:
        f.write("c\n")
    runner.run("fileSourceConnector", 0)  # the sink is 1 record behind now
    runtime.connectors.create(  # a name stored before the naming rule (new names are [A-Za-z0-9._-])
        HOSTILE, connector_class="FileSourceConnector", type="source", config={}, task_configs=[{}]
    )
    with runtime.engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO connect.task_runs (connector, task_id, generation, state, lease_expires_at, finished_at, "
                "error) VALUES (:c, 0, 1, 'FAILED', now(), now(), :e)"
            ),
            {"c": HOSTILE, "e": "boom <b>bold</b> jdbc:postgresql://app:hunter2@db/x"},
        )
    # A sink's table as a plugin named it (hostile text), committed as the runner records it.
    lease = runtime.runs.acquire("fileSinkConnector", 0, 60)
    report = _write_report({"tables": [{"name": HOSTILE, "version": "<b>7</b>"}]})
    runtime.runs.commit(lease, CommitRequest(stats={"rows": 0, "target": report}))
    rest = httpx.Client(base_url=f"{site.url}/connect", timeout=10)

    def state(name: str) -> str:
        return str(rest.get(f"/connectors/{quote(name, safe='')}/status").json()["connector"]["state"])

    ARTIFACTS.mkdir(exist_ok=True)
    dialogs: list[str] = []  # the browser's own (alert, confirm): the view must open none
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1600, "height": 900})
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(f"{site.url}/connect-ui/")
        page.locator("#connectors tbody[data-rendered='3']").wait_for(timeout=15_000)
        assert page.get_by_text("Connect: 3 connector(s) on 1 Spark pool(s)").is_visible()

        def row(name: str) -> Any:
            return page.locator("#connectors > tbody > tr[data-name]").filter(
                has=page.get_by_role("button", name=name, exact=True)
            )

        # What each connector shows: lag of the sink, a sparkline of the source's runs, pool, DAG link.
        sink, src, bad = row("fileSinkConnector"), row("fileSourceConnector"), row(HOSTILE)
        assert sink.locator("td").nth(4).inner_text() == "1"
        assert src.locator("svg.spark polyline").count() == 1 and "local" in src.inner_text()
        assert (
            src.get_by_role("link", name="DAG").get_attribute("href") == f"{site.url}/dags/connect__fileSourceConnector"
        )

        # What the rows say now: an idle source its next run, the local pool no heartbeat age.
        assert src.locator("td.state").inner_text().startswith("idle · next run in ")
        assert page.locator("#pools tr[data-pool='local']").inner_text().split("\t")[4] == "always up (local)"

        # A run in progress reads "running for N s", and the time ticks between polls that change nothing.
        lease = runtime.runs.acquire("fileSinkConnector", 0, 60, pool="local")
        running = sink.locator("td.state", has_text="running for ")
        running.wait_for(timeout=10_000)
        first = running.inner_text()
        _until(lambda: running.inner_text() != first, "the clock to tick", 5)
        runtime.runs.finish(lease, RunState.ABANDONED, "ended by the test", {})
        sink.locator("td.state", has_text="idle").wait_for(timeout=10_000)

        # A hostile name and error are text: no element, no script ran, the secret is masked.
        assert bad.count() == 1 and page.locator("#connectors img, #connectors b").count() == 0
        bad.get_by_role("button", name=HOSTILE, exact=True).click()
        page.get_by_text("Error history (failed runs, masked)").wait_for()
        # The cause on top, on one line; the trace folded until asked for.
        page.locator("tr.detail .cause", has_text="Cause: boom <b>bold</b>").wait_for()
        trace = page.locator("tr.detail .errors pre", has_text="boom <b>bold</b>")
        assert not trace.is_visible()
        page.locator("tr.detail .errors summary", has_text="full trace").first.click()
        trace.wait_for()
        assert "hunter2" not in page.content()
        # The sink's details name its table at the version its last run left it: text, not markup.
        sink.get_by_role("button", name="fileSinkConnector", exact=True).click()
        written = page.locator("tr[data-detail-of='fileSinkConnector'] .written")
        written.wait_for()
        assert written.inner_text().startswith(f"Tables: {HOSTILE} @ version <b>7</b> (")
        assert page.locator("#connectors img, #connectors b").count() == 0
        page.screenshot(path=str(ARTIFACTS / "connect-view.png"), full_page=True)

        # Search and the state filter, in the page.
        page.fill("#search", "sink")
        _until(lambda: page.locator("#connectors > tbody > tr[data-name]:visible").count() == 1, "the search")
        assert sink.is_visible() and not src.is_visible()
        page.fill("#search", "")
        page.select_option("#state", "FAILED")
        _until(lambda: page.locator("#connectors > tbody > tr[data-name]:visible").count() == 0, "the filter")
        page.select_option("#state", "")

        # Pause, resume, restart: through the REST API, read back from it.
        src.get_by_role("button", name="Pause", exact=True).click()
        _until(lambda: state("fileSourceConnector") == "PAUSED", "PAUSED")
        src.get_by_role("button", name="Resume", exact=True).click()  # the row shows Resume once refreshed
        _until(lambda: state("fileSourceConnector") == "RUNNING", "RUNNING")
        src.get_by_role("combobox", name="more actions").select_option("restart-failed")
        confirm = page.get_by_role("dialog")
        assert confirm.get_by_text("Restart the failed tasks of fileSourceConnector?").is_visible()
        confirm.get_by_role("button", name="Restart failed", exact=True).click()
        page.get_by_text("fileSourceConnector: failed tasks restarted").wait_for()
        # Cancel does nothing: the connector still runs.
        src.get_by_role("combobox", name="more actions").select_option("stop")
        confirm.get_by_role("button", name="Cancel", exact=True).click()
        page.get_by_text("stop fileSourceConnector: cancelled").wait_for()
        assert not confirm.is_visible() and state("fileSourceConnector") == "RUNNING"
        bad.get_by_role("button", name="Pause", exact=True).click()
        _until(lambda: state(HOSTILE) == "PAUSED", "the hostile connector PAUSED")

        # Run now needs Airflow: without it, the API's reason is shown.
        src.get_by_role("button", name="Run now", exact=True).click()
        page.locator("#status.error", has_text="no Airflow configured").wait_for()

        # Reset offsets of a running sink: the page stops it first, then resets (one confirmation).
        assert rest.get("/connectors/fileSinkConnector/offsets").json()["offsets"]
        sink.get_by_role("combobox", name="more actions").select_option("reset")
        assert confirm.get_by_text("Stop fileSinkConnector and reset its offsets?").is_visible()
        confirm.get_by_role("button", name="Stop and reset", exact=True).click()
        _until(lambda: rest.get("/connectors/fileSinkConnector/offsets").json() == {"offsets": []}, "offsets reset")
        assert state("fileSinkConnector") == "STOPPED"

        # A change made elsewhere shows without a reload (the page polls).
        rest.put("/connectors/fileSourceConnector/stop").raise_for_status()
        src.locator("td[data-state='STOPPED']").wait_for(timeout=10_000)
        page.screenshot(path=str(ARTIFACTS / "connect-view-after-actions.png"), full_page=True)
        browser.close()
    assert not dialogs, dialogs  # never alert(1), nor a confirm() a sandboxed iframe would ignore
    assert not errors, errors


def test_a_sink_paused_on_a_schema_change_shows_the_diff_and_is_accepted_in_the_view(
    runtime: Runtime,
    spark: Any,
    postgres: Database,  # noqa: F811
    target: Database,  # noqa: F811
    site: Served,
) -> None:
    from playwright.sync_api import sync_playwright

    postgres.execute("CREATE TABLE orders (id int PRIMARY KEY, qty bigint)", "INSERT INTO orders VALUES (1, 1)")
    runtime.create_connector(
        "src",
        postgres.source_config(
            mode="incrementing", **{"incrementing.column.name": "id", "table.whitelist": "orders", "topic.prefix": ""}
        ),
    )
    create_upsert_sink(runtime, target, "orders", **{"schema.propagation": "propagate_columns"})
    runner = make_runner(runtime, spark)
    synced(runner, "src", "sink")
    # `qty` narrowed and a column added: a breaking change, so the sink pauses on it
    postgres.execute(
        "ALTER TABLE orders ALTER COLUMN qty TYPE int",
        "ALTER TABLE orders ADD COLUMN note text",
        "INSERT INTO orders VALUES (2, 2, 'n')",
    )
    synced(runner, "src")
    assert runner.run("sink", 0).state == "FAILED"
    rest = httpx.Client(base_url=f"{site.url}/connect", timeout=10)
    assert rest.get("/connectors/sink/status").json()["connector"]["state"] == "PAUSED"
    ARTIFACTS.mkdir(exist_ok=True)
    dialogs: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1600, "height": 900})
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(f"{site.url}/connect-ui/")
        page.locator("#connectors tbody[data-rendered='2']").wait_for(timeout=15_000)
        page.get_by_role("button", name="sink", exact=True).click()
        change = page.locator("tr[data-detail-of='sink'] div.schema-change[data-topic='orders']")
        change.wait_for(timeout=10_000)
        text_shown = change.inner_text()
        assert "narrowed from bigint to int" in text_shown and "~ retyped  qty: bigint → int" in text_shown
        assert "+ added    note string" in text_shown
        page.screenshot(path=str(ARTIFACTS / "connect-view-schema-change.png"), full_page=True)
        change.get_by_role("button", name="Accept change", exact=True).click()
        confirm = page.get_by_role("dialog")
        assert confirm.get_by_text("Accept the schema change sink paused on (topic orders)?").is_visible()
        confirm.get_by_role("button", name="Accept", exact=True).click()
        page.get_by_text("sink: schema change accepted, resumed").wait_for()
        _until(lambda: rest.get("/connectors/sink/status").json()["connector"]["state"] == "RUNNING", "RUNNING")
        pending = rest.get("/connectors/sink/schemas").json()["topics"]["orders"]["pending"]
        assert pending["accepted"] is True
        page.locator("tr[data-detail-of='sink'] .schema-change", has_text="accepted: the next run").wait_for()
        browser.close()
    assert not dialogs and not errors, (dialogs, errors)
    # the accepted change goes through on the next run: the column added, the wider qty kept
    assert runner.run("sink", 0).state == "SUCCEEDED"
    assert target.rows("SELECT id, qty FROM orders ORDER BY id") == [(1, 1), (2, 2)]
    assert rest.get("/connectors/sink/schemas").json()["topics"]["orders"]["pending"] is None
