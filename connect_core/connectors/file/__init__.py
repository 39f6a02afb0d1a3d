"""File connectors: RocketMQ Connect's sample (and Kafka's FileStream connectors).

`FileSourceConnector` copies the lines appended to a text file since its last
position into a topic (one row per line, column `line`); `FileSinkConnector`
appends a topic's rows to a file, one line each, in offset order.

Exactly once, end to end: the source's byte position is committed with the
rows it read; the sink commits the file's length with its offsets and, before
writing, cuts the file back to that length, so a write that crashed before its
commit is replaced, not repeated.
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
