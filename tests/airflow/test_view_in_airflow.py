"""The Connect view inside Airflow, used as an operator would: logged into Airflow's UI as admin,
on the Connect page (`/plugin/connect`, the view in Airflow's sandboxed iframe) at 1400x900, every
action clicked there (the rarer ones under "More…", confirmed in the page's own dialog: the iframe
ignores `window.confirm()`), each effect read back through the REST API under `/connect`.

One connector fails on purpose (its task config broken behind validation's back), so its details
show the cause. Screenshots land next to `test_platform`'s: the view with every action visible, the
failed connector's details, and the Airflow log of a run the view started.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.orm import Session

from connect_core.runtime.context import Runtime
from connect_core.runtime.store.connector_schemas import ConnectorSchemas, Pending, Shape
from tests.airflow.test_platform import ARTIFACTS, Api, _wait, platform  # noqa: F401  (the fixture)
from tests.conftest import file_pair

pytestmark = pytest.mark.spark_submit  # as the other tests of the real platform

VIEWPORT = {"width": 1400, "height": 900}
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
BROKEN = "brokenSource"


class Connect:
    """The REST API inside Airflow, behind Airflow's token: where each effect is read back."""

    def __init__(self, api: Api) -> None:
        self.client = httpx.Client(base_url=f"{api.base}/connect", headers=api.headers, timeout=10)

    def status(self, name: str) -> dict[str, Any]:
        resp = self.client.get(f"/connectors/{name}/status")
        resp.raise_for_status()
        return dict(resp.json())

    def state(self, name: str) -> str:
        return str(self.status(name)["connector"]["state"])

    def task_state(self, name: str) -> str:
        return str(self.status(name)["tasks"][0]["state"])

    def offsets(self, name: str) -> list[Any]:
        return list(self.client.get(f"/connectors/{name}/offsets").json()["offsets"])

    def runs(self, name: str) -> list[dict[str, Any]]:
        return list(self.client.get(f"/connectors/{name}/runs", params={"limit": 20}).json())


def _api(base: str, password: str) -> Api | None:
    """Airflow's API client, None while the api-server is too busy starting to answer in time."""
    try:
        return Api(base, password)
    except httpx.TimeoutException:
        return None


def _active(api: Api, dag_id: str) -> list[str]:
    return [r["dag_run_id"] for r in api.runs(dag_id) if r["state"] in ("queued", "running")]


def _scheduled_run_done(api: Api, dag_id: str) -> bool:
    runs = api.runs(dag_id)
    return any(r["run_type"] == "scheduled" for r in runs) and not _active(api, dag_id)


def _break_task_config(runtime: Runtime, name: str, **changes: object) -> None:
    """Change what the task will run with, behind validation's back (as a broken deployment would)."""
    with runtime.engine.begin() as conn:
        conn.execute(
            text("UPDATE connect.task_configs SET config = config || CAST(:changes AS jsonb) WHERE connector = :name"),
            {"changes": json.dumps(changes), "name": name},
        )


