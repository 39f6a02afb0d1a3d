"""SIGKILL of a real `spark-submit` of the S3 sink part-way through its writes and right before its
commit, then a rerun: every record in exactly one object."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from connect_core.testing.s3 import S3Server
from tests.connectors.objectstore.conftest import objects, read_all, s3_sink
from tests.e2e.test_spark_submit import Cli
from tests.e2e.test_spark_submit import cli as cli  # the fixture

pytestmark = pytest.mark.spark_submit


def test_kill_minus_9_mid_write_and_before_commit_then_rerun(
    cli: Cli, tmp_path: Path, s3: S3Server, bucket: str
) -> None:
    (tmp_path / "in.txt").write_text("".join(f"line {i}\n" for i in range(95)))
    (tmp_path / "source.json").write_text(
        json.dumps({"connector.class": "FileSourceConnector", "filename": "in.txt", "topic": "lines"})
    )
    (tmp_path / "sink.json").write_text(json.dumps(s3_sink(s3, bucket, "lines", **{"flush.size": 10})))
    cli("create", "src", "--config", "source.json")
    cli("create", "sink", "--config", "sink.json")
    assert cli.run("src")["rows"] == 95

    killed = cli("run", "sink", check=False, CONNECT_FAULT="mid_sink")
    assert killed.returncode != 0
    half = objects(s3.filesystem(), bucket)
    assert 0 < len(half) < 10, "killed half-way: some objects written"

    with (tmp_path / "in.txt").open("a") as f:
        f.write("".join(f"line {i}\n" for i in range(95, 103)))
    assert cli.run("src")["rows"] == 8
    killed = cli("run", "sink", check=False, CONNECT_FAULT="before_commit")
    assert killed.returncode != 0
    assert len(objects(s3.filesystem(), bucket)) == 11  # all written, nothing committed

    assert cli.run("sink")["rows"] == 103
    lines = read_all(s3.filesystem(), bucket).column("line").to_pylist()
    assert sorted(lines) == sorted(f"line {i}" for i in range(103)) and len(set(lines)) == 103
    assert sorted(objects(s3.filesystem(), bucket)) == [
        f"topics/lines/partition=0/lines+0+{o:010d}.snappy.parquet" for o in range(0, 103, 10)
    ]
