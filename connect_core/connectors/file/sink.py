"""FileSinkConnector: a topic's rows appended to a text file, one line each."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pydantic import AliasChoices, Field

from connect_core.connectors.file._paths import absolute, check_target, file_dataset, open_regular
from connect_core.sdk import (
    CommittedOffset,
    LineageDataset,
    LocalPath,
    RetriableError,
    SinkBatch,
    SinkConnector,
    SinkConnectorConfig,
    SinkTask,
    TopicPartition,
)
from connect_core.sdk.testing import faults

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["FileSinkConfig", "FileSinkConnector", "FileSinkTask"]

# The committed offsets' metadata: how long the file was at the commit, and which file that was.
# The path is kept as a digest: it may have come from a config provider, and a resolved value
# never goes into the metadata store (whence the API serves offsets).
_SIZE_KEY = "file_size"
_PATH_KEY = "file_path_sha256"
_DEV_KEY = "file_dev"
_INO_KEY = "file_ino"
_TAIL_KEY = "file_tail_sha256"
_TAIL_BYTES = 4096
_IDENTITY = (_SIZE_KEY, _PATH_KEY, _DEV_KEY, _INO_KEY, _TAIL_KEY)


class FileSinkConfig(SinkConnectorConfig):
    filename: LocalPath = Field(
        validation_alias=AliasChoices("filename", "file"),
        min_length=1,
        description="The file to append to (`filename`, or Kafka's `file`); it must be a regular file "
        "under the worker's `file.allowed.paths`.",
    )


def _identity(path: str, fd: int, size: int) -> dict[str, Any]:
    """Which file this is, as it was `size` bytes long: its resolved path, its inode, and a digest of
    its last bytes up to there. An inode number alone is no identity: a file deleted and created
    again under the same name often gets the same one at once; its content then differs."""
    stat = os.fstat(fd)
    start = max(0, size - _TAIL_BYTES)
    return {
        _SIZE_KEY: size,
        _PATH_KEY: hashlib.sha256(os.fsencode(path)).hexdigest(),
        _DEV_KEY: stat.st_dev,
        _INO_KEY: stat.st_ino,
        _TAIL_KEY: hashlib.sha256(os.pread(fd, size - start, start)).hexdigest(),
    }


def _committed_size(path: str, fd: int, committed: Mapping[TopicPartition, CommittedOffset]) -> int | None:
    """The length committed for this very file, or None when no commit was about it (then it is a new
    target). The file still holds exactly the committed bytes' tail there, or it is not the one."""
    size = os.fstat(fd).st_size
    for offset in committed.values():
        meta = offset.metadata
        if _TAIL_KEY not in meta or int(meta[_SIZE_KEY]) > size:
            continue  # recorded before identities were, or shorter now (truncated outside Connect)
        if _identity(path, fd, int(meta[_SIZE_KEY])) == {k: meta.get(k) for k in _IDENTITY}:
            return int(meta[_SIZE_KEY])
    return None


class FileSinkTask(SinkTask):
    """Appends rows in offset order; the file's length and identity are committed with the offsets.

    A row with a single string column `line` (what FileSourceConnector writes)
    is written as that line; any other row is written as its JSON.

    The sink never truncates or rewrites bytes it did not write. Before writing, it cuts back only
    the file it committed to (same resolved path, device, inode, and the same bytes up to the
    committed length), and only down to that length: what lies past it is the sink's own write
    that crashed before its commit. Any other file (a `filename` changed by a config update, a file
    replaced or rewritten under the same name, or offsets committed before identities were
    recorded) is a new target: its current length becomes the baseline, committed before the first
    write, and the sink only appends to it.
    """

    @property
    def _path(self) -> str:
        return str(self.config["filename"])

    def open(self, committed: Mapping[TopicPartition, CommittedOffset]) -> Mapping[str, Any] | None:
        # Created now if missing, so that even the first baseline names the file by its inode.
        fd = open_regular(self._path, os.O_RDWR | os.O_CREAT, purpose="sink file")
        try:
            size = os.fstat(fd).st_size
            committed_size = _committed_size(self._path, fd, committed)
            if committed_size is None:
                if any(_SIZE_KEY in c.metadata for c in committed.values()):
                    self.log.info(
                        "`%s` is not the file of the last commit (another path, a replaced or rewritten file, "
                        "or no identity recorded): appending after its %d bytes, never cutting it back",
                        self._path,
                        size,
                    )
                return _identity(self._path, fd, size)
            if size > committed_size:
                self.log.warning(
                    "`%s` has %d bytes past the last commit (a write that crashed before committing); "
                    "cutting it back to %d bytes before writing again",
                    self._path,
                    size - committed_size,
                    committed_size,
                )
                os.ftruncate(fd, committed_size)
            return None
        finally:
            os.close(fd)

    def write(self, spark: SparkSession, batch: SinkBatch) -> Mapping[str, Any]:
        from pyspark.sql import functions as F

        ordered = batch.ordered()
        values = batch.values().columns
        if values == ["line"] and dict(ordered.dtypes)["line"] == "string":
            text = ordered.select(F.col("line").alias("text"))
        else:
            text = ordered.select(F.to_json(F.struct(*values)).alias("text"))
        fd = open_regular(self._path, os.O_RDWR | os.O_APPEND | os.O_CREAT, purpose="sink file")
        try:
            half, written = batch.row_count // 2, 0
            with os.fdopen(fd, "ab") as f:
                for i, row in enumerate(text.toLocalIterator(prefetchPartitions=True)):
                    if i == half and half:
                        f.flush()
                        faults.checkpoint("mid_sink")  # half the batch on disk, nothing committed
                    line = ("" if row.text is None else row.text).encode("utf-8") + b"\n"
                    f.write(line)
                    written += len(line)
                f.flush()
                os.fsync(f.fileno())
                # Of the file written, whatever its name points to by now.
                identity = _identity(self._path, f.fileno(), os.fstat(f.fileno()).st_size)
        except OSError as exc:
            raise RetriableError(f"cannot write sink file `{self._path}`: {exc}") from exc
        self.log.info("appended %d line(s) to `%s`", batch.row_count, self._path)
        return {**identity, "rows_written": batch.row_count, "bytes_written": written}


class FileSinkConnector(SinkConnector[FileSinkConfig]):
    config_model = FileSinkConfig
    task_class = FileSinkTask

    def lineage(self, config: FileSinkConfig) -> list[LineageDataset]:
        return [file_dataset(str(config.filename))]

    def validate(self, config: FileSinkConfig) -> dict[str, list[str]]:
        return check_target(config.filename, writable=True)

    def task_configs(self, config: FileSinkConfig, max_tasks: int) -> list[dict[str, Any]]:
        # Several writers of one file would interleave lines: one task.
        return [{"filename": absolute(config.filename), "topics": config.topics}]
