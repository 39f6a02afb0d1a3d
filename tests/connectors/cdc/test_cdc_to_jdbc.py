"""Change data capture end to end: the PostgreSQL CDC source, Debezium's ExtractNewRecordState, and
the JDBC sink with `delete.enabled`: the target converges to the source, deletes included."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from connect_core.runtime.context import Runtime
from connect_core.sdk.records import TopicPartition
from connect_core.testing.servers import PgServer, unique_name
from tests.conftest import make_runner
from tests.connectors.cdc._pipelines import replica_sink
from tests.connectors.jdbc_helpers import Database, mariadb_target, sink_target, target  # noqa: F401  (fixtures)

_TABLE = "SELECT id, label, amount FROM {} ORDER BY id"


@pytest.fixture
def cdc(pg_db: PgServer, runtime: Runtime) -> PgServer:
    pg_db.execute(
        "CREATE TABLE items (id int PRIMARY KEY, label text NOT NULL, amount numeric(10,2))",
        "INSERT INTO items SELECT g, 'item ' || g, g * 1.25 FROM generate_series(1, 50) g",
    )
    runtime.create_connector(
        "cdc",
        {
            "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
            "database.hostname": pg_db.host,
            "database.port": str(pg_db.port),
            "database.user": pg_db.user,
            "database.dbname": pg_db.database,
            "topic.prefix": "srv",
            "slot.name": unique_name("slot"),
            "publication.name": unique_name("pub"),
            "table.include.list": "public.items",
        },
    )
    return pg_db


def _sink(target: Database, **extra: Any) -> dict[str, Any]:  # noqa: F811
    return replica_sink(target.jdbc_url, "srv.public.items", **extra)


def _changes(db: PgServer) -> None:
    """Inserts, updates and deletes, some of one key within one batch: insert then delete, delete
    then insert again, several updates."""
    db.execute(
        "INSERT INTO items VALUES (51, 'new', 1), (52, 'short-lived', 2)",
        "UPDATE items SET label = 'changed', amount = NULL WHERE id BETWEEN 1 AND 5",
        "DELETE FROM items WHERE id IN (10, 11, 12, 52)",
        "DELETE FROM items WHERE id = 20",
        "INSERT INTO items VALUES (20, 'reborn', 20)",
        "UPDATE items SET label = label || '+' WHERE id = 1",
        "UPDATE items SET label = label || '+' WHERE id = 1",
        "DELETE FROM items WHERE id = 3",
    )


def test_the_target_converges_to_the_source_deletes_included(
    cdc: PgServer,
    runtime: Runtime,
    spark: Any,
    sink_target: Database,  # noqa: F811
) -> None:
    runtime.create_connector("sink", _sink(sink_target))
    runner = make_runner(runtime, spark)
    for changes in (None, _changes):  # the snapshot; then the changes, several of one key in one batch
        if changes is not None:
            changes(cdc)
        for name in ("cdc", "sink"):
            result = runner.run(name, 0)
            assert result.state == "SUCCEEDED", result.message
        assert sink_target.rows(_TABLE.format("items")) == cdc.rows(_TABLE.format("items"))
    assert [r[0] for r in sink_target.rows("SELECT id FROM items WHERE id IN (3, 10, 20, 52) ORDER BY id")] == [20]

    # a batch of deletes only, every row at once
    cdc.execute("DELETE FROM items")
    for name in ("cdc", "sink"):
        assert runner.run(name, 0).state == "SUCCEEDED"
    assert sink_target.rows("SELECT count(*) FROM items") == [(0,)]


def test_a_tombstone_without_delete_enabled_fails_and_commits_nothing(
    cdc: PgServer,
    runtime: Runtime,
    spark: Any,
    target: Database,  # noqa: F811
) -> None:
    runtime.create_connector("sink", _sink(target, **{"delete.enabled": "false"}))
    runner = make_runner(runtime, spark)
    assert runner.run("cdc", 0).state == "SUCCEEDED"
    assert runner.run("sink", 0).state == "SUCCEEDED"  # the snapshot: no deletes
    _changes(cdc)
    assert runner.run("cdc", 0).state == "SUCCEEDED"
    before = runtime.connectors.sink_offsets("sink")
    failed = runner.run("sink", 0)
    assert failed.state == "FAILED"
    assert "delete.enabled" in (failed.message or "") and "tombstone" in (failed.message or "")
    assert runtime.connectors.sink_offsets("sink") == before
    assert target.rows("SELECT count(*) FROM items") == [(50,)]  # nothing of the batch applied

    # the fix the error names: the same batch then applies, deletes included
    runtime.update_connector("sink", _sink(target))
    assert runner.run("sink", 0).state == "SUCCEEDED"
    assert target.rows(_TABLE.format("items")) == cdc.rows(_TABLE.format("items"))


def test_change_events_without_the_unwrap_transform_get_a_clear_error(
    cdc: PgServer,
    runtime: Runtime,
    spark: Any,
    target: Database,  # noqa: F811
) -> None:
    config = _sink(target)
    del config["transforms"], config["transforms.unwrap.type"]
    runtime.create_connector("sink", config)
    runner = make_runner(runtime, spark)
    assert runner.run("cdc", 0).state == "SUCCEEDED"
    failed = runner.run("sink", 0)
    assert failed.state == "FAILED"
    assert "ExtractNewRecordState" in (failed.message or "")
    assert TopicPartition("srv.public.items", 0) not in runtime.connectors.sink_offsets("sink")


def test_the_readme_quickstart_examples_replicate_two_tables(
    pg_db: PgServer,
    runtime: Runtime,
    spark: Any,
    target: Database,  # noqa: F811
) -> None:
    """examples/cdc/*.json as the README shows them, pointed at this test's databases."""
    examples = Path(__file__).resolve().parents[3] / "examples" / "cdc"
    source = json.loads((examples / "postgres-shop-cdc.json").read_text())
    sink = json.loads((examples / "postgres-shop-replica.json").read_text())
    pg_db.execute(
        "CREATE TABLE customers (id int PRIMARY KEY, name text)",
        "CREATE TABLE orders (id int PRIMARY KEY, customer int REFERENCES customers, total numeric(10,2))",
        "INSERT INTO customers VALUES (1, 'ann'), (2, 'bob')",
        "INSERT INTO orders VALUES (10, 1, 5.00), (11, 2, 7.50)",
    )
    source.update(
        {
            "database.hostname": pg_db.host,
            "database.port": str(pg_db.port),
            "database.user": pg_db.user,
            "database.dbname": pg_db.database,
            "slot.name": unique_name("shop"),
            "publication.name": unique_name("shop"),
        }
    )
    del source["database.password"]
    sink.update({"connection.url": target.jdbc_url})
    runtime.create_connector("shop-cdc", source)
    runtime.create_connector("shop-replica", sink)
    runner = make_runner(runtime, spark)

    def sync() -> None:
        for name in ("shop-cdc", "shop-replica"):
            result = runner.run(name, 0)
            assert result.state == "SUCCEEDED", result.message

    sync()
    pg_db.execute(
        "INSERT INTO customers VALUES (3, 'cy')",
        "UPDATE orders SET total = 9.99 WHERE id = 10",
        "DELETE FROM orders WHERE id = 11",
        "DELETE FROM customers WHERE id = 2",
    )
    sync()
    for table in ("customers", "orders"):
        query = f"SELECT * FROM {{}}{table} ORDER BY id"
        assert target.rows(query.format("replica_")) == pg_db.rows(query.format(""))
    assert target.rows("SELECT id FROM replica_customers ORDER BY id") == [(1,), (3,)]
