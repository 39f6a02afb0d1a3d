"""The Iceberg sink's test parts: a SQL catalog in a fresh PostgreSQL database, a warehouse in the
test's directory, and two readers that are not the sink: pyiceberg's scan, and pyarrow reading
the Parquet data files the table's current snapshot lists."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.catalog.sql import SqlCatalog

from connect_core.testing.databases import Database

__all__ = ["Lake", "sink_config"]


class Lake:
    """A catalog database and a warehouse directory, read back the way a user's reader would."""

    def __init__(self, db: Database, warehouse: Path) -> None:
        args = db.connect_args
        self.uri = f"postgresql+psycopg2://{args['user']}@{args['host']}:{args['port']}/{db.name}"
        self.warehouse = warehouse
        warehouse.mkdir(exist_ok=True)

    def catalog(self) -> SqlCatalog:
        return SqlCatalog("iceberg", uri=self.uri, warehouse=str(self.warehouse))

    def scan(self, table: str, columns: tuple[str, ...], key: str = "id") -> list[tuple[Any, ...]]:
        """Rows as pyiceberg's scan returns them, sorted by `key`."""
        rows = self.catalog().load_table(table).scan(selected_fields=columns).to_arrow()
        return _sorted(rows, columns, key)

    def data_files(self, table: str) -> list[str]:
        """The Parquet files the current snapshot holds (there are no delete files: asserted)."""
        tasks = list(self.catalog().load_table(table).scan().plan_files())
        assert all(not t.delete_files for t in tasks), "the sink writes no delete files"
        return [t.file.file_path for t in tasks]

    def parquet(self, table: str, columns: tuple[str, ...], key: str = "id") -> list[tuple[Any, ...]]:
        """Rows of the table's live data files read by pyarrow alone (no Iceberg reader)."""
        files = self.data_files(table)
        if not files:
            return []
        rows = pa.concat_tables([pq.read_table(f, columns=list(columns)) for f in files], promote_options="permissive")
        return _sorted(rows, columns, key)

    def offsets(self, table: str, connector: str = "sink") -> str | None:
        snapshot = self.catalog().load_table(table).current_snapshot()
        return None if snapshot is None else snapshot.summary.get(f"connect.offsets.{connector}")


def _sorted(rows: pa.Table, columns: tuple[str, ...], key: str) -> list[tuple[Any, ...]]:
    rows = rows.sort_by(key)
    return list(zip(*[rows[c].to_pylist() for c in columns], strict=True))


def sink_config(lake: Lake, topics: str, tables: str, **extra: Any) -> dict[str, Any]:
    """An Iceberg sink config as a Kafka Connect user writes it (the Java class name, its keys)."""
    return {
        "connector.class": "org.apache.iceberg.connect.IcebergSinkConnector",
        "topics": topics,
        "iceberg.tables": tables,
        "iceberg.tables.auto-create-enabled": "true",
        "iceberg.catalog.type": "sql",
        "iceberg.catalog.uri": lake.uri,
        "iceberg.catalog.warehouse": str(lake.warehouse),
        "iceberg.control.commit.interval-ms": "1000",
        **extra,
    }
