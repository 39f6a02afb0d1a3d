"""An S3 server (moto's, on loopback) for the S3 sink's tests, a source of given rows, and readers.

The sink reaches the server through pyarrow's `S3FileSystem` with `endpoint_override`, as it reaches
AWS or MinIO; the tests read the objects back through a client of their own.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterator
from typing import Any, ClassVar

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyarrow import fs

from connect_core.runtime.context import Runtime
from connect_core.runtime.plugins import PluginRegistry
from connect_core.sdk import ConnectorConfig, SourceBatch, SourceConnector, SourceTask
from connect_core.testing.s3 import S3Server, s3_server

_buckets = itertools.count()


@pytest.fixture(scope="session")
def s3() -> Iterator[S3Server]:
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # moto's request log
    with s3_server() as server:
        yield server


@pytest.fixture
def bucket(s3: S3Server) -> str:
    """A fresh bucket for the test."""
    name = f"test-bucket-{next(_buckets)}"
    s3.create_bucket(name)
    return name


class _RowsTask(SourceTask):
    def read(self, spark: Any, positions: Any) -> SourceBatch:
        topic = str(self.config["topic"])
        rows, schema = RowsSource.pending.pop(topic, (None, None))
        if rows is None:
            return SourceBatch.empty()
        return SourceBatch({topic: spark.createDataFrame(rows, schema)})


class RowsSource(SourceConnector[ConnectorConfig]):
    """Writes the rows a test queued (`RowsSource.pending[topic] = (rows, schema)`) to its topic."""

    pending: ClassVar[dict[str, tuple[list[Any], str]]] = {}
    config_model = ConnectorConfig
    task_class = _RowsTask

    def task_configs(self, config: ConnectorConfig, max_tasks: int) -> list[dict[str, Any]]:
        return [{"topic": (config.model_extra or {})["topic"]}]


@pytest.fixture
def rows_runtime(runtime: Runtime) -> Runtime:
    """The test's runtime with `RowsSource` among its plugins (beside the built-ins)."""
    runtime.registry = PluginRegistry(extra=[RowsSource])
    RowsSource.pending.clear()
    return runtime


def s3_sink(s3: S3Server, bucket: str, topic: str, **extra: Any) -> dict[str, Any]:
    """An S3 sink config of `topic` into `bucket` on the test server, as a user writes it."""
    return {
        "connector.class": "io.confluent.connect.s3.S3SinkConnector",
        "topics": topic,
        "s3.bucket.name": bucket,
        "s3.region": s3.region,
        "store.url": s3.url,
        "aws.access.key.id": s3.access_key,
        "aws.secret.access.key": s3.secret_key,
        "flush.size": 1000,
        **extra,
    }


def objects(filesystem: Any, root: str) -> dict[str, int]:
    """Every object (file) under `root`, by its path relative to `root`, with its size."""
    infos = filesystem.get_file_info(fs.FileSelector(root, recursive=True, allow_not_found=True))
    return {i.path[len(root) + 1 :]: i.size for i in infos if i.type == fs.FileType.File}


def read_all(filesystem: Any, root: str, keys: list[str] | None = None) -> pa.Table:
    """The Parquet objects under `root` (or those of `keys`) as one table, in key order."""
    keys = sorted(keys if keys is not None else objects(filesystem, root))
    return pa.concat_tables([pq.read_table(f"{root}/{k}", filesystem=filesystem) for k in keys])
