"""The MariaDB/MySQL change-data-capture source: the row binlog (`source`), its stream (`_binlog`)
and server (`_server`)."""

from connect_core.connectors.cdc.mariadb.source import MariaDbCdcSourceConnector, MariaDbCdcSourceTask

__all__ = ["MariaDbCdcSourceConnector", "MariaDbCdcSourceTask"]
