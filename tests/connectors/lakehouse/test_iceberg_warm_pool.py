"""The Iceberg sink on a warm pool (each run a Spark Connect client): the topic's records reach
the driver as Arrow without a classic SparkSession, and land the same."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from connect_core.runtime.context import Runtime
from tests.conftest import make_runner
from tests.connectors.jdbc_helpers import Database, target  # noqa: F401  (fixtures)
from tests.connectors.lakehouse.iceberg_helpers import Lake, sink_config

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


def test_a_warm_pool_run_lands_the_topic_in_iceberg(
    runtime: Runtime,
    connect_factory: Callable[[], Any],
    target: Database,  # noqa: F811
    tmp_path: Path,
) -> None:
    runner = make_runner(runtime, None, spark_factory=connect_factory)
    lake = Lake(target, tmp_path / "warehouse")
    (tmp_path / "in.txt").write_text("".join(f"line {i}\n" for i in range(25)))
    runtime.create_connector(
        "src", {"connector.class": "FileSourceConnector", "filename": str(tmp_path / "in.txt"), "topic": "lines"}
    )
    runtime.create_connector("sink", sink_config(lake, "lines", "logs.lines"))
    assert runner.run("src", 0).rows == 25
    result = runner.run("sink", 0)
    assert result.state == "SUCCEEDED", result.message
    rows = lake.catalog().load_table("logs.lines").scan().to_arrow()
    assert sorted(rows.column(rows.column_names[0]).to_pylist()) == sorted(f"line {i}" for i in range(25))
    assert lake.offsets("logs.lines") == '{"lines":{"0":25}}'
