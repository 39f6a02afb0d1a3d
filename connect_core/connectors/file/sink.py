"""FileSinkConnector: a topic's rows appended to a text file, one line each."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import AliasChoices, Field

from connect_core.connectors.file._paths import absolute, check_directory
from connect_core.runtime import _faults
from connect_core.sdk import (
    CommittedOffset,
    RetriableError,
    SinkBatch,
    SinkConnector,
    SinkConnectorConfig,
    SinkTask,
    TopicPartition,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["FileSinkConfig", "FileSinkConnector", "FileSinkTask"]

_SIZE_KEY = "file_size"


class FileSinkConfig(SinkConnectorConfig):
    filename: str = Field(
        validation_alias=AliasChoices("filename", "file"),
        min_length=1,
        description="The file to append to (`filename`, or Kafka's `file`).",
    )


class FileSinkTask(SinkTask):
    """Appends rows in offset order; the file length is committed with the offsets.

    A row with a single string column `line` (what FileSourceConnector writes)
    is written as that line; any other row is written as its JSON.
    """

    @property
    def _path(self) -> Path:
        return Path(self.config["filename"])

    def open(self, committed: Mapping[TopicPartition, CommittedOffset]) -> Mapping[str, Any] | None:
        sizes = [int(c.metadata[_SIZE_KEY]) for c in committed.values() if _SIZE_KEY in c.metadata]
        current = self._path.stat().st_size if self._path.exists() else 0
        if not sizes:
            # First run: remember where our output starts, before writing any.
            return {_SIZE_KEY: current}
        committed_size = max(sizes)
        if current > committed_size:
            self.log.warning(
                "`%s` has %d bytes past the last commit (a write that crashed before committing); "
                "cutting it back to %d bytes before writing again",
                self._path,
                current - committed_size,
                committed_size,
            )
            with open(self._path, "r+b") as f:
                f.truncate(committed_size)
        elif current < committed_size:
            self.log.warning("`%s` is shorter than at the last commit: it was truncated outside Connect", self._path)
        return None

    def write(self, spark: SparkSession, batch: SinkBatch) -> Mapping[str, Any]:
        from pyspark.sql import functions as F

        ordered = batch.ordered()
        values = batch.values().columns
        if values == ["line"] and dict(ordered.dtypes)["line"] == "string":
            text = ordered.select(F.col("line").alias("text"))
        else:
            text = ordered.select(F.to_json(F.struct(*values)).alias("text"))
        try:
            half = batch.row_count // 2
            with open(self._path, "ab") as f:
                for i, row in enumerate(text.toLocalIterator(prefetchPartitions=True)):
                    if i == half and half:
                        f.flush()
                        _faults.checkpoint("mid_sink")  # half the batch on disk, nothing committed
                    f.write(("" if row.text is None else row.text).encode("utf-8") + b"\n")
                f.flush()
                os.fsync(f.fileno())
                size = f.tell()
        except OSError as exc:
            raise RetriableError(f"cannot write sink file `{self._path}`: {exc}") from exc
        self.log.info("appended %d line(s) to `%s`", batch.row_count, self._path)
        return {_SIZE_KEY: size}


class FileSinkConnector(SinkConnector[FileSinkConfig]):
    config_model = FileSinkConfig
    task_class = FileSinkTask

    def validate(self, config: FileSinkConfig) -> dict[str, list[str]]:
        return check_directory(config.filename, writable=True)

    def task_configs(self, config: FileSinkConfig, max_tasks: int) -> list[dict[str, Any]]:
        # Several writers of one file would interleave lines: one task.
        return [{"filename": absolute(config.filename), "topics": config.topics}]
