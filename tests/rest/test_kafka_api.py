"""Kafka Connect's REST API over real HTTP, driven by a Kafka Connect client library from PyPI."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from kafka_connect import KafkaConnect
from requests import HTTPError

from connect_core.runtime.context import Runtime
from connect_core.runtime.execution.runner import TaskRunner
from tests.conftest import file_pair
from tests.rest.conftest import Served


def _source(tmp_path: Path, name: str = "src", **extra: object) -> dict[str, object]:
    return {
        "name": name,
        "config": {"connector.class": "FileSourceConnector", "file": str(tmp_path / "in.txt"), "topic": "t", **extra},
    }


def test_client_library_drives_the_lifecycle(api: Served, runtime: Runtime, tmp_path: Path) -> None:
    kc = KafkaConnect(url=api.url)
    assert kc.get_cluster_info()["version"]
    created = kc.create_connector(_source(tmp_path, **{"connection.password": "hunter2"}))
    assert created["name"] == "src" and created["type"] == "source"
    assert created["tasks"] == [{"connector": "src", "task": 0}]

    assert kc.list_connectors() == ["src"]
    assert kc.get_connector_status("src")["connector"]["state"] == "RUNNING"
    kc.pause_connector("src")
    assert kc.get_connector_status("src")["connector"]["state"] == "PAUSED"
    kc.resume_connector("src")
    assert kc.get_connector_status("src")["connector"]["state"] == "RUNNING"
    assert kc.list_connector_topics("src") == {"src": {"topics": []}}  # active topics: none before a run
    assert {p["class"].rsplit(".", 1)[-1] for p in kc.list_connector_plugins()} >= {"FileSourceConnector"}

    for shown in (
        kc.get_connector("src"),
        kc.get_connector_config("src"),
        kc.list_connector_tasks("src"),
        kc.list_connectors(expand="info"),
    ):
        assert "hunter2" not in repr(shown)

    kc.delete_connector("src")
    assert kc.list_connectors() == []
    with pytest.raises(HTTPError):
        kc.get_connector_status("src")


def test_active_topics_follow_the_runs_and_reset(
    api: Served, runtime: Runtime, runner: TaskRunner, tmp_path: Path
) -> None:
    """Kafka's KIP-558: the topics a connector wrote or read since its creation or the last reset."""
    kc = KafkaConnect(url=api.url)
    source, _ = file_pair(runtime, tmp_path)
    assert kc.list_connector_topics("fileSourceConnector") == {"fileSourceConnector": {"topics": []}}
    source.write_text("a\n")
    assert runner.run("fileSourceConnector", 0).state == "SUCCEEDED"
    assert runner.run("fileSinkConnector", 0).state == "SUCCEEDED"
    assert kc.list_connector_topics("fileSourceConnector") == {"fileSourceConnector": {"topics": ["fileTopic"]}}
    assert kc.list_connector_topics("fileSinkConnector") == {"fileSinkConnector": {"topics": ["fileTopic"]}}

    kc.reset_connector_topics("fileSourceConnector")
    assert kc.list_connector_topics("fileSourceConnector") == {"fileSourceConnector": {"topics": []}}
    assert kc.list_connector_topics("fileSinkConnector")["fileSinkConnector"]["topics"] == ["fileTopic"]  # its own
    assert runner.run("fileSourceConnector", 0).state == "SUCCEEDED"  # nothing new: no segment, no topic used
    assert kc.list_connector_topics("fileSourceConnector") == {"fileSourceConnector": {"topics": []}}
    with source.open("a") as f:
        f.write("b\n")
    assert runner.run("fileSourceConnector", 0).state == "SUCCEEDED"
    assert kc.list_connector_topics("fileSourceConnector") == {"fileSourceConnector": {"topics": ["fileTopic"]}}
    assert httpx.put(f"{api.url}/connectors/nope/topics/reset").status_code == 404


def test_offsets_get_alter_reset(api: Served, runtime: Runtime, runner: TaskRunner, tmp_path: Path) -> None:
    (tmp_path / "in.txt").write_text("a\nb\n")
    httpx.post(f"{api.url}/connectors", json=_source(tmp_path)).raise_for_status()
    runner.run("src", 0)
    offsets = httpx.get(f"{api.url}/connectors/src/offsets").json()["offsets"]
    assert offsets[0]["offset"]["position"] == 4

    refused = httpx.delete(f"{api.url}/connectors/src/offsets")
    assert refused.status_code == 400 and "STOPPED" in refused.json()["message"]

    assert httpx.put(f"{api.url}/connectors/src/stop").status_code == 204
    partition = offsets[0]["partition"]
    altered = httpx.patch(
        f"{api.url}/connectors/src/offsets", json={"offsets": [{"partition": partition, "offset": {"position": 2}}]}
    )
    assert altered.status_code == 200, altered.text
    assert httpx.get(f"{api.url}/connectors/src/offsets").json()["offsets"][0]["offset"] == {"position": 2}

    assert httpx.delete(f"{api.url}/connectors/src/offsets").status_code == 200
    assert httpx.get(f"{api.url}/connectors/src/offsets").json() == {"offsets": []}
    httpx.put(f"{api.url}/connectors/src/resume")
    assert runner.run("src", 0).rows == 2  # reset: the next run starts over


