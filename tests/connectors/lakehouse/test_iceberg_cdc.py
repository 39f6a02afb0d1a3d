"""Change data capture into Iceberg: PostgreSQL's log → PostgresCdcSourceConnector → topic →
ExtractNewRecordState → the Iceberg sink, upserting and deleting by key. Both ways Debezium's
unwrap hands deletes on are taken: a tombstone (its key only; the id columns come from the record
key), and the rewrite mode's `__deleted`=`true` row with the op copied into `__op`. After every
batch the table equals the source table exactly, by pyiceberg's scan and by pyarrow over the files."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from connect_core.runtime.context import Runtime
from connect_core.runtime.execution.runner import TaskRunner
from connect_core.testing.servers import PgServer
from tests.connectors.jdbc_helpers import Database, synced, target  # noqa: F401  (fixtures)
from tests.connectors.lakehouse.iceberg_helpers import Lake, sink_config

UNWRAPS = {
    # the default: a delete becomes a tombstone; the sink's id columns are the record key's fields
    "tombstones": ({"iceberg.tables.upsert-mode-enabled": "true"}, {}),
    # a delete becomes its `before` row marked `__deleted`=true; `op` copied into the row as `__op`
    "rewrite": (
        {"iceberg.tables.cdc-field": "__op", "iceberg.tables.default-id-columns": "id"},
        {"transforms.unwrap.delete.tombstone.handling.mode": "rewrite", "transforms.unwrap.add.fields": "op"},
    ),
}


@pytest.mark.parametrize("unwrap", list(UNWRAPS))
def test_cdc_changes_converge_to_the_source_rows(
    runtime: Runtime,
    runner: TaskRunner,
    pg_db: PgServer,
    target: Database,  # noqa: F811
    tmp_path: Path,
    unwrap: str,
) -> None:
    lake = Lake(target, tmp_path / "warehouse")
    sink_keys, transform_keys = UNWRAPS[unwrap]
    pg_db.execute("CREATE TABLE stock (id bigint PRIMARY KEY, name text NOT NULL, qty int)")
    runtime.create_connector(
        "src",
        {
            "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
            "database.hostname": pg_db.host,
            "database.port": str(pg_db.port),
            "database.user": pg_db.user,
            "database.dbname": pg_db.database,
            "topic.prefix": "pg",
            "publication.name": f"ice_{uuid.uuid4().hex[:8]}",
            "table.include.list": "public.stock",
        },
    )
    runtime.create_connector(
        "sink",
        sink_config(
            lake,
            "pg.public.stock",
            "lake.stock",
            **sink_keys,
            **{"transforms": "unwrap", "transforms.unwrap.type": "io.debezium.transforms.ExtractNewRecordState"},
            **transform_keys,
        ),
    )

    def converged() -> list[Any]:
        synced(runner, "src", "sink")
        source = [tuple(r) for r in pg_db.rows("SELECT id, name, qty FROM stock ORDER BY id")]
        assert lake.scan("lake.stock", ("id", "name", "qty")) == source
        assert lake.parquet("lake.stock", ("id", "name", "qty")) == source
        return source

    pg_db.execute("INSERT INTO stock SELECT g, 'item' || g, g FROM generate_series(1, 50) g")
    assert len(converged()) == 50  # the snapshot (op `r`)
    pg_db.execute(
        "UPDATE stock SET qty = qty + 100 WHERE id <= 10",
        "UPDATE stock SET qty = qty + 1000, name = name || '!' WHERE id <= 5",  # a key changed twice in a batch
        "DELETE FROM stock WHERE id BETWEEN 40 AND 45",
        "DELETE FROM stock WHERE id = 7",
        "INSERT INTO stock VALUES (7, 'back', 0), (51, 'new', 51)",  # a key deleted and inserted again
    )
    rows = converged()
    assert rows[0] == (1, "item1!", 1101) and (7, "back", 0) in rows and len(rows) == 45
    pg_db.execute("DELETE FROM stock WHERE id % 2 = 0", "UPDATE stock SET name = 'odd' WHERE id = 1")
    assert len(converged()) == 23
