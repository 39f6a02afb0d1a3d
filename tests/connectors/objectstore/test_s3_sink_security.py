"""The S3 sink as an attacker and a careless operator meet it: a local store confined to
`file.allowed.paths`, record values that would climb out of the prefix, credentials that never show,
and every bad key named by the real REST create."""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pyarrow.parquet as pq
import pytest

from connect_core.connectors.objectstore import S3SinkConfig, S3SinkConnector
from connect_core.rest.app import create_app
from connect_core.rest.auth import bearer_or_loopback
from connect_core.runtime.context import Runtime
from connect_core.sdk import LineageDataset
from connect_core.testing.s3 import S3Server
from tests.conftest import make_runner
from tests.connectors.objectstore.conftest import read_all, s3_sink
from tests.connectors.objectstore.test_s3_sink import produce, rows, sink_run
from tests.rest.conftest import Served, serve


@pytest.fixture
def api(rows_runtime: Runtime) -> Iterator[Served]:
    """The REST app over the test's runtime, served by uvicorn on loopback (as tests/rest does)."""
    yield from serve(create_app(lambda: rows_runtime, auth=[bearer_or_loopback(None)]))


def _local_sink(store: str, topic: str, **extra: Any) -> dict[str, Any]:
    return {
        "connector.class": "S3SinkConnector",
        "topics": topic,
        "store.url": store,
        "flush.size": 100,
        **extra,
    }


def test_a_local_directory_store(rows_runtime: Runtime, spark: Any, tmp_path: Path) -> None:
    runner = make_runner(rows_runtime, spark)
    produce(rows_runtime, runner, "t", rows(0, 7))
    lake = tmp_path / "lake"
    rows_runtime.create_connector("sink", _local_sink(f"file://{lake}", "t", **{"flush.size": 4}))
    model = S3SinkConfig.model_validate(rows_runtime.connectors.get("sink").config)
    assert S3SinkConnector().lineage(model) == [
        LineageDataset(f"file://{socket.gethostname()}", f"{lake}/topics/t", "t")
    ]
    sink_run(runner)
    found = sorted(str(p.relative_to(lake)) for p in lake.rglob("*") if p.is_file())
    # no hidden temporary file left beside them
    assert found == [f"topics/t/partition=0/t+0+{o:010d}.snappy.parquet" for o in (0, 4)]
    ids = [i for f in found for i in pq.read_table(lake / f).column("id").to_pylist()]
    assert ids == list(range(7))

    # a link planted under the store since create (pyarrow would follow it): the run writes nothing there
    outside = tmp_path.parent / f"{tmp_path.name}-outside"
    outside.mkdir()
    (lake / "topics" / "t").rename(tmp_path / "moved")
    (lake / "topics" / "t").symlink_to(outside, target_is_directory=True)
    produce(rows_runtime, runner, "t", rows(7, 2))
    failed = runner.run("sink", 0)
    assert failed.state == "FAILED" and "leads out of it (a symbolic link)" in failed.message
    assert list(outside.rglob("*")) == []


def test_a_local_store_outside_the_allowed_paths_writes_nothing(
    rows_runtime: Runtime, spark: Any, api: Served, tmp_path: Path
) -> None:
    runner = make_runner(rows_runtime, spark)
    produce(rows_runtime, runner, "t", rows(0, 3))
    outside = Path("/tmp") / f"connect-s3-outside-{os.getpid()}"
    (tmp_path / "escape").symlink_to(outside)
    with httpx.Client(base_url=api.url, timeout=30) as client:
        # `store.local.path` is a LocalPath: refused at create, as the file connectors' names are
        refused = client.post(
            "/connectors", json={"name": "a", "config": _local_sink("", "t") | {"store.local.path": str(outside)}}
        )
        assert refused.status_code == 400 and "file.allowed.paths" in refused.text, refused.text
        dotted = client.post(
            "/connectors", json={"name": "b", "config": _local_sink(f"file://{tmp_path}/../../etc", "t")}
        )
        assert dotted.status_code == 400 and "store.url" in dotted.text, dotted.text
        # a `file://` URL through a symlink out of the allowed directory: the runtime refuses it
        # before the task exists (the task config's `store.local.path` is confined where it runs)
        created = client.post(
            "/connectors", json={"name": "sink", "config": _local_sink(f"file://{tmp_path}/escape/x", "t")}
        )
        assert created.status_code == 201, created.text
    failed = runner.run("sink", 0)
    assert failed.state == "FAILED" and "file.allowed.paths" in failed.message
    assert not outside.exists()


def test_record_values_cannot_leave_the_prefix(rows_runtime: Runtime, spark: Any, tmp_path: Path) -> None:
    runner = make_runner(rows_runtime, spark)
    hostile = ["../../../../escaped", "a/b", "..", ".", "", "x\x00y", "é ü/%", None]
    produce(rows_runtime, runner, "t", [(i, v) for i, v in enumerate(hostile)], schema="id long, name string")
    lake = tmp_path / "lake"
    config = {"partitioner.class": "FieldPartitioner", "partition.field.name": "name", "format.class": "json"}
    rows_runtime.create_connector("sink", _local_sink(f"file://{lake}", "t", **config))
    sink_run(runner)
    found = sorted(str(p.relative_to(lake)) for p in lake.rglob("*") if p.is_file())
    assert len(found) == len(hostile)  # one directory each: none merged, none lost
    for key in found:
        parts = key.split("/")
        assert len(parts) == 4 and parts[:2] == ["topics", "t"] and parts[2].startswith("name="), key
        assert parts[2] not in ("name=.", "name=..") and "\x00" not in key
    assert "name=..%2F..%2F..%2F..%2Fescaped" in {k.split("/")[2] for k in found}
    assert "name=__HIVE_DEFAULT_PARTITION__" in {k.split("/")[2] for k in found}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["home", "lake"]  # nothing beside the store

    # a value too long for a key's part fails the run, naming the field (not the value)
    produce(rows_runtime, runner, "t", [(99, "v" * 500)], schema="id long, name string")
    failed = runner.run("sink", 0)
    assert failed.state == "FAILED" and "partition field `name`" in failed.message and "v" * 50 not in failed.message


