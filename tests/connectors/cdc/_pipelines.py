"""What the CDC tests build pipelines from: the JDBC sink as the CDC quickstart configures it."""

from __future__ import annotations

from typing import Any

from connect_core.testing.servers import PgServer, unique_name


def replica_sink(jdbc_url: str, topics: str, table: str = "items", **extra: Any) -> dict[str, Any]:
    """A JDBC sink that applies change events: Debezium's unwrap, upserts by the record key, deletes."""
    return {
        "connector.class": "io.confluent.connect.jdbc.JdbcSinkConnector",
        "connection.url": jdbc_url,
        "topics": topics,
        "table.name.format": table,
        "insert.mode": "upsert",
        "pk.mode": "record_key",
        "delete.enabled": "true",
        "auto.create": "true",
        "transforms": "unwrap",
        "transforms.unwrap.type": "io.debezium.transforms.ExtractNewRecordState",
        **extra,
    }


def pg_capture(db: PgServer, tables: str, *, prefix: str = "srv", **extra: Any) -> dict[str, Any]:
    """A PostgreSQL CDC source capturing `tables` of `db`, with a slot and a publication of its own."""
    return {
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "database.hostname": db.host,
        "database.port": str(db.port),
        "database.user": db.user,
        "database.dbname": db.database,
        "topic.prefix": prefix,
        "slot.name": unique_name("slot"),
        "publication.name": unique_name("pub"),
        "table.include.list": tables,
        **extra,
    }
