"""What the Connect view shows, read from real runs in a real metadata store: a run in progress,
an error's one-line cause and whether a later run succeeded since, a run's time breakdown, a
sink's tables at their last versions, and pools whose counts add up to the connectors' rows."""

from __future__ import annotations

import json
import traceback
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import text

from connect_core.runtime.cluster.runs import CommitRequest
from connect_core.runtime.context import Runtime
from connect_core.runtime.execution.runner import TaskRunner, _write_report
from connect_core.runtime.store.states import RunState
from connect_core.sdk.connector import WRITE_TABLES
from connect_core.sdk.errors import ConfigError
from connect_core.web._data import RUNS_SHOWN
from connect_core.web.view import create_view_app
from tests.conftest import file_pair


def _document(runtime: Runtime) -> dict[str, Any]:
    """What the page polls."""
    return dict(TestClient(create_view_app(lambda: runtime)).get("/data.json").json())


def _connectors(runtime: Runtime) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in _document(runtime)["connectors"]}


def _break_task_config(runtime: Runtime, name: str, **changes: object) -> None:
    """Change what the task will run with, behind validation's back (as a broken deployment would)."""
    with runtime.engine.begin() as conn:
        conn.execute(
            text("UPDATE connect.task_configs SET config = config || CAST(:changes AS jsonb) WHERE connector = :name"),
            {"changes": json.dumps(changes), "name": name},
        )


def test_a_run_in_progress_reads_as_running_until_it_ends(runtime: Runtime, tmp_path: Path) -> None:
    file_pair(runtime, tmp_path)
    lease = runtime.runs.acquire("fileSourceConnector", 0, 60, pool="local")

    shown = _connectors(runtime)
    (running,) = shown["fileSourceConnector"]["running"]
    assert (running["run_id"], running["task"], running["pool"]) == (lease.run_id, 0, "local")
    assert running["started_at"] and shown["fileSourceConnector"]["last_run"] is None  # none finished yet
    assert shown["fileSinkConnector"]["running"] == []

    # A run whose lease lapsed (its driver died) is not running, whatever its state column says.
    with runtime.engine.begin() as conn:
        conn.execute(
            text("UPDATE connect.task_runs SET lease_expires_at = now() - interval '1 s' WHERE id = :id"),
            {"id": lease.run_id},
        )
    assert _connectors(runtime)["fileSourceConnector"]["running"] == []

    # Once it ended, it is the last run.
    second = runtime.runs.acquire("fileSourceConnector", 0, 60, pool="local")  # takes the lapsed lease over
    assert [r["run_id"] for r in _connectors(runtime)["fileSourceConnector"]["running"]] == [second.run_id]
    runtime.runs.finish(second, RunState.ABANDONED, "stopped by the test", {})
    source = _connectors(runtime)["fileSourceConnector"]
    assert source["running"] == [] and source["last_run"]["run_id"] == second.run_id


