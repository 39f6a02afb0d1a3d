"""A source's incremental snapshot in the Connect view, in headless Chromium: a real PostgreSQL CDC
source snapshotted mid-read by real runs; the view's buttons send Debezium's signals through the
REST app (read back from the store), and a signal the REST app refuses shows its one-line error."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

from connect_core.rest.app import create_app
from connect_core.rest.auth import bearer_or_loopback
from connect_core.runtime.context import Runtime
from connect_core.runtime.security.roles import Role
from connect_core.runtime.store.incremental import PROGRESS_KEY
from connect_core.runtime.store.signals import MAX_PENDING
from connect_core.sdk.records import SourcePosition
from connect_core.testing.servers import PgServer
from connect_core.web.view import create_view_app
from tests.conftest import make_runner
from tests.connectors.cdc._pipelines import pg_capture
from tests.rest.conftest import Served, serve
from tests.web.test_view_browser import ARTIFACTS, CHROMIUM_ARGS, site  # noqa: F401  (fixture)


def _pending(runtime: Runtime) -> list[tuple[str, dict[str, Any]]]:
    return [(s.type, s.data) for _, s in runtime.connectors.signals.pending("cdc")]


def test_the_view_shows_a_snapshot_and_sends_its_signals(
    pg_db: PgServer,
    runtime: Runtime,
    spark: Any,
    site: Served,  # noqa: F811
) -> None:
    from playwright.sync_api import sync_playwright

    pg_db.execute(
        "CREATE TABLE items (id text PRIMARY KEY, qty int)",
        "INSERT INTO items SELECT 'key-' || lpad(g::text, 4, '0'), g FROM generate_series(1, 100) g",
        "CREATE TABLE other (id int PRIMARY KEY)",
    )
    config = pg_capture(pg_db, "public.items,public.other")
    config |= {"incremental.snapshot.chunk.size": "7", "incremental.snapshot.max.rows.per.run": "30"}
    runtime.create_connector("cdc", config)
    runner = make_runner(runtime, spark)

    def run() -> None:
        assert runner.run("cdc", 0).state == "SUCCEEDED"

    run()  # the slot and the initial snapshot
    ARTIFACTS.mkdir(exist_ok=True)
    dialogs: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1500, "height": 800})
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(f"{site.url}/connect-ui/")
        page.locator("#connectors tbody[data-rendered='1']").wait_for(timeout=15_000)
        page.get_by_role("button", name="cdc", exact=True).click()
        box = page.locator("tr[data-detail-of='cdc'] .snapshot")
        box.get_by_text("No incremental snapshot running.").wait_for()
        confirm = page.get_by_role("dialog")
        status = page.locator("#status")

        # Start one: the dialog asks for the tables, the signal waits for the next run.
        box.get_by_role("button", name="Snapshot tables…").click()
        assert confirm.get_by_text("Snapshot which tables of cdc?").is_visible()
        confirm.get_by_role("textbox").fill("public.items, public.other")
        page.screenshot(path=str(ARTIFACTS / "connect-view-incremental-snapshot-ask.png"))
        confirm.get_by_role("button", name="Snapshot", exact=True).click()
        status.get_by_text("cdc: snapshot of public.items, public.other asked for (the next run starts it)").wait_for()
        data = {"data-collections": ["public.items", "public.other"], "type": "incremental"}
        assert _pending(runtime) == [("execute-snapshot", data)]
        box.get_by_text(
            "Waiting for the connector's next run: execute-snapshot (public.items, public.other)"
        ).wait_for()

        # A run reads the first chunks: the details and the row say how far, from the committed position.
        run()
        progress = box.locator("p.snapshot-progress")
        progress.get_by_text("public.items: 30 rows in").wait_for(timeout=10_000)
        shown = progress.inner_text()
        assert shown.startswith("Reading public.items: 30 rows in 5 chunks read so far · 2 left (1 table queued after")
        assert "public.other" in shown and "committed" in shown
        assert "snapshot reading (30 rows)" in page.locator("tr[data-name='cdc'] td.state").inner_text()
        assert box.locator(".snapshot-pending").count() == 0  # the run took the signal
        assert "key-00" not in page.content()  # the keys it reads between are the user's data
        page.screenshot(path=str(ARTIFACTS / "connect-view-incremental-snapshot.png"), full_page=True)

        # Pause: a signal, no question; the next run takes it and the view says so.
        box.get_by_role("button", name="Pause snapshot").click()
        status.get_by_text("cdc: snapshot pause asked for (the next run takes it)").wait_for()
        assert _pending(runtime) == [("pause-snapshot", {"type": "incremental"})]
        run()
        progress.get_by_text("Paused public.items: 30 rows").wait_for(timeout=10_000)
        assert "snapshot paused (30 rows)" in page.locator("tr[data-name='cdc'] td.state").inner_text()
        page.screenshot(path=str(ARTIFACTS / "connect-view-incremental-snapshot-paused.png"), full_page=True)
        box.get_by_role("button", name="Resume snapshot").click()
        status.get_by_text("cdc: snapshot resume asked for (the next run takes it)").wait_for()
        assert _pending(runtime) == [("resume-snapshot", {"type": "incremental"})]
        run()
        progress.get_by_text("Reading public.items: 60 rows").wait_for(timeout=10_000)

        # Stop asks first: Cancel sends nothing, Stop sends the signal.
        box.get_by_role("button", name="Stop snapshot").click()
        assert confirm.get_by_text("Stop the incremental snapshot of cdc?").is_visible()
        confirm.get_by_role("button", name="Cancel", exact=True).click()
        status.get_by_text("snapshot-stop cdc: cancelled").wait_for()
        assert _pending(runtime) == []
        box.get_by_role("button", name="Stop snapshot").click()
        confirm.get_by_role("button", name="Stop snapshot", exact=True).click()
        status.get_by_text("cdc: snapshot stop asked for (the next run takes it)").wait_for()
        assert _pending(runtime) == [("stop-snapshot", {"type": "incremental"})]
        run()
        box.get_by_text("No incremental snapshot running.").wait_for(timeout=10_000)

        # Refused signals show the REST app's one-line reason: too many tables (400), too many waiting (409).
        row = page.locator("tr[data-name='cdc']")
        row.get_by_role("combobox", name="more actions").select_option("snapshot-start")
        confirm.get_by_role("textbox").fill(" ".join(f"public.t{i}" for i in range(101)))
        confirm.get_by_role("textbox").press("Enter")  # Enter in the answer confirms
        page.locator("#status.error", has_text="must be a list of at most 100 table names").wait_for()
        assert "\n" not in status.inner_text()
        for i in range(MAX_PENDING):
            runtime.connectors.signals.send("cdc", f"s{i}", "pause-snapshot", {})
        box.get_by_role("button", name="Snapshot tables…").click()
        confirm.get_by_role("textbox").fill("public.items")
        confirm.get_by_role("button", name="Snapshot", exact=True).click()
        page.locator("#status.error", has_text="has too many signals waiting for a run").wait_for()
        box.get_by_text(
            f"next run: pause-snapshot \u00d710; {MAX_PENDING - 10} more"
        ).wait_for()  # the first ten, counted
        page.screenshot(path=str(ARTIFACTS / "connect-view-incremental-snapshot-refused.png"), full_page=True)
        browser.close()
    assert not dialogs and not errors, (dialogs, errors)


def test_a_viewer_sees_the_snapshot_and_no_action(runtime: Runtime) -> None:
    """The progress written through the store, as a run commits it; a viewer's page offers no signal."""
    from playwright.sync_api import sync_playwright

    runtime.connectors.create(
        "cdc",
        connector_class="io.debezium.connector.postgresql.PostgresConnector",
        type="source",
        config={},
        task_configs=[{}],
    )
    progress = {"queue": [], "table": "public.items", "paused": False, "chunks": 3, "rows": 2100, "last_key": ["k9"]}
    position = SourcePosition({"server": "srv"}, {"lsn": 1, "snapshot": "done", PROGRESS_KEY: progress})
    runtime.connectors.alter_positions("cdc", set_=[position], remove=[])
    app = FastAPI()
    tokens = {Role.viewer: "v-token", Role.operator: "o-token"}
    app.mount("/connect", create_app(lambda: runtime, auth=[bearer_or_loopback(tokens=tokens)]))
    app.mount("/connect-ui", create_view_app(lambda: runtime, auth=[bearer_or_loopback(tokens=tokens)]))
    served = serve(app)
    viewer_site = next(served)
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
            page = browser.new_page(extra_http_headers={"Authorization": "Bearer v-token"})
            page.goto(f"{viewer_site.url}/connect-ui/")
            page.locator("#connectors tbody[data-rendered='1']").wait_for(timeout=15_000)
            page.get_by_role("button", name="cdc", exact=True).click()
            box = page.locator("tr[data-detail-of='cdc'] .snapshot")
            box.get_by_text("Reading public.items: 2,100 rows in 3 chunks read so far · 1 left").wait_for()
            assert box.get_by_role("button").count() == 0
            assert page.locator("tr[data-name='cdc'] td.actions").inner_text() == ""
            assert "k9" not in page.content()
            browser.close()
    finally:
        next(served, None)