def test_sink_offsets_use_kafka_coordinates(api: Served, runtime: Runtime, tmp_path: Path) -> None:
    httpx.post(
        f"{api.url}/connectors",
        json={
            "name": "snk",
            "initial_state": "STOPPED",
            "config": {"connector.class": "FileSinkConnector", "file": str(tmp_path / "o.txt"), "topics": "t"},
        },
    ).raise_for_status()
    body = {"offsets": [{"partition": {"kafka_topic": "t", "kafka_partition": 0}, "offset": {"kafka_offset": 7}}]}
    assert httpx.patch(f"{api.url}/connectors/snk/offsets", json=body).status_code == 200
    assert httpx.get(f"{api.url}/connectors/snk/offsets").json() == body


def test_errors_have_kafka_codes_and_bodies(api: Served, tmp_path: Path) -> None:
    missing = httpx.get(f"{api.url}/connectors/nope/status")
    assert missing.status_code == 404 and missing.json()["error_code"] == 404 and "nope" in missing.json()["message"]

    bad = httpx.post(
        f"{api.url}/connectors", json={"name": "x", "config": {"connector.class": "Nope", "tasks.max": "y"}}
    )
    assert bad.status_code == 400
    assert "connector.class" in bad.json()["message"] and "tasks.max" in bad.json()["message"]

    malformed = httpx.post(
        f"{api.url}/connectors", content=b'{"name": "x", "config": {', headers={"content-type": "application/json"}
    )
    assert malformed.status_code == 400 and "JSON" in malformed.json()["message"]

    unknown_field = httpx.post(f"{api.url}/connectors", json={**_source(tmp_path), "colour": "red"})
    assert unknown_field.status_code == 400 and "colour" in unknown_field.json()["message"]

    assert httpx.post(f"{api.url}/connectors", json=_source(tmp_path)).status_code == 201
    again = httpx.post(f"{api.url}/connectors", json=_source(tmp_path))
    assert again.status_code == 409 and again.json()["error_code"] == 409
    assert httpx.get(f"{api.url}/connectors").json() == ["src"]  # nothing half-created


def test_put_patch_config_and_validate(api: Served, tmp_path: Path) -> None:
    source = _source(tmp_path)["config"]
    assert httpx.put(f"{api.url}/connectors/src/config", json=source).status_code == 201
    assert httpx.put(f"{api.url}/connectors/src/config", json=source).status_code == 200
    patched = httpx.patch(f"{api.url}/connectors/src/config", json={"topic": "t2", "api.token": "s3cr3t"}).json()
    assert patched["config"]["topic"] == "t2" and patched["config"]["api.token"] == "********"

    infos = httpx.put(
        f"{api.url}/connector-plugins/FileSourceConnector/config/validate",
        json={"connector.class": "FileSourceConnector", "topic": "x"},
    ).json()
    assert infos["error_count"] == 1
    assert [c["value"]["name"] for c in infos["configs"] if c["value"]["errors"]] == ["filename"]
    definitions = httpx.get(f"{api.url}/connector-plugins/FileSourceConnector/config").json()
    assert "filename" in {d["name"] for d in definitions}
    expanded = httpx.get(f"{api.url}/connectors", params=[("expand", "status"), ("expand", "info")]).json()
    assert set(expanded["src"]) == {"status", "info"}


def test_restart_clears_failed_tasks(api: Served, runtime: Runtime, runner: TaskRunner, tmp_path: Path) -> None:
    httpx.post(f"{api.url}/connectors", json=_source(tmp_path)).raise_for_status()
    assert runner.run("src", 0).state == "FAILED"  # the file does not exist
    assert httpx.get(f"{api.url}/connectors/src/tasks/0/status").json()["state"] == "FAILED"
    restarted = httpx.post(f"{api.url}/connectors/src/restart", params={"includeTasks": "true", "onlyFailed": "true"})
    assert restarted.status_code == 202
    assert restarted.json()["tasks"][0]["state"] == "UNASSIGNED"
    assert httpx.post(f"{api.url}/connectors/src/tasks/0/restart").status_code == 204
    assert httpx.post(f"{api.url}/connectors/src/tasks/5/restart").status_code == 404


def test_openapi_is_served(api: Served) -> None:
    spec = httpx.get(f"{api.url}/openapi.json").json()
    assert "/connectors/{connector}/offsets" in spec["paths"] and "/getClusterInfo" in spec["paths"]
