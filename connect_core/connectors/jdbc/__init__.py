"""JDBC source and sink for PostgreSQL and MariaDB/MySQL (other JDBC URLs are refused: see `_url`)."""

from connect_core.connectors.jdbc.sink import JdbcSinkConnector
from connect_core.connectors.jdbc.source import JdbcSourceConnector

__all__ = ["JdbcSinkConnector", "JdbcSourceConnector"]
