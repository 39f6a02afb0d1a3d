"""Task states follow the connector's target state, as Kafka Connect reports them, in every view."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from connect_core.runtime.cluster.runs import CommitRequest
from connect_core.runtime.context import Runtime
from tests.rest.conftest import Served


def _task_states(api: Served, name: str) -> dict[str, list[str]]:
    """The task states of `name` as each route shows them (Kafka's, RocketMQ's, the lists)."""
    kafka = httpx.get(f"{api.url}/connectors/{name}/status").json()
    expanded = httpx.get(f"{api.url}/connectors", params={"expand": "status"}).json()[name]["status"]
    rocketmq = httpx.get(f"{api.url}/rocketmq/connectors/{name}/status").json()["body"]
    listed = httpx.get(f"{api.url}/connectors/list").json()["body"][name]["status"]
    views: dict[str, Any] = {"kafka": kafka, "expanded": expanded, "rocketmq": rocketmq, "rocketmq list": listed}
    return {view: [t["state"] for t in st["tasks"]] for view, st in views.items()}


def _all(states: list[str]) -> dict[str, list[str]]:
    return {view: states for view in ("kafka", "expanded", "rocketmq", "rocketmq list")}


def test_a_paused_connectors_tasks_report_paused(api: Served, runtime: Runtime, tmp_path: Path) -> None:
    config = {"connector.class": "FileSourceConnector", "file": str(tmp_path / "in.txt"), "topic": "t"}
    httpx.post(f"{api.url}/connectors", json={"name": "src", "config": config}).raise_for_status()
    lease = runtime.runs.acquire("src", 0, lease_seconds=30)
    runtime.runs.commit(lease, CommitRequest())  # a run went well: the task row says RUNNING
    assert _task_states(api, "src") == _all(["RUNNING"])

    httpx.put(f"{api.url}/connectors/src/pause").raise_for_status()
    assert _task_states(api, "src") == _all(["PAUSED"])
    assert httpx.get(f"{api.url}/connectors/src/tasks/0/status").json()["state"] == "PAUSED"

    # A run still going on while paused (it started before the pause) is what it is: RUNNING.
    in_flight = runtime.runs.acquire("src", 0, lease_seconds=30)
    assert _task_states(api, "src") == _all(["RUNNING"])
    runtime.runs.finish(in_flight, "FENCED", None, {})

    httpx.put(f"{api.url}/connectors/src/stop").raise_for_status()
    status = httpx.get(f"{api.url}/connectors/src/status").json()
    assert status["connector"]["state"] == "STOPPED"
    assert status["tasks"] == []  # as Kafka's: a stopped connector has no tasks
    assert httpx.get(f"{api.url}/connectors/src/tasks/0/status").status_code == 404

    httpx.put(f"{api.url}/connectors/src/resume").raise_for_status()
    assert _task_states(api, "src") == _all(["RUNNING"])


def test_a_connector_created_paused_has_paused_tasks_and_a_failed_task_stays_failed(
    api: Served, runtime: Runtime, tmp_path: Path
) -> None:
    config = {"connector.class": "FileSourceConnector", "file": str(tmp_path / "in.txt"), "topic": "t"}
    body = {"name": "src", "config": config, "initial_state": "PAUSED"}
    httpx.post(f"{api.url}/connectors", json=body).raise_for_status()
    assert _task_states(api, "src") == _all(["PAUSED"])

    httpx.put(f"{api.url}/connectors/src/resume").raise_for_status()
    lease = runtime.runs.acquire("src", 0, lease_seconds=30)
    runtime.runs.finish(lease, "FAILED", "boom", {})
    httpx.put(f"{api.url}/connectors/src/pause").raise_for_status()
    assert _task_states(api, "src") == _all(["FAILED"])  # pausing does not hide a failure (as Kafka)
    assert httpx.get(f"{api.url}/connectors/src/status").json()["tasks"][0]["trace"] == "boom"