def test_an_error_shows_its_cause_on_one_line_and_is_past_once_a_later_run_succeeded(
    runtime: Runtime, runner: TaskRunner, tmp_path: Path
) -> None:
    (tmp_path / "in.txt").write_text("a line\n")
    good = {"connector.class": "FileSourceConnector", "filename": str(tmp_path / "in.txt"), "topic": "t"}
    runtime.create_connector("flaky", {**good, "retries": 0, "precheck": False})
    _break_task_config(runtime, "flaky", filename="${env:CONNECT_TEST_NEVER_SET}")
    assert runner.run("flaky", 0).state == "FAILED"

    flaky = _connectors(runtime)["flaky"]
    error, (task,) = flaky["last_error"], flaky["tasks"]
    assert "Traceback" in (runtime.connectors.status("flaky").tasks[0].trace or "")  # what was recorded
    assert error["cause"].startswith("ConfigError: config `filename`")
    assert "\n" not in error["cause"] and 'File "' not in error["cause"] and "^^^" not in error["cause"]
    assert error["past"] is False and error["succeeded_since"] is None
    assert task["state"] == "FAILED" and task["cause"] == error["cause"]
    client = TestClient(create_view_app(lambda: runtime))
    (history,) = client.get("/errors.json", params={"connector": "flaky"}).json()
    assert history["cause"] == error["cause"] and history["past"] is False
    assert history["error"].startswith("Traceback") and error["cause"].split(": ", 1)[1] in history["error"]

    _break_task_config(runtime, "flaky", filename=good["filename"])
    assert runner.run("flaky", 0).state == "SUCCEEDED"

    flaky = _connectors(runtime)["flaky"]
    assert flaky["last_error"]["run_id"] == error["run_id"] and flaky["last_error"]["past"] is True
    assert flaky["last_error"]["succeeded_since"] == flaky["last_run"]["finished_at"]
    assert flaky["tasks"][0]["state"] == "RUNNING" and flaky["tasks"][0]["cause"] is None
    (history,) = client.get("/errors.json", params={"connector": "flaky"}).json()
    assert history["past"] is True
    # The last run's time breakdown, from its stats.
    timings = flaky["last_run"]["timings"]
    assert {"spark_session_s", "work_s", "commit_s"} <= set(timings) and all(v >= 0 for v in timings.values())


def test_the_cause_of_a_chained_error_is_the_outermost_exception_on_one_line(runtime: Runtime, tmp_path: Path) -> None:
    file_pair(runtime, tmp_path)
    try:
        try:
            int("lots")
        except ValueError as exc:
            raise ConfigError("config `batch.max.bytes`: not a number\n(set it to an integer)") from exc
    except ConfigError:
        trace = traceback.format_exc() + "  jdbc:postgresql://app:hunter2@db/x"
    assert trace.count("Traceback") == 2
    lease = runtime.runs.acquire("fileSourceConnector", 0, 60)
    runtime.runs.finish(lease, RunState.FAILED, trace, {})  # as the runner records a failed run

    error = _connectors(runtime)["fileSourceConnector"]["last_error"]
    assert error["cause"].startswith("ConfigError: config `batch.max.bytes`: not a number (set it to an integer)")
    assert "hunter2" not in error["cause"] and "\n" not in error["cause"]
    client = TestClient(create_view_app(lambda: runtime))
    (history,) = client.get("/errors.json", params={"connector": "fileSourceConnector"}).json()
    assert history["cause"] == error["cause"] and "ValueError: invalid literal" in history["error"]

    from connect_core.web._data import one_line_cause

    assert (
        one_line_cause("org.apache.spark.SparkException: Job aborted. a.b: c") == "SparkException: Job aborted. a.b: c"
    )
    assert one_line_cause("boom. it failed: x") == "boom. it failed: x"  # a message: no class to shorten
    assert one_line_cause("x" * 5000) == "x" * 299 + "…"
    assert one_line_cause(None) is None and one_line_cause("") is None


def _sink_run(runtime: Runtime, name: str, task: int, tables: Any, state: RunState = RunState.SUCCEEDED) -> int:
    """A run of the sink's task whose `write` reported `tables`, recorded as the runner records it."""
    lease = runtime.runs.acquire(name, task, 60)
    stats = {"rows": 3, "target": _write_report({"rows_written": 3, WRITE_TABLES: tables})}
    if state == RunState.SUCCEEDED:
        runtime.runs.commit(lease, CommitRequest(stats=stats))
    else:
        runtime.runs.finish(lease, state, "boom", stats)
    return lease.run_id


