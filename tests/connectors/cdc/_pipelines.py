"""What the CDC tests build pipelines from: the JDBC sink as the CDC quickstart configures it."""

from __future__ import annotations

from typing import Any


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
