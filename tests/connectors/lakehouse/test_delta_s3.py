"""The Delta sink writing a table on S3: moto's S3 server on 127.0.0.1 (`connect_core.testing.s3`),
reached by delta-rs's own S3 client through the `delta.storage.*` options, as AWS or MinIO would be."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from connect_core.runtime.context import Runtime
from connect_core.runtime.execution.runner import TaskRunner
from connect_core.runtime.settings import Settings
from connect_core.sdk.records import TopicPartition
from connect_core.testing.s3 import S3Server, s3_server
from tests.connectors.jdbc_helpers import Database, postgres, synced  # noqa: F401  (fixtures)
from tests.connectors.lakehouse.delta_helpers import read, s3_options, sink_config, table, version_of


@pytest.fixture(scope="module")
def s3() -> Iterator[S3Server]:
    with s3_server() as server:
        yield server


@pytest.fixture
def bucket(s3: S3Server, request: pytest.FixtureRequest) -> str:
    """A bucket of the test's own."""
    name = "lake-" + request.node.name.lower().replace("_", "-")[:40].strip("-")
    s3.create_bucket(name)
    return name


@pytest.fixture
def runtime(settings: Settings) -> Iterator[Runtime]:
    """The runtime with the `env` config provider enabled (Kafka's `config.providers=env`)."""
    rt = Runtime.open(settings.model_copy(update={"config_providers": "env"}))
    yield rt
    rt.close()


def test_cdc_into_a_table_on_s3_lands_once_and_converges(
    runtime: Runtime,
    runner: TaskRunner,
    postgres: Database,  # noqa: F811
    s3: S3Server,
    bucket: str,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    postgres.execute(
        "CREATE TABLE stock (seq bigint PRIMARY KEY, id int, qty int, op text)",
        "INSERT INTO stock SELECT g, g, g, 'c' FROM generate_series(1, 200) g",
    )
    runtime.create_connector(
        "src",
        postgres.source_config(
            **{
                "mode": "incrementing",
                "incrementing.column.name": "seq",
                "table.whitelist": "stock",
                "topic.prefix": "",
            }
        ),
    )
    uri = f"s3://{bucket}/lake/${{topic}}"
    # the secret through a config provider: stored as the placeholder, filled only where the task runs
    monkeypatch.setenv("DELTA_TEST_SECRET", s3.secret_key)
    options = {**s3_options(s3), "delta.storage.aws_secret_access_key": "${env:DELTA_TEST_SECRET}"}
    config = sink_config(
        "stock", uri=uri, **{"delta.tables.cdc-field": "op", "delta.tables.id-columns": "id", **options}
    )
    runtime.create_connector("sink", config)
    assert s3.secret_key not in str(runtime.connectors.get("sink").config)
    where = f"s3://{bucket}/lake/stock"
    caplog.set_level(logging.DEBUG)
    synced(runner, "src", "sink")
    cols = ("id", "qty", "op")
    assert read(where, cols, server=s3) == [(g, g, "c") for g in range(1, 201)]
    assert version_of(where, "sink", "stock", server=s3) == 200
    objects = [i.path for i in s3.filesystem().get_file_info(_selector(f"{bucket}/lake/stock"))]  # type: ignore[attr-defined]
    assert f"{bucket}/lake/stock/_delta_log/00000000000000000000.json" in objects

    postgres.execute(
        "INSERT INTO stock VALUES (201, 5, 50, 'u'), (202, 5, 51, 'u'), (203, 6, NULL, 'd'), (204, 201, 1, 'c')"
    )
    synced(runner, "src")
    # a kill between the Delta commit and the runtime's: the sink ran, the runtime's offsets went back
    synced(runner, "sink")
    runtime.connectors.set_target_state("sink", "STOPPED")
    runtime.connectors.alter_sink_offsets("sink", {TopicPartition("stock", 0): 200})
    runtime.connectors.set_target_state("sink", "RUNNING")
    assert synced(runner, "sink")[0].rows == 4  # redelivered …
    assert table(where, s3).version() == 1  # … and not committed again
    expected = {g: (g, g, "c") for g in range(1, 201)}
    expected[5] = (5, 51, "u")  # updated twice in the batch: the newest wins
    del expected[6]
    expected[201] = (201, 1, "c")
    assert read(where, cols, server=s3) == [expected[k] for k in sorted(expected)]
    assert version_of(where, "sink", "stock", server=s3) == 204
    assert s3.secret_key not in caplog.text and s3.access_key not in caplog.text  # never logged


def _selector(prefix: str) -> object:
    from pyarrow import fs

    return fs.FileSelector(prefix, recursive=True)


def test_lineage_names_the_bucket_and_the_table_path(s3: S3Server, bucket: str) -> None:
    from connect_core.connectors.lakehouse.delta import DeltaSinkConfig, DeltaSinkConnector

    config = DeltaSinkConfig.model_validate(
        sink_config("orders,items", uri=f"s3://{bucket}/lake/${{topic}}", **s3_options(s3))
    )
    found = [(d.namespace, d.name, d.topic) for d in DeltaSinkConnector().lineage(config)]
    assert found == [(f"s3://{bucket}", "lake/orders", "orders"), (f"s3://{bucket}", "lake/items", "items")]
