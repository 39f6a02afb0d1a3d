"""Change-data-capture connectors: log-based sources reading PostgreSQL's logical replication
(`pgoutput`) and MariaDB's row binlog as Debezium-style change events."""
