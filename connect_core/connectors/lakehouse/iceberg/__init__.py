"""The Iceberg sink (`org.apache.iceberg.connect.IcebergSinkConnector`'s keys), on pyiceberg.

`config` (keys and their checks), `_catalog` (the allowed catalogs, files confined to the
warehouse), `_schema` (create and evolve), `_write` (one commit per table), `_offsets` (the
offsets each table's snapshots hold), `_upkeep` (compaction, snapshot expiry, orphan files),
`connector` (the task's loop).
"""

from connect_core.connectors.lakehouse.iceberg.config import IcebergSinkConfig
from connect_core.connectors.lakehouse.iceberg.connector import IcebergSinkConnector, IcebergSinkTask

__all__ = ["IcebergSinkConfig", "IcebergSinkConnector", "IcebergSinkTask"]