def test_every_action_of_the_view_works_inside_airflow(
    platform: tuple[str, dict[str, str]],  # noqa: F811
    runtime: Runtime,
    tmp_path: Path,
) -> None:
    from playwright.sync_api import sync_playwright

    base, env = platform
    password = (Path(env["CONNECT_HOME"]) / "airflow" / "admin-password").read_text().strip()
    api = _wait("Airflow's token", lambda: _api(base, password), 120)
    rest = Connect(api)

    source, _sink = file_pair(runtime, tmp_path)
    source.write_text("one\ntwo\n")
    (tmp_path / "broken.txt").write_text("never read\n")
    runtime.create_connector(
        BROKEN,
        {
            "connector.class": "FileSourceConnector",
            "filename": str(tmp_path / "broken.txt"),
            "topic": "brokenTopic",
            "retries": 0,
            "precheck": False,  # let the runner meet the error, not the pre-check
            "schedule": "none",
        },
    )
    _break_task_config(runtime, BROKEN, filename="${env:CONNECT_TEST_NEVER_SET}")
    dags = {"connect__fileSourceConnector", "connect__fileSinkConnector", f"connect__{BROKEN}"}
    _wait("the connectors' DAGs", lambda: dags <= api.dag_ids(), 120)
    # A new DAG's first scheduled run (catchup off: the last interval's) starts at once; the DAG runs
    # one run at a time, so the run the view asks for would queue behind it: it is let finish first.
    _wait("the source's first scheduled run", lambda: _scheduled_run_done(api, "connect__fileSourceConnector"), 180)

    ARTIFACTS.mkdir(exist_ok=True)
    browser_dialogs: list[str] = []
    page_errors: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        page = browser.new_page(viewport=VIEWPORT)
        page.on("dialog", lambda d: (browser_dialogs.append(d.message), d.dismiss()))
        # the view's own script errors (Airflow's UI may log its own)
        page.on(
            "console",
            lambda m: m.type == "error" and "/connect-ui/" in m.location.get("url", "") and page_errors.append(m.text),
        )
        page.goto(f"{base}/")
        page.fill("input[name='username']", "admin")
        page.fill("input[name='password']", password)
        page.keyboard.press("Enter")
        page.wait_for_url(lambda url: "login" not in url, timeout=30_000)
        page.goto(f"{base}/plugin/connect")
        frame = page.frame_locator("iframe").first
        frame.get_by_text("Connect: 3 connector(s)").wait_for(timeout=30_000)
        dialog = frame.get_by_role("dialog")

        def row(name: str) -> Any:
            return frame.locator("#connectors > tbody > tr[data-name]").filter(
                has=frame.get_by_role("button", name=name, exact=True)
            )

        def state_cell(name: str) -> Any:
            return row(name).locator("td.state")

        def more(name: str, action: str, question: str, confirm: str) -> None:
            """An action under "More…": chosen, then confirmed in the page's dialog."""
            row(name).get_by_role("combobox", name="more actions").select_option(action)
            dialog.get_by_text(question).wait_for(timeout=5_000)
            dialog.get_by_role("button", name=confirm, exact=True).click()
            dialog.wait_for(state="hidden", timeout=5_000)

        def said(message: str, timeout_s: float = 30) -> None:
            frame.locator("#status", has_text=message).wait_for(timeout=timeout_s * 1000)

        source_row, sink_row, broken_row = row("fileSourceConnector"), row("fileSinkConnector"), row(BROKEN)

        # Every row's actions are in view at 1400x900, inside Airflow's page.
        for r in (source_row, sink_row, broken_row):
            for control in (
                r.get_by_role("button", name="Run now", exact=True),
                r.get_by_role("button", name="Pause", exact=True),
                r.get_by_role("combobox", name="more actions"),
            ):
                box = control.bounding_box()
                assert box is not None and box["x"] + box["width"] <= VIEWPORT["width"], (control, box)
        assert source_row.get_by_role("combobox", name="more actions").locator("option").all_inner_texts() == [
            "More…",
            "Restart failed",
            "Restart all",
            "Stop",
            "Reset offsets",
        ]
        assert state_cell("fileSourceConnector").inner_text().startswith("idle · next run in ")
        view = page.locator("iframe").first.element_handle().content_frame()  # the frame `frame` locates in
        assert view is not None and "/connect-ui/" in view.url
        fits = "document.documentElement.scrollWidth <= document.documentElement.clientWidth"
        assert view.evaluate(fits)  # nothing to scroll sideways to
        page.screenshot(path=str(ARTIFACTS / "airflow-view-actions.png"))

        # Run now: "queued" at once, then "running for N s" while the run runs, then the run it was.
        with source.open("a") as f:
            f.write("three\n")  # something new to read: else Airflow's task skips before Spark starts
        runs_before = {r["run_id"] for r in rest.runs("fileSourceConnector")}
        dag_runs_before = {r["dag_run_id"] for r in api.runs("connect__fileSourceConnector")}
        source_row.get_by_role("button", name="Run now", exact=True).click()
        said("fileSourceConnector: run asked for")
        assert state_cell("fileSourceConnector").inner_text() == "queued"
        broken_row.get_by_role("button", name="Run now", exact=True).click()
        said(f"{BROKEN}: run asked for")
        seen: list[str] = []

        def source_ran() -> bool:
            seen.append(state_cell("fileSourceConnector").inner_text())
            new = [r for r in rest.runs("fileSourceConnector") if r["run_id"] not in runs_before]
            return bool(new) and new[0]["state"] == "SUCCEEDED"

        _wait("the source's run", source_ran, 180)
        running = [s for s in seen if s.startswith("running for ")]
        assert running, seen  # the view said so while the run ran (it polls every 5 s; a run takes longer)
        source_row.locator("td", has_text="SUCCEEDED").wait_for(timeout=15_000)
        (run_now,) = [
            r["dag_run_id"] for r in api.runs("connect__fileSourceConnector") if r["dag_run_id"] not in dag_runs_before
        ]
        assert rest.task_state("fileSourceConnector") == "RUNNING"
        _wait("the DAG run the view started", lambda: not _active(api, "connect__fileSourceConnector"), 60)

        # Run now with nothing new to read: Airflow's task skips, and the row stops saying "queued".
        source_row.get_by_role("button", name="Run now", exact=True).click()
        said("fileSourceConnector: run asked for")
        said("fileSourceConnector: Airflow's run ended (success) without a Connect run: its task skipped", 120)
        state_cell("fileSourceConnector").filter(has_text="idle · next run in ").wait_for(timeout=10_000)

        # The failed connector: flagged in its row, its details start with the cause on one line.
        _wait("the broken connector's failed task", lambda: rest.task_state(BROKEN) == "FAILED", 180)
        assert rest.state(BROKEN) == "RUNNING"  # Kafka's state in the API...
        state_cell(BROKEN).filter(has_text="RUNNING · 1 task failed").wait_for(timeout=15_000)  # ...flagged here
        error_cell = broken_row.locator("td.err")
        assert "ConfigError: config `filename`" in error_cell.inner_text()
        assert "Traceback" not in error_cell.inner_text() and 'File "' not in error_cell.inner_text()
        broken_row.get_by_role("button", name=BROKEN, exact=True).click()
        details = frame.locator(f"tr.detail[data-detail-of='{BROKEN}']")
        details.locator(".cause", has_text="ConfigError: config `filename`").wait_for(timeout=15_000)
        details.get_by_text("Error history (failed runs, masked)").wait_for(timeout=15_000)
        assert not details.locator("pre").first.is_visible()  # the traces are folded
        assert view.evaluate(fits)  # the details too (with the page's scroll bar now)
        details.scroll_into_view_if_needed()
        page.screenshot(path=str(ARTIFACTS / "airflow-view-failed-details.png"))
        broken_row.get_by_role("button", name=BROKEN, exact=True).click()  # closed again

        # Restart failed: the failed task is cleared (and Airflow starts a run of it).
        more(BROKEN, "restart-failed", f"Restart the failed tasks of {BROKEN}?", "Restart failed")
        said(f"{BROKEN}: failed tasks restarted")
        assert rest.task_state(BROKEN) == "UNASSIGNED"

        # Pause and Resume: the connector and its DAG.
        source_row.get_by_role("button", name="Pause", exact=True).click()
        dag = "/dags/connect__fileSourceConnector"
        _wait("PAUSED", lambda: rest.state("fileSourceConnector") == "PAUSED", 15)
        _wait("the DAG paused", lambda: api.get(dag)["is_paused"] is True, 15)  # just after the connector
        source_row.get_by_role("button", name="Resume", exact=True).click()
        _wait("RUNNING again", lambda: rest.state("fileSourceConnector") == "RUNNING", 15)
        _wait("the DAG unpaused", lambda: api.get(dag)["is_paused"] is False, 15)

        # Restart all: every task cleared, and a run started in Airflow.
        dag_runs = len(api.runs("connect__fileSourceConnector"))
        more("fileSourceConnector", "restart-all", "Restart all tasks of fileSourceConnector?", "Restart all")
        said("fileSourceConnector: restarted")
        assert rest.task_state("fileSourceConnector") == "UNASSIGNED"
        assert len(api.runs("connect__fileSourceConnector")) == dag_runs + 1

        # Stop, then Start.
        more("fileSourceConnector", "stop", "Stop fileSourceConnector?", "Stop")
        _wait("STOPPED", lambda: rest.state("fileSourceConnector") == "STOPPED", 15)
        state_cell("fileSourceConnector").filter(has_text="STOPPED").wait_for(timeout=15_000)
        source_row.get_by_role("button", name="Start", exact=True).click()
        _wait("started again", lambda: rest.state("fileSourceConnector") == "RUNNING", 15)

        # Reset offsets of the running sink (its Asset-triggered run committed some): stopped, then reset.
        _wait("the sink's offsets", lambda: rest.offsets("fileSinkConnector"), 180)
        more("fileSinkConnector", "reset", "Stop fileSinkConnector and reset its offsets?", "Stop and reset")
        said("fileSinkConnector: stopped, offsets reset")
        assert rest.state("fileSinkConnector") == "STOPPED" and rest.offsets("fileSinkConnector") == []
        sink_row.get_by_role("button", name="Start", exact=True).click()
        _wait("the sink started again", lambda: rest.state("fileSinkConnector") == "RUNNING", 15)

        # A schema change the sink paused on (as its run records one): the details show the diff, and
        # Accept change, confirmed in the page, accepts it and resumes the sink.
        change = {"added": [{"name": "note", "type": "string", "nullable": True}], "dropped": [], "retyped": []}
        shape = Shape({"columns": [{"name": "line", "type": "string", "nullable": True}], "key": []}, "f" * 64)
        reason = "topic `fileTopic` changed: column `note` (string) added"
        with Session(runtime.engine) as s, s.begin():
            ConnectorSchemas.hold(s, "fileSinkConnector", "fileTopic", None, Pending(shape, change, reason, None))
        runtime.connectors.set_target_state("fileSinkConnector", "PAUSED", reason=f"schema change: {reason}")
        state_cell("fileSinkConnector").filter(has_text="PAUSED").wait_for(timeout=15_000)
        sink_row.get_by_role("button", name="fileSinkConnector", exact=True).click()
        pending = frame.locator("tr[data-detail-of='fileSinkConnector'] div.schema-change[data-topic='fileTopic']")
        pending.filter(has_text="+ added    note string").wait_for(timeout=15_000)
        pending.scroll_into_view_if_needed()
        page.screenshot(path=str(ARTIFACTS / "airflow-view-schema-change.png"))
        pending.get_by_role("button", name="Accept change", exact=True).click()
        dialog.get_by_text("Accept the schema change fileSinkConnector paused on (topic fileTopic)?").wait_for(
            timeout=5_000
        )
        dialog.get_by_role("button", name="Accept", exact=True).click()
        said("fileSinkConnector: schema change accepted, resumed")
        _wait("the sink resumed", lambda: rest.state("fileSinkConnector") == "RUNNING", 15)
        assert runtime.connectors.schemas.of("fileSinkConnector")["fileTopic"].pending.accepted  # type: ignore[union-attr]
        sink_row.get_by_role("button", name="fileSinkConnector", exact=True).click()  # closed again

        # The DAG link leaves the view for Airflow's page of the DAG, in the whole window (the frame's
        # sandbox forbids navigating it: Airflow's router is asked to), and Back returns to the view.
        source_row.get_by_role("link", name="runs", exact=True).click()
        page.wait_for_url(f"{base}/dags/connect__fileSourceConnector/runs", timeout=15_000)
        page.get_by_text(run_now).first.wait_for(timeout=30_000)  # Airflow's runs list, not a frame
        assert page.locator("iframe").count() == 0
        page.go_back()  # a history entry of Airflow's router: no page load
        urls: list[str] = []
        try:
            _wait(
                "back on the Connect page",
                lambda: urls.append(page.url) or urls[-1].startswith(f"{base}/plugin/connect"),
                15,
            )
        except AssertionError:
            raise AssertionError(f"back at {urls[-1]}, not on the Connect page") from None
        frame.get_by_text("Connect: 3 connector(s)").wait_for(timeout=30_000)
        row("fileSourceConnector").get_by_role("link", name="DAG", exact=True).click()
        page.wait_for_url(f"{base}/dags/connect__fileSourceConnector", timeout=15_000)

        # The Airflow log of the run the view started.
        page.goto(f"{base}/dags/connect__fileSourceConnector/runs/{quote(run_now, safe='')}/tasks/task_0")
        page.get_by_text("SUCCEEDED").first.wait_for(timeout=60_000)
        time.sleep(1)  # the log's lines settle
        page.screenshot(path=str(ARTIFACTS / "airflow-task-log.png"))
        browser.close()
    assert not browser_dialogs, browser_dialogs  # the view opens no alert() or confirm()
    assert not page_errors, page_errors
