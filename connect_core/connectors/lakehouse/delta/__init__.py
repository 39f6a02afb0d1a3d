"""The Delta sink, on delta-rs (`deltalake`): topics into Delta tables on the worker or on S3.

`config` (keys and their checks), `_tables` (where each topic's table is, confined), `_schema`
(create and evolve), `_write` (one commit per table: append or merge), `_offsets` (the offsets as
app transactions), `_upkeep` (optimize, vacuum), `connector` (the task's loop).
"""

from connect_core.connectors.lakehouse.delta.config import DeltaSinkConfig
from connect_core.connectors.lakehouse.delta.connector import DeltaSinkConnector, DeltaSinkTask

__all__ = ["DeltaSinkConfig", "DeltaSinkConnector", "DeltaSinkTask"]
