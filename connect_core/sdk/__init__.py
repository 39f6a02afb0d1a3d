"""The connector SDK: everything a connector author imports, and nothing of the runtime."""

from connect_core.sdk._paths import LocalPath
from connect_core.sdk.config import ConnectorConfig, SinkConnectorConfig, TopicList, split_list
from connect_core.sdk.connector import (
    Connector,
    ConnectorType,
    SinkConnector,
    SinkTask,
    SourceConnector,
    SourceTask,
    TaskContext,
)
from connect_core.sdk.errors import (
    ConfigError,
    ConnectError,
    FatalError,
    FencedError,
    NotFoundError,
    RetriableError,
)
from connect_core.sdk.records import (
    DRIVER_MAX_ROWS,
    ArrowRecords,
    CommittedOffset,
    Positions,
    SinkBatch,
    SourceBatch,
    SourcePosition,
    TopicPartition,
    partition_key,
)

__all__ = [
    "DRIVER_MAX_ROWS",
    "ArrowRecords",
    "CommittedOffset",
    "ConfigError",
    "ConnectError",
    "Connector",
    "ConnectorConfig",
    "ConnectorType",
    "FatalError",
    "FencedError",
    "LocalPath",
    "NotFoundError",
    "Positions",
    "RetriableError",
    "SinkBatch",
    "SinkConnector",
    "SinkConnectorConfig",
    "SinkTask",
    "SourceBatch",
    "SourceConnector",
    "SourcePosition",
    "SourceTask",
    "TaskContext",
    "TopicList",
    "TopicPartition",
    "partition_key",
    "split_list",
]