def test_a_sink_shows_each_table_at_the_version_its_tasks_last_committed(runtime: Runtime, tmp_path: Path) -> None:
    """Per task, the newest committed run that reported tables; merged over the tasks, one entry per
    table: the newest run's version, and when that run ended. A failed run's tables are not shown."""
    file_pair(runtime, tmp_path)
    runtime.connectors.create(
        "lake", connector_class="IcebergSinkConnector", type="sink", config={}, task_configs=[{}, {}]
    )
    secret_path = "abfss://lake:hunter2@account.dfs.core.windows.net/events"
    _sink_run(runtime, "lake", 0, [{"name": "shop.renamed", "version": "1"}])  # task 0 wrote another table since
    items = _sink_run(runtime, "lake", 0, [{"name": "shop.orders", "version": 1}, {"name": "shop.items", "version": 7}])
    orders = _sink_run(
        runtime, "lake", 1, [{"name": "shop.orders", "version": "2"}, {"name": secret_path, "version": 4}]
    )
    _sink_run(runtime, "lake", 0, [])  # nothing new to write: the version task 0 left stands
    _sink_run(runtime, "lake", 1, [{"name": "shop.orders", "version": "99"}], RunState.FAILED)  # discarded
    with runtime.engine.connect() as conn:
        ended = {r.id: r.finished_at for r in conn.execute(text("SELECT id, finished_at FROM connect.task_runs"))}

    shown = _connectors(runtime)
    tables = shown["lake"]["tables"]
    assert [(t["name"], t["version"], t["run_id"]) for t in tables[1:]] == [
        ("shop.items", "7", items),
        ("shop.orders", "2", orders),
    ]
    # A URI's credential is masked (how depends on the secrets this process has seen: see `masking`).
    masked = tables[0]
    assert (masked["version"], masked["run_id"]) == ("4", orders) and masked["name"].startswith("abfss://")
    assert masked["name"].endswith("account.dfs.core.windows.net/events") and "hunter2" not in masked["name"]
    assert [t["at"] for t in tables] == [ended[orders].isoformat(), ended[items].isoformat(), ended[orders].isoformat()]
    assert "hunter2" not in json.dumps(shown)
    # A sink that reports no tables lists none; a source has none to list.
    assert shown["fileSinkConnector"]["tables"] == [] and shown["fileSourceConnector"]["tables"] is None

    # They are read with the runs the row shows (`RUNS_SHOWN`): a table written before those is not listed.
    for _ in range(RUNS_SHOWN):
        _sink_run(runtime, "lake", 0, [])
    assert _connectors(runtime)["lake"]["tables"] == []


def test_a_sinks_tables_of_another_shape_are_left_out_or_cut(runtime: Runtime) -> None:
    """Stats another writer left (not the runner's `_write_report`): odd entries are skipped, long text cut."""
    runtime.connectors.create("odd", connector_class="DeltaSinkConnector", type="sink", config={}, task_configs=[{}])
    hostile = "<img src=x onerror=alert(1)></script><script>alert(2)</script>"
    reported = [
        1,
        None,
        {"name": 5},
        {"name": ""},
        {"name": hostile, "version": {"a": 1}},
        {"name": "n" * 5000, "version": "v" * 500},
    ]
    lease = runtime.runs.acquire("odd", 0, 60)
    runtime.runs.commit(lease, CommitRequest(stats={"target": {WRITE_TABLES: reported}}))

    tables = _connectors(runtime)["odd"]["tables"]
    assert [(t["name"], t["version"]) for t in tables] == [(hostile, ""), ("n" * 300, "v" * 40)]
    page = TestClient(create_view_app(lambda: runtime)).get("/").text
    assert "<img" not in page and "<script>alert" not in page  # embedded as JSON escapes, not markup


