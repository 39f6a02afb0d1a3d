"""The S3 sink on a warm pool (each run a Spark Connect client): the same objects, from the driver
and from the server's Python workers."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from connect_core.connectors.objectstore import sink as sink_module
from connect_core.runtime.context import Runtime
from connect_core.testing.s3 import S3Server
from tests.conftest import make_runner
from tests.connectors.objectstore.conftest import objects, read_all, s3_sink

pytestmark = pytest.mark.spark_connect


@pytest.fixture(autouse=True)
def _connect_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    """This process is a Spark Connect client for this test only (as tests/runtime/execution's)."""
    monkeypatch.setenv("SPARK_CONNECT_MODE_ENABLED", "1")


@pytest.fixture
def connect_factory(spark_connect_url: str) -> Iterator[Callable[[], Any]]:
    from pyspark.sql import SparkSession

    made: list[Any] = []

    def factory() -> Any:
        session = SparkSession.builder.remote(spark_connect_url).create()
        made.append(session)
        return session

    yield factory
    for session in made:
        session.stop()


@pytest.mark.parametrize("where", ["driver", "executors"])
def test_a_warm_pool_writes_the_same_objects(
    runtime: Runtime,
    connect_factory: Callable[[], Any],
    s3: S3Server,
    bucket: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    where: str,
) -> None:
    runner = make_runner(runtime, None, spark_factory=connect_factory)
    (tmp_path / "in.txt").write_text("".join(f"line {i}\n" for i in range(25)))
    runtime.create_connector(
        "src", {"connector.class": "FileSourceConnector", "filename": str(tmp_path / "in.txt"), "topic": "lines"}
    )
    runtime.create_connector("sink", s3_sink(s3, bucket, "lines", **{"flush.size": 10}))
    assert runner.run("src", 0).rows == 25
    if where == "executors":
        monkeypatch.setattr(sink_module, "driver_max_rows", lambda spark: 10)
    result = runner.run("sink", 0)
    assert (result.state, result.rows) == ("SUCCEEDED", 25), result.message
    assert sorted(objects(s3.filesystem(), bucket)) == [
        f"topics/lines/partition=0/lines+0+{o:010d}.snappy.parquet" for o in (0, 10, 20)
    ]
    assert read_all(s3.filesystem(), bucket).column("line").to_pylist() == [f"line {i}" for i in range(25)]
