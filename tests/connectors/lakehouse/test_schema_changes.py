"""A captured table's columns change between runs; the Iceberg and Delta sinks follow their
connector's schema contract and `schema.propagation`: PostgreSQL's log → CDC source → topic →
ExtractNewRecordState → the sink, upserting by key. The table is read back by pyiceberg's scan (or
delta-rs), not by the sink."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from deltalake import DeltaTable

from connect_core.runtime.context import Runtime
from connect_core.runtime.execution.runner import TaskRunner
from connect_core.runtime.management.local import LocalManagement
from connect_core.testing.servers import PgServer
from tests.connectors.jdbc_helpers import Database, synced, target  # noqa: F401  (fixtures)
from tests.connectors.lakehouse.delta_helpers import sink_config as delta_config
from tests.connectors.lakehouse.iceberg_helpers import Lake, sink_config

MODES = ["evolve", "freeze", "discard_row", "discard_value"]
CHANGES: dict[str, tuple[list[str], list[str]]] = {
    "added": (["ALTER TABLE stock ADD COLUMN email text"], ["(3, 'c', 3, 3.5, 'c@x')", "(4, 'd', 4, 4.5, NULL)"]),
    "dropped": (["ALTER TABLE stock DROP COLUMN name"], ["(3, 3, 3.5)", "(4, 4, 4.5)"]),
    "wider": (["ALTER TABLE stock ALTER COLUMN qty TYPE bigint"], ["(3, 'c', 3, 3.5)", "(4, 'd', 5000000000, 4.5)"]),
    "narrower": (["ALTER TABLE stock ALTER COLUMN amount TYPE int"], ["(3, 'c', 3, 3)", "(4, 'd', 4, 4)"]),
    "key": (
        ["ALTER TABLE stock DROP CONSTRAINT stock_pkey", "ALTER TABLE stock ADD PRIMARY KEY (id, name)"],
        ["(3, 'c', 3, 3.5)", "(4, 'd', 4, 4.5)"],
    ),
}
UNWRAP = {"transforms": "unwrap", "transforms.unwrap.type": "io.debezium.transforms.ExtractNewRecordState"}


def _capture(runtime: Runtime, pg_db: PgServer) -> None:
    pg_db.execute(
        "CREATE TABLE stock (id bigint PRIMARY KEY, name text, qty int, amount numeric(10,2))",
        "INSERT INTO stock VALUES (1, 'a', 1, 1.5), (2, 'b', 2, 2.5)",
    )
    runtime.create_connector(
        "src",
        {
            "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
            "database.hostname": pg_db.host,
            "database.port": str(pg_db.port),
            "database.user": pg_db.user,
            "database.dbname": pg_db.database,
            "topic.prefix": "pg",
            "publication.name": f"sc_{uuid.uuid4().hex[:8]}",
            "table.include.list": "public.stock",
        },
    )


@pytest.mark.parametrize("change", list(CHANGES))
@pytest.mark.parametrize("mode", MODES)
def test_each_contract_mode_on_each_change_into_iceberg(
    runtime: Runtime,
    runner: TaskRunner,
    pg_db: PgServer,
    target: Database,  # noqa: F811
    tmp_path: Path,
    mode: str,
    change: str,
) -> None:
    lake = Lake(target, tmp_path / "warehouse")
    _capture(runtime, pg_db)
    extra = {
        "iceberg.tables.upsert-mode-enabled": "true",
        "schema.contract": mode,
        "schema.propagation": "propagate_columns",
        "errors.deadletterqueue.topic.name": "dlq",
        **UNWRAP,
    }
    runtime.create_connector("sink", sink_config(lake, "pg.public.stock", "lake.stock", **extra))
    synced(runner, "src", "sink")
    ddl, rows = CHANGES[change]
    pg_db.execute(*ddl, "INSERT INTO stock VALUES " + ", ".join(rows))
    synced(runner, "src")
    result = runner.run("sink", 0)
    if mode == "freeze" or (mode == "discard_value" and change == "key"):
        assert result.state == "FAILED" and result.error_kind == "data", result.message
        assert "schema contract: topic `pg.public.stock`" in result.message
        assert len(lake.scan("lake.stock", ("id",))) == 2
        return
    if mode == "evolve" and change in ("narrower", "key"):  # a breaking change: paused until accepted
        assert result.state == "FAILED" and "paused on a breaking change" in result.message, result.message
        assert runtime.connectors.status("sink").state == "PAUSED"
        LocalManagement(runtime).accept_schema("sink")
        result = runner.run("sink", 0)
    assert result.state == "SUCCEEDED", result.message
    table = lake.catalog().load_table("lake.stock")
    fields = {f.name: f for f in table.schema().fields}
    ids = [r[0] for r in lake.scan("lake.stock", ("id",))]
    kept = {
        "evolve": [3, 4],
        "discard_row": {"added": [4], "dropped": [], "wider": [3], "narrower": [3, 4], "key": []}[change],
        "discard_value": [3, 4],
    }[mode]
    assert ids == [1, 2, *kept]
    assert ("email" in fields) == (mode == "evolve" and change == "added")
    if change == "dropped":
        assert "name" in fields and not fields["name"].required  # kept, optional (propagate_columns)
    if change == "wider":
        assert str(fields["qty"].field_type) == ("long" if mode == "evolve" else "int")
        qty = dict(lake.scan("lake.stock", ("id", "qty")))
        assert qty.get(4) == {"evolve": 5_000_000_000, "discard_value": None}.get(mode, qty.get(4))
    if change == "narrower":
        assert str(fields["amount"].field_type).startswith("decimal")  # never narrowed
    aside = {"added": 1, "dropped": 2, "wider": 1, "narrower": 0, "key": 2}[change] if mode == "discard_row" else 0
    assert result.counts.get("contract_discarded_rows", 0) == aside
    assert result.counts.get("dead_lettered", 0) == aside


@pytest.mark.parametrize("mode", ["propagate_columns", "propagate_fully"])
def test_a_dropped_column_is_kept_or_dropped_in_iceberg_and_delta(
    runtime: Runtime,
    runner: TaskRunner,
    pg_db: PgServer,
    target: Database,  # noqa: F811
    tmp_path: Path,
    mode: str,
) -> None:
    lake = Lake(target, tmp_path / "warehouse")
    _capture(runtime, pg_db)
    runtime.create_connector(
        "ice",
        sink_config(
            lake,
            "pg.public.stock",
            "lake.stock",
            **{"iceberg.tables.upsert-mode-enabled": "true", "schema.propagation": mode, **UNWRAP},
        ),
    )
    runtime.create_connector(
        "delta",
        delta_config(
            "pg.public.stock",
            path=str(tmp_path / "delta" / "stock"),
            **{"delta.tables.upsert-mode-enabled": "true", "schema.propagation": mode, **UNWRAP},
        ),
    )
    synced(runner, "src", "ice", "delta")
    pg_db.execute("ALTER TABLE stock DROP COLUMN name", "INSERT INTO stock VALUES (3, 3, 3.5)")
    synced(runner, "src", "ice", "delta")
    iceberg_columns = [f.name for f in lake.catalog().load_table("lake.stock").schema().fields]
    delta = DeltaTable(str(tmp_path / "delta" / "stock"))
    delta_columns = [f.name for f in delta.schema().fields]
    assert ("name" in iceberg_columns) == ("name" in delta_columns) == (mode == "propagate_columns")
    assert sorted(delta.to_pyarrow_table().column("id").to_pylist()) == [1, 2, 3]
    assert [r[0] for r in lake.scan("lake.stock", ("id",))] == [1, 2, 3]
