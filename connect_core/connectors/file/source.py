"""FileSourceConnector: new lines of a text file into a topic."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import AliasChoices, Field

from connect_core.connectors.file._paths import absolute, check_directory
from connect_core.sdk import (
    ConnectorConfig,
    Positions,
    RetriableError,
    SourceBatch,
    SourceConnector,
    SourcePosition,
    SourceTask,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["FileSourceConfig", "FileSourceConnector", "FileSourceTask"]

_NEWLINE = b"\n"


class FileSourceConfig(ConnectorConfig):
    filename: str = Field(
        validation_alias=AliasChoices("filename", "file"),
        min_length=1,
        description="The text file to read (`filename`, or Kafka's `file`).",
    )
    topic: str = Field(
        validation_alias=AliasChoices("connect.topicname", "topic"),
        min_length=1,
        description="The topic to write lines to (`connect.topicname`, or Kafka's `topic`).",
    )
    batch_max_bytes: int = Field(
        default=64 * 1024 * 1024,
        alias="batch.max.bytes",
        ge=1,
        description="Most bytes of the file read in one micro-batch (a longer single line is read whole).",
    )


class FileSourceTask(SourceTask):
    """Reads complete lines appended since the committed byte position.

    The position is `{"position": <byte offset>, "inode": <inode>}` for the
    partition `{"filename": <absolute path>}`. A partial last line (no newline
    yet) waits for the next run. A file that shrank below the position, or was
    replaced (another inode), is read again from the start.
    """

    def _partition(self) -> dict[str, Any]:
        return {"filename": str(Path(self.config["filename"]).resolve())}

    def _start(self, positions: Positions, stat: os.stat_result) -> int:
        offset = positions.offset(self._partition()) or {}
        position = int(offset.get("position", 0))
        if offset.get("inode") not in (None, stat.st_ino) or stat.st_size < position:
            self.log.warning(
                "`%s` was truncated or replaced (position %d, size %d): reading it from the start",
                self.config["filename"],
                position,
                stat.st_size,
            )
            return 0
        return position

    def _stat(self) -> os.stat_result:
        path = self.config["filename"]
        try:
            return os.stat(path)
        except FileNotFoundError as exc:
            raise RetriableError(f"source file `{path}` does not exist; create it or fix `filename`") from exc
        except PermissionError as exc:
            raise RetriableError(f"source file `{path}` is not readable by this process: {exc}") from exc

    def has_new_data(self, positions: Positions) -> bool | None:
        try:
            stat = self._stat()
        except RetriableError:
            return True  # let the run fail visibly
        return stat.st_size != self._start(positions, stat)

    def read(self, spark: SparkSession, positions: Positions) -> SourceBatch:
        stat = self._stat()
        start = self._start(positions, stat)
        chunk = self._read_complete_lines(start, int(self.config["batch.max.bytes"]))
        if not chunk:
            return SourceBatch.empty()
        lines = [_decode(line) for line in chunk.split(_NEWLINE)[:-1]]
        df = spark.createDataFrame([(line,) for line in lines], "line string")
        position = SourcePosition(self._partition(), {"position": start + len(chunk), "inode": stat.st_ino})
        self.log.info(
            "read %d line(s), bytes %d-%d of `%s`", len(lines), start, start + len(chunk), self.config["filename"]
        )
        return SourceBatch({self.config["topic"]: df}, (position,))

    def _read_complete_lines(self, start: int, max_bytes: int) -> bytes:
        """Bytes from `start` up to and including the last newline within `max_bytes`."""
        with open(self.config["filename"], "rb") as f:
            f.seek(start)
            data = f.read(max_bytes)
            while data and _NEWLINE not in data:  # one line longer than max_bytes: read it whole
                more = f.read(max_bytes)
                if not more:
                    break
                data += more
        end = data.rfind(_NEWLINE)
        return data[: end + 1] if end >= 0 else b""


def _decode(line: bytes) -> str:
    # Invalid UTF-8 becomes U+FFFD: Parquet strings must be valid UTF-8.
    return line.removesuffix(b"\r").decode("utf-8", errors="replace")


class FileSourceConnector(SourceConnector[FileSourceConfig]):
    config_model = FileSourceConfig
    task_class = FileSourceTask

    def validate(self, config: FileSourceConfig) -> dict[str, list[str]]:
        return check_directory(config.filename)

    def task_configs(self, config: FileSourceConfig, max_tasks: int) -> list[dict[str, Any]]:
        # A file is one stream of bytes: one task reads it, whatever tasks.max says.
        return [
            {
                "filename": absolute(config.filename),
                "topic": config.topic,
                "batch.max.bytes": config.batch_max_bytes,
            }
        ]
