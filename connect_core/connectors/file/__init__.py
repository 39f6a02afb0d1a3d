"""File connectors: RocketMQ Connect's sample (and Kafka's FileStream connectors).

`FileSourceConnector` copies the lines appended to a text file since its last
position into a topic (one row per line, column `line`); `FileSinkConnector`
appends a topic's rows to a file, one line each, in offset order.

Exactly once, end to end: the source's byte position is committed with the
rows it read; the sink commits the file's length and identity (resolved path,
device, inode) with its offsets and, before writing, cuts that same file back to
that length, so a write that crashed before its commit is replaced, not
repeated. Any other file (a changed `filename`, a replaced file) is only ever
appended to: a sink never truncates what it did not write.

Both read and write regular files only (a FIFO or a device would never end),
and only under the worker's `file.allowed.paths`: `filename` is a `LocalPath`,
which the runtime confines at create and again where the task runs.
"""

from connect_core.connectors.file.sink import FileSinkConfig, FileSinkConnector, FileSinkTask
from connect_core.connectors.file.source import FileSourceConfig, FileSourceConnector, FileSourceTask

__all__ = [
    "FileSinkConfig",
    "FileSinkConnector",
    "FileSinkTask",
    "FileSourceConfig",
    "FileSourceConnector",
    "FileSourceTask",
]
