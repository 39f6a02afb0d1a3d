"""S3SinkConnector: topics as Parquet or JSON-lines objects on S3, any S3-compatible store, or a directory.

A run writes every record it read (each run closes its files) and returns; the runtime then commits
the offsets. Where a batch is written depends on its size: up to `driver_max_rows` records the
driver reads them as Arrow and writes the files itself (no Spark job); a bigger batch is
repartitioned by Kafka partition and every Spark partition writes its own files from an executor.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from connect_core.connectors.objectstore._chunks import WRITTEN_SCHEMA, Plan, write_partitioned
from connect_core.connectors.objectstore._formats import Format
from connect_core.connectors.objectstore._partitioners import Layout
from connect_core.connectors.objectstore._store import Store
from connect_core.connectors.objectstore.config import S3SinkConfig, local_path
from connect_core.sdk import ConfigError, LineageDataset, SinkBatch, SinkConnector, SinkTask, check_topic_name
from connect_core.sdk.records import CommittedOffset, TopicPartition, driver_max_rows
from connect_core.sdk.testing import faults

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["S3SinkConnector", "S3SinkTask"]


def _task_model(config: Mapping[str, Any]) -> S3SinkConfig:
    """A task's config as its model: with `store.local.path` (the directory the runtime confined, its
    symlinks resolved) the `file://` URL it came from is no longer what counts."""
    if "store.local.path" in config:
        config = {k: v for k, v in config.items() if k != "store.url"}
    return S3SinkConfig.model_validate(dict(config))


class S3SinkTask(SinkTask):
    def open(self, committed: Mapping[TopicPartition, CommittedOffset]) -> Mapping[str, Any] | None:
        self.cfg = _task_model(self.config)
        self.store = Store.from_config(self.cfg)
        return None

    def write(self, spark: SparkSession, batch: SinkBatch) -> Mapping[str, Any]:
        layout = Layout.from_config(self.cfg, wallclock_ms=int(time.time() * 1000))
        in_driver = batch.row_count <= driver_max_rows(spark)
        objects = records = size = 0
        for topic in batch.read_topics():
            destination = batch.destination(topic)
            try:  # a router's output names a directory and the files: a topic name, or nothing
                check_topic_name(destination)
            except ValueError as exc:
                raise ConfigError(f"the transforms route topic `{topic}` to an invalid name: {exc}") from None
            plan = Plan(
                self.store,
                layout,
                Format(self.cfg.format, self.cfg.parquet_codec, self.cfg.s3_compression_type),
                self.cfg.topics_dir,
                destination,
                self.cfg.flush_size,
                self.cfg.behavior_on_null_values == "ignore",
            )
            written = self._in_driver(batch, topic, plan) if in_driver else self._by_executors(batch, topic, plan)
            objects += len(written)
            records += sum(w[1] for w in written)
            size += sum(w[2] for w in written)
        self.log.info(
            "wrote %d record(s) in %d object(s), %d bytes, to the %s (%s)",
            records,
            objects,
            size,
            self.store.where(),
            "from the driver" if in_driver else "from the executors",
        )
        return {"files_written": objects, "rows_written": records, "bytes_written": size}

    def _in_driver(self, batch: SinkBatch, topic: str, plan: Plan) -> list[tuple[str, int, int]]:
        """A small batch: read as Arrow (from the topic's files when the runtime offers that) and
        written here, no Spark job."""
        arrow = batch.arrow(topic)
        table = (
            arrow.collect_arrow(lambda b: b) if arrow is not None and arrow.in_driver else batch.topic(topic).toArrow()
        )
        chunks = plan.chunks(table)
        filesystem = self.store.filesystem()
        written = []
        for i, chunk in enumerate(chunks):
            if i == len(chunks) // 2 and i:
                faults.checkpoint("mid_sink")  # some objects written, nothing committed
            written.append(plan.write(filesystem, chunk))
        return written

    def _by_executors(self, batch: SinkBatch, topic: str, plan: Plan) -> list[tuple[str, int, int]]:
        """A big batch: every Kafka partition in one Spark partition, in offset order; each Spark
        partition cuts and writes its own files from its executor."""
        from pyspark.sql import functions as F

        df = batch.topic(topic)
        spread = max(1, min(len([tp for tp in batch.partitions if tp.topic == topic]), _spark_parallelism(df)))
        ordered = df.repartition(spread, F.col("__partition")).sortWithinPartitions("__partition", "__offset")
        rows = ordered.mapInArrow(write_partitioned(plan), WRITTEN_SCHEMA).collect()
        return [(r["key"], int(r["records"]), int(r["bytes"])) for r in rows]


def _spark_parallelism(df: Any) -> int:
    """How many Spark partitions a big batch is spread over at most (its Kafka partitions bound it too)."""
    try:
        return int(df.sparkSession.sparkContext.defaultParallelism)
    except Exception:  # Spark Connect has no SparkContext
        return 4


class S3SinkConnector(SinkConnector[S3SinkConfig]):
    """Writes each topic partition's records as files named by their first offset (see the package)."""

    config_model = S3SinkConfig
    task_class = S3SinkTask

    def validate(self, config: S3SinkConfig) -> dict[str, list[str]]:
        return _described(config).probe(config.probe_timeout_ms)

    def lineage(self, config: S3SinkConfig) -> list[LineageDataset]:
        """`s3://bucket` + `<topics.dir>/<topic>`, or `file://host` + the directory; unknown when a
        transform (a router) may rename the topics."""
        if config.transforms:
            return []
        store = _described(config)
        return [store.dataset(config.topics_dir, topic) for topic in config.topics]

    def task_configs(self, config: S3SinkConfig, max_tasks: int) -> list[dict[str, Any]]:
        base = config.model_dump(by_alias=True, exclude_none=True, exclude={"name", "tasks_max"})
        base["topics"] = list(config.topics)
        if config.store_local_path is None and (config.store_url or "").startswith("file:"):
            # the runtime confines this key to `file.allowed.paths` before each task starts
            base["store.local.path"] = local_path(str(config.store_url))
        return [dict(base) for _ in range(max_tasks)]


def _described(config: S3SinkConfig) -> Store:
    """The store as the connector's (unresolved) config names it, for checks and lineage."""
    if config.store_local_path is None and (config.store_url or "").startswith("file:"):
        return Store("local", local_path(str(config.store_url)))
    return Store.from_config(config)