def test_the_pools_counts_agree_with_the_connectors_rows(runtime: Runtime, tmp_path: Path) -> None:
    file_pair(runtime, tmp_path)
    runtime.create_connector(
        "third", {"connector.class": "FileSinkConnector", "filename": str(tmp_path / "o"), "topics": "fileTopic"}
    )
    runtime.pools.add("east", "spark://127.0.0.1:7077", capacity=2)
    # The sink and the third connector's task move to `east` (as a rebalance would), then `east` is
    # removed before any rebalance moved them back: they are still assigned there.
    with runtime.engine.begin() as conn:
        conn.execute(
            text(
                "UPDATE connect.assignments SET pool = 'east' "
                "WHERE connector = 'fileSinkConnector' OR (connector = 'third' AND task_id = 0)"
            )
        )
    runtime.pools.remove("east")

    document = _document(runtime)
    pools = {p["name"]: p for p in document["pools"]}
    connectors = document["connectors"]
    # Every pool a connector's row names is a row of the pools table...
    assert {name for c in connectors for name in c["pools"]} <= set(pools)
    assert pools["east"]["registered"] is False and pools["east"]["alive"] is False
    # ...and their counts add up to what the connectors' rows say is placed.
    assert sum(p["connectors"] for p in pools.values()) == sum(1 for c in connectors if c["pools"]) == 3
    assert sum(p["tasks"] for p in pools.values()) == sum(len(c["tasks"]) for c in connectors) == 3
    assert (pools["local"]["connectors"], pools["local"]["tasks"]) == (2, 1)
    assert (pools["east"]["connectors"], pools["east"]["tasks"]) == (1, 2)
    by_name = {c["name"]: c for c in connectors}
    assert by_name["third"]["pools"] == ["east", "local"] and by_name["fileSinkConnector"]["pools"] == ["east"]
    # The local pool is the runner's own machine: always up, no heartbeat age to show.
    assert pools["local"]["always_up"] is True and pools["local"]["alive"] is True
    assert pools["local"]["seconds_since_heartbeat"] is None
    # /pools.json counts the same way, and names the work.
    listed = {p["name"]: p for p in TestClient(create_view_app(lambda: runtime)).get("/pools.json").json()}
    assert listed["east"]["connectors"] == 1 and sorted(listed["east"]["running"]) == [
        "fileSinkConnector",
        "fileSinkConnector-0",
        "third-0",
    ]


def test_a_huge_error_is_stored_as_its_head_and_tail_and_shown_from_its_tail(runtime: Runtime, tmp_path: Path) -> None:
    """A trace of every record of a batch: stored as its head and tail (the poll reads every
    connector's last error), the cause still found at its end, masked."""
    from connect_core.runtime.cluster.runs import MAX_ERROR_CHARS

    file_pair(runtime, tmp_path)
    frames = "".join(f'  File "/x/mod{i}.py", line {i}, in f\n    call()\n' for i in range(8000))
    error = (
        "Traceback (most recent call last):\n"
        + frames
        + "connect_core.sdk.errors.DataError: row 7 refused by jdbc:postgresql://app:hunter2@db:5432/x\n"
    )
    assert len(error) > 4 * MAX_ERROR_CHARS
    lease = runtime.runs.acquire("fileSourceConnector", 0, 60, pool="local")
    runtime.runs.finish(lease, RunState.FAILED, error, {})

    with runtime.engine.connect() as conn:
        stored = conn.execute(text("SELECT error FROM connect.task_runs WHERE id = :id"), {"id": lease.run_id}).scalar()
    assert len(stored) < MAX_ERROR_CHARS + 100 and stored.startswith("Traceback") and " characters cut …" in stored
    assert stored.endswith(error[-1000:])
    last = _connectors(runtime)["fileSourceConnector"]["last_error"]
    # (other tests of this process may have registered secrets the masker hides here too)
    assert last["cause"].startswith("DataError: row 7 refused by jdbc:") and last["cause"].endswith("@db:5432/x")
    assert "hunter2" not in last["cause"] and "****" in last["cause"]
    assert len(last["error"]) <= 601 and "hunter2" not in last["error"]
    (history,) = (
        TestClient(create_view_app(lambda: runtime))
        .get("/errors.json", params={"connector": "fileSourceConnector"})
        .json()
    )
    assert len(history["error"]) <= 16001 and "hunter2" not in history["error"] and history["error"].startswith("…")
