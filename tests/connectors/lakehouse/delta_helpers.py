"""The Delta sink's test parts: a sink config as a user writes it, and readers that are not the
sink: delta-rs's own `DeltaTable(...).to_pyarrow_table()` and the table's app transactions."""

from __future__ import annotations

from typing import Any

from deltalake import DeltaTable

from connect_core.testing.s3 import S3Server

__all__ = ["read", "s3_options", "sink_config", "version_of"]


def sink_config(topics: str, *, path: str | None = None, uri: str | None = None, **extra: Any) -> dict[str, Any]:
    """A Delta sink config writing `topics` to the table at `path` (local) or `uri` (S3)."""
    where = {"delta.table.path": path} if path is not None else {"delta.table.uri": uri}
    return {
        "connector.class": "DeltaSinkConnector",
        "topics": topics,
        "delta.tables.auto-create-enabled": "true",
        **where,
        **extra,
    }


def s3_options(server: S3Server) -> dict[str, str]:
    """`delta.storage.*` keys reaching the test's S3 server."""
    return {
        "delta.storage.aws_endpoint_url": server.url,
        "delta.storage.aws_allow_http": "true",
        "delta.storage.aws_region": server.region,
        "delta.storage.aws_access_key_id": server.access_key,
        "delta.storage.aws_secret_access_key": server.secret_key,
    }


def _storage(server: S3Server | None) -> dict[str, str] | None:
    if server is None:
        return None
    return {k.removeprefix("delta.storage."): v for k, v in s3_options(server).items()}


def table(uri: str, server: S3Server | None = None) -> DeltaTable:
    return DeltaTable(uri, storage_options=_storage(server))


def read(uri: str, columns: tuple[str, ...], key: str = "id", server: S3Server | None = None) -> list[tuple[Any, ...]]:
    """The table's rows as delta-rs reads them, sorted by `key`."""
    rows = table(uri, server).to_pyarrow_table(columns=list(columns)).sort_by(key)
    return list(zip(*[rows[c].to_pylist() for c in columns], strict=True))


def version_of(uri: str, connector: str, topic: str, partition: int = 0, server: S3Server | None = None) -> int | None:
    """The app transaction version (the next offset) the table holds for a topic partition."""
    return table(uri, server).transaction_version(f"connect-core/{connector}/{topic}/{partition}")
