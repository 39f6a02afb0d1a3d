"""JDBC source (PostgreSQL, MariaDB/MySQL, any database with a JDBC driver) and PostgreSQL sink."""

from connect_core.connectors.jdbc.sink import JdbcSinkConnector
from connect_core.connectors.jdbc.source import JdbcSourceConnector

__all__ = ["JdbcSinkConnector", "JdbcSourceConnector"]
