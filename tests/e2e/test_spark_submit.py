"""End to end through the `connect` CLI and real spark-submit runs of the runner."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.spark_submit

SOURCE_CLASS = "org.apache.rocketmq.connect.file.FileSourceConnector"
SINK_CLASS = "org.apache.rocketmq.connect.file.FileSinkConnector"


class Cli:
    def __init__(self, env: dict[str, str], cwd: Path) -> None:
        self.env, self.cwd = env, cwd

    def __call__(self, *args: str, check: bool = True, **env: str) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            [sys.executable, "-m", "connect_core.cli", *args],
            env={**self.env, **env},
            cwd=self.cwd,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        if check and proc.returncode != 0:
            raise AssertionError(f"connect {' '.join(args)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
        return proc

    def run(self, name: str, **env: str) -> dict:  # type: ignore[type-arg]
        proc = self("run", name, "--output", "json", check=False, **env)
        (result,) = json.loads(proc.stdout)
        return result  # type: ignore[no-any-return]


def _register(cli: Cli, tmp_path: Path) -> tuple[Path, Path]:
    source, sink = tmp_path / "test-source-file.txt", tmp_path / "test-sink-file.txt"
    (tmp_path / "source.json").write_text(
        json.dumps(
            {"connector.class": SOURCE_CLASS, "filename": "test-source-file.txt", "connect.topicname": "fileTopic"}
        )
    )
    (tmp_path / "sink.json").write_text(
        json.dumps({"connector.class": SINK_CLASS, "filename": "test-sink-file.txt", "connect.topicnames": "fileTopic"})
    )
    cli("create", "fileSourceConnector", "--config", "source.json")
    cli("create", "fileSinkConnector", "--config", "sink.json")
    return source, sink


@pytest.fixture
def cli(database_url: str, tmp_path: Path) -> Cli:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONNECT_")}
    env.update(CONNECT_DATABASE_URL=database_url, CONNECT_HOME=str(tmp_path / "home"), SPARK_LOCAL_IP="127.0.0.1")
    return Cli(env, tmp_path)


def test_quickstart_copies_lines_once_and_incrementally(cli: Cli, tmp_path: Path) -> None:
    source, sink = _register(cli, tmp_path)
    source.write_text("Hello \r\nRocketMQ\r\n Connect\n")

    first = cli.run("fileSourceConnector")
    assert (first["state"], first["rows"]) == ("SUCCEEDED", 3)
    assert cli.run("fileSinkConnector")["rows"] == 3
    assert sink.read_text() == "Hello \nRocketMQ\n Connect\n"

    with source.open("a") as f:
        f.write("appended 1\nappended 2\n")
    assert cli.run("fileSourceConnector")["rows"] == 2
    assert cli.run("fileSinkConnector")["rows"] == 2
    assert sink.read_text().splitlines() == ["Hello ", "RocketMQ", " Connect", "appended 1", "appended 2"]

    idle = cli.run("fileSourceConnector")
    assert (idle["state"], idle["rows"], idle["segments"]) == ("SUCCEEDED", 0, 0)

    status = json.loads(cli("status", "fileSinkConnector", "--output", "json").stdout)
    assert status["connector"]["state"] == "RUNNING"
    assert [t["state"] for t in status["tasks"]] == ["RUNNING"]
    assert [r["stats"]["rows"] for r in status["runs"]] == [2, 3]

    # One command, one spark-submit: the source's run, then the sink's, in the same Spark application.
    with source.open("a") as f:
        f.write("together\n")
    both = json.loads(cli("run", "fileSourceConnector", "fileSinkConnector", "--output", "json").stdout)
    assert [(r["connector"], r["state"], r["rows"]) for r in both] == [
        ("fileSourceConnector", "SUCCEEDED", 1),
        ("fileSinkConnector", "SUCCEEDED", 1),
    ]
    assert both[1]["timings"]["spark_session_s"] < 1  # the sink's run found the source's SparkSession
    assert sink.read_text().splitlines()[-1] == "together"


def test_kill_minus_9_before_commit_then_rerun_is_exactly_once(cli: Cli, tmp_path: Path) -> None:
    source, sink = _register(cli, tmp_path)
    source.write_text("".join(f"line {i}\n" for i in range(100)))

    # Source killed after staging its segment, before committing it.
    killed = cli("run", "fileSourceConnector", check=False, CONNECT_FAULT="before_commit")
    assert killed.returncode != 0
    (partition,) = (tmp_path / "home" / "topics").glob("**/fileTopic/partition=0")  # under the store's cluster id
    staged = list(partition.iterdir())
    assert len(staged) == 1, "the killed run left its staged segment behind"
    assert cli.run("fileSourceConnector")["rows"] == 100
    remaining = list(partition.iterdir())
    assert staged[0] not in remaining, "the rerun deleted the killed run's staged files"

    # Sink killed after writing the file, before committing its offsets.
    killed = cli("run", "fileSinkConnector", check=False, CONNECT_FAULT="before_commit")
    assert killed.returncode != 0
    assert len(sink.read_text().splitlines()) == 100  # written, but not committed
    assert cli.run("fileSinkConnector")["rows"] == 100
    assert sink.read_text().splitlines() == [f"line {i}" for i in range(100)]


def test_invalid_config_is_rejected_with_every_problem(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "bad.json").write_text(json.dumps({"connector.class": "NoSuchConnector", "tasks.max": "x"}))
    proc = cli("create", "bad", "--config", "bad.json", check=False)
    assert proc.returncode == 2
    assert "connector.class" in proc.stderr and "FileSourceConnector" in proc.stderr
    assert "tasks.max" in proc.stderr
    assert json.loads(cli("list", "--output", "json").stdout) == []
