"""FileSourceConnector: new lines of a text file into a topic."""

from __future__ import annotations

import os
from stat import S_ISREG
from typing import TYPE_CHECKING, Any, BinaryIO

from pydantic import AliasChoices, Field

from connect_core.connectors.file._paths import absolute, check_target, file_dataset, open_regular
from connect_core.sdk import (
    ErrantRecords,
    FatalError,
    LineageDataset,
    LocalPath,
    Positions,
    SourceBatch,
    SourceConnector,
    SourceConnectorConfig,
    SourcePosition,
    SourceTask,
    TopicName,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["FileSourceConfig", "FileSourceConnector", "FileSourceTask"]

_NEWLINE = b"\n"
_STEP = 1024 * 1024  # read size past `batch.max.bytes` while a long line goes on (fewer calls when that is 1)
LINE_MAX_BYTES = 64 * 1024 * 1024


class FileSourceConfig(SourceConnectorConfig):
    filename: LocalPath = Field(
        validation_alias=AliasChoices("filename", "file"),
        min_length=1,
        description="The text file to read (`filename`, or Kafka's `file`); it must be a regular file "
        "under the worker's `file.allowed.paths`.",
    )
    topic: TopicName = Field(
        validation_alias=AliasChoices("connect.topicname", "topic"),
        min_length=1,
        description="The topic to write lines to (`connect.topicname`, or Kafka's `topic`).",
    )
    batch_max_bytes: int = Field(
        default=64 * 1024 * 1024,
        alias="batch.max.bytes",
        ge=1,
        description="Most bytes of the file read in one micro-batch (a longer single line is read whole, "
        "up to `line.max.bytes`).",
    )
    line_max_bytes: int = Field(
        default=LINE_MAX_BYTES,
        alias="line.max.bytes",
        ge=1,
        description="Longest line read; a longer one fails the run instead of filling the driver's memory "
        "(under `errors.tolerance=all` it is set aside: its first `line.max.bytes` go to the dead-letter topic).",
    )


class FileSourceTask(SourceTask):
    """Reads complete lines appended since the committed byte position.

    The position is `{"position": <byte offset>, "inode": <inode>}` for the
    partition `{"filename": <absolute path>}`. A partial last line (no newline
    yet) waits for the next run. A file that shrank below the position, or was
    replaced (another inode), is read again from the start.
    """

    def _partition(self) -> dict[str, Any]:
        return {"filename": os.path.realpath(self.config["filename"])}

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

    def has_new_data(self, positions: Positions) -> bool | None:
        path = self.config["filename"]
        try:
            stat = os.stat(path)  # a stat, not an open: cheap, and safe on a FIFO
        except OSError:
            return True  # let the run fail visibly
        if not S_ISREG(stat.st_mode):
            return True  # the run says why it refuses the file
        return stat.st_size != self._start(positions, stat)

    def read(self, spark: SparkSession, positions: Positions) -> SourceBatch:
        path = self.config["filename"]
        line_max = int(self.config.get("line.max.bytes", LINE_MAX_BYTES))
        with os.fdopen(open_regular(path, os.O_RDONLY, purpose="source file"), "rb") as f:
            stat = os.fstat(f.fileno())  # of what is read, not of what the name pointed to a moment ago
            first = start = self._start(positions, stat)
            # a run that set aside a line whose end had not been written yet goes on skipping it
            skipping = start > 0 and bool((positions.offset(self._partition()) or {}).get("skipping"))
            chunk = b""
            while True:
                if skipping:
                    start, skipping = _skip_line(f, start)
                    if skipping:
                        break
                try:
                    chunk = _read_complete_lines(f, start, int(self.config["batch.max.bytes"]), line_max, path)
                    break
                except _LineTooLong as exc:
                    if self.context.errant is None:
                        raise FatalError(f"{exc}: raise `line.max.bytes`, or fix the file") from None
                    self._set_aside(exc)
                    skipping = True
        if not chunk and start == first:
            return SourceBatch.empty()
        lines = [_decode(line) for line in chunk.split(_NEWLINE)[:-1]]
        df = spark.createDataFrame([(line,) for line in lines], "line string")
        offset = {"position": start + len(chunk), "inode": stat.st_ino, **({"skipping": True} if skipping else {})}
        self.log.info("read %d line(s), bytes %d-%d of `%s`", len(lines), start, start + len(chunk), path)
        return SourceBatch({self.config["topic"]: df}, (SourcePosition(self._partition(), offset),))

    def _set_aside(self, exc: _LineTooLong) -> None:
        """`errors.tolerance=all`: a line too long to read goes to the dead-letter topic, cut to the
        bytes read of it, and reading goes on after it."""
        import pyarrow as pa

        assert self.context.errant is not None
        self.context.errant.report(
            ErrantRecords(
                pa.table({"line": pa.array([_decode(exc.head)], pa.string())}),
                "connect_core.sdk.errors.DataError",
                str(exc),
                stage="TASK_POLL",
            )
        )


class _LineTooLong(Exception):
    def __init__(self, path: str, start: int, line_max: int, head: bytes) -> None:
        super().__init__(f"the line at byte {start} of `{path}` is longer than `line.max.bytes` ({line_max})")
        self.head = head


def _read_complete_lines(f: BinaryIO, start: int, max_bytes: int, line_max: int, path: str) -> bytes:
    """Bytes from `start` up to and including the last newline within `max_bytes`; when the first
    line is longer, that whole line (up to `line_max` bytes; longer: `_LineTooLong`). Linear in what
    is read: only new bytes are searched for a newline, and the pieces are joined once."""
    f.seek(start)
    data = f.read(max_bytes)
    end = data.rfind(_NEWLINE)
    if end >= 0 or len(data) < max_bytes:
        return data[: end + 1]  # complete lines, or a partial last line that waits (b"")
    pieces, size = [data], len(data)
    step = max(max_bytes, _STEP)
    while size <= line_max:
        more = f.read(min(step, line_max + 1 - size))
        if not more:
            return b""  # a partial line at the end of the file: wait for its newline
        newline = more.find(_NEWLINE)
        if newline >= 0:
            pieces.append(more[: newline + 1])
            return b"".join(pieces)
        pieces.append(more)
        size += len(more)
    raise _LineTooLong(path, start, line_max, b"".join(pieces)[:line_max])


def _skip_line(f: BinaryIO, start: int) -> tuple[int, bool]:
    """The position after the newline that ends the line at `start`, and False; or, when the file
    ends first, its end and True (the rest of the line is skipped when it is written)."""
    f.seek(start)
    position = start
    while more := f.read(_STEP):
        newline = more.find(_NEWLINE)
        if newline >= 0:
            return position + newline + 1, False
        position += len(more)
    return position, True


def _decode(line: bytes) -> str:
    # Invalid UTF-8 becomes U+FFFD: Parquet strings must be valid UTF-8.
    return line.removesuffix(b"\r").decode("utf-8", errors="replace")


class FileSourceConnector(SourceConnector[FileSourceConfig]):
    config_model = FileSourceConfig
    task_class = FileSourceTask

    def lineage(self, config: FileSourceConfig) -> list[LineageDataset]:
        return [file_dataset(str(config.filename))]

    def validate(self, config: FileSourceConfig) -> dict[str, list[str]]:
        return check_target(config.filename)

    def task_configs(self, config: FileSourceConfig, max_tasks: int) -> list[dict[str, Any]]:
        # A file is one stream of bytes: one task reads it, whatever tasks.max says.
        return [
            {
                "filename": absolute(config.filename),
                "topic": config.topic,
                "batch.max.bytes": config.batch_max_bytes,
                "line.max.bytes": config.line_max_bytes,
            }
        ]
