"""The PostgreSQL change-data-capture source: logical replication with `pgoutput` (`source`), its
stream (`_stream`, `pgoutput`, `pgbatch`), snapshot (`_snapshot`) and server (`_server`)."""

from connect_core.connectors.cdc.postgres.source import PostgresCdcSourceConnector, PostgresCdcSourceTask

__all__ = ["PostgresCdcSourceConnector", "PostgresCdcSourceTask"]