def test_credentials_never_show_in_logs_or_responses(
    rows_runtime: Runtime, spark: Any, api: Served, s3: S3Server, bucket: str, caplog: pytest.LogCaptureFixture
) -> None:
    runner = make_runner(rows_runtime, spark)
    produce(rows_runtime, runner, "t", rows(0, 5))
    secrets = (s3.access_key, s3.secret_key)
    bodies: list[str] = []
    with caplog.at_level(logging.DEBUG), httpx.Client(base_url=api.url, timeout=30) as client:
        created = client.post("/connectors", json={"name": "sink", "config": s3_sink(s3, bucket, "t")})
        assert created.status_code == 201, created.text
        sink_run(runner)
        # an endpoint that refuses: the run fails, its message says where, never with what
        broken = s3_sink(s3, bucket, "t", **{"store.url": "http://127.0.0.1:9", "probe.timeout.ms": 0})
        bodies.append(client.post("/connectors", json={"name": "broken", "config": broken}).text)
        failed = runner.run("broken", 0)
        assert failed.state == "FAILED" and "127.0.0.1:9" in failed.message
        bodies.append(failed.message)
        # and a create whose check fails: the 400 names the bucket, not the keys
        missing = client.post("/connectors", json={"name": "m", "config": s3_sink(s3, "no-such-bucket", "t")})
        assert missing.status_code == 400 and "s3.bucket.name" in missing.text
        bodies.append(missing.text)
        for name in ("sink", "broken"):
            for path in ("", "/config", "/tasks", "/status", "/offsets", "/runs"):
                response = client.get(f"/connectors/{name}{path}")
                assert response.status_code == 200, (path, response.text)
                bodies.append(response.text)
        bodies.append(client.get("/connectors?expand=info&expand=status").text)
    assert read_all(s3.filesystem(), bucket).num_rows == 5
    logged = [r.getMessage() for r in caplog.records] + [str(r.args) for r in caplog.records]
    for secret in secrets:
        assert not [line for line in logged if secret in line]
        assert not [body for body in bodies if secret in body]
    assert "********" in "\n".join(bodies)  # shown masked, as every secret key's value


def test_every_bad_key_is_named_by_the_rest_create(api: Served, s3: S3Server, bucket: str) -> None:
    bad = s3_sink(
        s3,
        "Not_A_Bucket",
        "t",
        **{
            "flush.size": 0,
            "format.class": "io.confluent.connect.s3.format.avro.AvroFormat",
            "parquet.codec": "lzo",
            "partitioner.class": "TimeBasedPartitioner",
            "path.format": "'year'=YYYY/'month'=MMM",
            "timezone": "Mars/Olympus",
            "topics.dir": "../outside",
            "timestamp.extractor": "Sometimes",
            "locale": "no locale",
        },
    )
    with httpx.Client(base_url=api.url, timeout=30) as client:
        response = client.post("/connectors", json={"name": "bad", "config": bad})
        assert response.status_code == 400, response.text
        for key in (
            "s3.bucket.name",
            "flush.size",
            "format.class",
            "parquet.codec",
            "path.format",
            "timezone",
            "topics.dir",
            "timestamp.extractor",
            "locale",
        ):
            assert f"{key}:" in response.json()["message"], (key, response.text)
        assert "`MMM` is not supported" in response.text
        with_password = s3_sink(s3, bucket, "t", **{"store.url": "http://user:hunter2secret@127.0.0.1:1/path"})
        url = client.post("/connectors", json={"name": "u", "config": with_password})
        assert url.status_code == 400 and "store.url" in url.text and "hunter2secret" not in url.text
        # the rules between keys: one at a time, each naming what to add
        for extra, named in (
            ({"partitioner.class": "FieldPartitioner"}, "partition.field.name"),
            ({"partitioner.class": "DailyPartitioner"}, "timezone"),
            ({"timestamp.extractor": "RecordField"}, "timestamp.field"),
            ({"s3.bucket.name": None}, "s3.bucket.name"),
        ):
            config = {k: v for k, v in {**s3_sink(s3, bucket, "t"), **extra}.items() if v is not None}
            response = client.post("/connectors", json={"name": "x", "config": config})
            assert response.status_code == 400 and named in response.text, (extra, response.text)
        assert client.get("/connectors").json() == []
        ok = client.post("/connectors", json={"name": "ok", "config": s3_sink(s3, bucket, "t")})
        assert ok.status_code == 201, ok.text


def test_the_create_time_check_is_bounded(api: Served, s3: S3Server, bucket: str) -> None:
    """An endpoint that refuses, and one that accepts connections and never answers: each a 400 on
    `store.url` within `probe.timeout.ms`."""
    with socket.socket() as silent, httpx.Client(base_url=api.url, timeout=30) as client:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)  # the kernel completes the handshake; nothing ever reads or answers
        for url in ("http://127.0.0.1:9", f"http://127.0.0.1:{silent.getsockname()[1]}"):
            config = s3_sink(s3, bucket, "t", **{"store.url": url, "probe.timeout.ms": 1500})
            started = time.monotonic()
            response = client.post("/connectors", json={"name": "p", "config": config})
            took = time.monotonic() - started
            assert response.status_code == 400 and "store.url" in response.text, response.text
            assert took < 5, (url, took)
            assert s3.secret_key not in response.text and s3.access_key not in response.text
