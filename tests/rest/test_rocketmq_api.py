"""The seed's RocketMQ Connect quickstart, sent with curl to a real server, copies a file end to end."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import httpx

from connect_core.runtime.context import Runtime
from connect_core.runtime.execution.runner import TaskRunner
from tests.rest.conftest import Served


def curl(*args: str) -> dict:  # type: ignore[type-arg]
    out = subprocess.run(["curl", "-sS", *args], capture_output=True, text=True, check=True, timeout=30).stdout
    return json.loads(out)  # type: ignore[no-any-return]


def test_seed_quickstart_with_curl(api: Served, runtime: Runtime, runner: TaskRunner, tmp_path: Path) -> None:
    base = api.url
    # The seed's commands, in its order. (Its two POST bodies lack the `"` that opens the
    # filename value; with that typo no JSON parser accepts them, see the next test.)
    assert curl("-X", "GET", f"{base}/getClusterInfo")["status"] == 200
    assert curl("-X", "GET", f"{base}/connectors/list") == {"status": 200, "body": {}}
    curl(f"{base}/connectors/stop/all")
    (tmp_path / "test-source-file.txt").write_text(
        "Hello \\r\\nRocketMQ\\r\\n Connect\n"
    )  # what the seed's echo writes
    source = tmp_path / "test-source-file.txt"
    sink = tmp_path / "test-sink-file.txt"
    created = curl(
        "-X",
        "POST",
        "-H",
        "Content-Type: application/json",
        f"{base}/connectors/fileSourceConnector",
        "-d",
        '{"connector.class":"org.apache.rocketmq.connect.file.FileSourceConnector",'
        f'"filename":"{source}","connect.topicname":"fileTopic"}}',
    )
    assert created["status"] == 200 and created["body"]["type"] == "SOURCE"
    curl(
        "-X",
        "POST",
        "-H",
        "Content-Type: application/json",
        f"{base}/connectors/fileSinkConnector",
        "-d",
        '{"connector.class":"org.apache.rocketmq.connect.file.FileSinkConnector",'
        f'"filename":"{sink}","connect.topicnames":"fileTopic"}}',
    )

    assert runner.run("fileSourceConnector", 0).rows == 1
    assert runner.run("fileSinkConnector", 0).rows == 1
    assert sink.read_text() == "Hello \\r\\nRocketMQ\\r\\n Connect\n"

    listed = curl("-X", "GET", f"{base}/connectors/list")["body"]
    assert listed["fileSinkConnector"]["status"]["tasks"][0] == {
        "state": "RUNNING",
        "trace": None,
        "workerId": listed["fileSinkConnector"]["status"]["tasks"][0]["workerId"],
        "id": 0,
    }
    assert listed["fileSourceConnector"]["info"]["type"] == "SOURCE"
    assert listed["fileSinkConnector"]["info"]["config"]["connect.topicnames"] == "fileTopic"

    assert curl(f"{base}/connectors/fileSourceConnector/stop") == {"status": 200, "body": "success"}
    assert curl(f"{base}/connectors/fileSinkConnector/stop")["body"] == "success"
    status = curl(f"{base}/rocketmq/connectors/fileSourceConnector/status")["body"]
    assert status["connector"]["state"] == "STOPPED"  # kept, not deleted as RocketMQ would
    assert curl(f"{base}/connectors/fileSourceConnector/resume")["body"] == "success"
    assert curl(f"{base}/connectors/stop/all")["body"] == "success"


def test_seed_body_with_its_typo_is_a_400(api: Served) -> None:
    resp = httpx.post(
        f"{api.url}/connectors/fileSourceConnector",
        content=b'{"connector.class":"org.apache.rocketmq.connect.file.FileSourceConnector",'
        b'"filename":rocketmq-connect/test-source-file.txt","connect.topicname":"fileTopic"}',
        headers={"Content-Type": "application/json"},
    )
    assert resp.status_code == 400
    assert resp.json()["status"] == 400 and "not valid JSON" in resp.json()["body"]
    assert httpx.get(f"{api.url}/connectors").json() == []


def test_other_rocketmq_routes(api: Served, tmp_path: Path) -> None:
    config = {
        "connector.class": "FileSourceConnector",
        "filename": str(tmp_path / "f"),
        "connect.topicname": "t",
        "db.password": "pw",
    }
    created = httpx.get(f"{api.url}/connectors/q", params={"config": json.dumps(config)}).json()
    assert created["status"] == 200
    assert httpx.get(f"{api.url}/connectors/q").json()["name"] == "q"  # without ?config: Kafka's info
    allocated = httpx.get(f"{api.url}/allocated/connectors").json()["body"]
    assert allocated["q"]["db.password"] == "********"
    assert httpx.get(f"{api.url}/allocated/tasks").json()["body"]["q"][0]["topic"] == "t"
    assert (
        "org.apache.rocketmq.connect.file.FileSourceConnector"
        in httpx.get(f"{api.url}/plugin/list/connectors").json()["body"]
    )
    assert httpx.get(f"{api.url}/plugin/reload").json()["status"] == 200
    assert any(
        d["name"] == "filename"
        for d in httpx.get(f"{api.url}/plugin/config", params={"plugin": "FileSinkConnector"}).json()["body"]
    )
    infos = httpx.post(f"{api.url}/plugin/config/validate", json={"connector.class": "FileSinkConnector"}).json()
    assert infos["body"]["error_count"] == 2
    assert httpx.get(f"{api.url}/rocketmq/connectors/q/config").json()["body"]["db.password"] == "********"
    assert httpx.get(f"{api.url}/rocketmq/connectors/q/tasks/0/status").json()["body"]["id"] == 0
    assert httpx.get(f"{api.url}/rocketmq/connectors/nope/status").json() == {
        "status": 404,
        "body": "connector `nope` not found",
    }
    assert httpx.get(f"{api.url}/connectors/pause/all").json()["body"] == "success"
    assert httpx.get(f"{api.url}/rocketmq/connectors/q/status").json()["body"]["connector"]["state"] == "PAUSED"
