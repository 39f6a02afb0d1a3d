"""kill -9 of real `spark-submit` runs that change a topic's schema: a source run whose contract
sets records aside, killed after staging them and its dead letters, and a sink run that evolved
its target, killed before its commit. Each rerun commits the change exactly once: one history
version, the connector's shape moved with its data, every record once in the topic, the dead-letter
topic or the target."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from connect_core.runtime.store.connector_schemas import ConnectorSchemas
from connect_core.runtime.store.db import make_engine
from connect_core.runtime.topics.schema_history import SchemaHistory
from tests.connectors.jdbc_helpers import Database, postgres, target  # noqa: F401  (fixtures)
from tests.e2e.test_spark_submit import Cli, cli  # noqa: F401  (fixture)

pytestmark = pytest.mark.spark_submit


def test_killed_runs_that_change_the_schema_commit_it_once_on_rerun(
    cli: Cli,  # noqa: F811
    postgres: Database,  # noqa: F811
    target: Database,  # noqa: F811
    database_url: str,
    tmp_path: Path,
) -> None:
    postgres.execute(
        "CREATE TABLE items (id int PRIMARY KEY, name text, qty int)",
        "INSERT INTO items VALUES (1, 'a', 1), (2, 'b', 2)",
    )
    source = postgres.source_config(
        mode="incrementing",
        **{
            "incrementing.column.name": "id",
            "table.whitelist": "items",
            "topic.prefix": "",
            "schema.contract.data_type": "discard_row",
            "errors.deadletterqueue.topic.name": "dlq",
        },
    )
    sink = {
        "connector.class": "JdbcSinkConnector",
        "connection.url": target.jdbc_url,
        "topics": "items",
        "insert.mode": "upsert",
        "pk.mode": "record_value",
        "pk.fields": "id",
        "auto.create": True,
        "schema.propagation": "propagate_columns",
    }
    (tmp_path / "src.json").write_text(json.dumps(source))
    (tmp_path / "sink.json").write_text(json.dumps(sink))
    cli("create", "src", "--config", "src.json")
    cli("create", "sink", "--config", "sink.json")
    assert cli.run("src")["rows"] == 2 and cli.run("sink")["state"] == "SUCCEEDED"
    engine = make_engine(database_url)
    history, shapes = SchemaHistory(engine), ConnectorSchemas(engine)
    first = shapes.of("src")["items"].schema.fingerprint

    # a column added (the contract lets it through) and one widened (a value that does not fit: set aside)
    postgres.execute(
        "ALTER TABLE items ADD COLUMN email text",
        "ALTER TABLE items ALTER COLUMN qty TYPE bigint",
        "INSERT INTO items VALUES (3, 'c', 3, 'c@x'), (4, 'd', 5000000000, 'd@x')",
    )
    # killed with its records and its dead letters staged: nothing of the run is recorded
    killed = cli("run", "src", check=False, CONNECT_FAULT="after_stage")
    assert killed.returncode != 0, killed.stdout
    assert history.versions("items") == [1]
    assert shapes.of("src")["items"].schema.fingerprint == first
    rerun = cli.run("src")
    assert (rerun["state"], rerun["rows"]) == ("SUCCEEDED", 1), rerun
    assert history.versions("items") == [1, 2]
    latest = history.version("items")
    assert latest is not None and [c["name"] for c in latest.schema.columns] == ["id", "name", "qty", "email"]
    assert next(c for c in latest.schema.columns if c["name"] == "qty")["type"] == "int"  # the former type
    assert shapes.of("src")["items"].schema.fingerprint == latest.schema.fingerprint
    described = {t["name"]: t for t in json.loads(cli("topics", "list", "--output", "json").stdout)}
    assert described["dlq"]["end_offsets"] == {"0": 1} or sum(described["dlq"]["end_offsets"].values()) == 1

    killed = cli("run", "sink", check=False, CONNECT_FAULT="before_commit")
    assert killed.returncode != 0, killed.stdout
    assert target.rows("SELECT id, email FROM items ORDER BY id") == [(1, None), (2, None), (3, "c@x")]
    assert shapes.of("sink")["items"].schema.fingerprint != latest.schema.fingerprint  # not committed
    assert cli.run("sink")["state"] == "SUCCEEDED"
    assert target.rows("SELECT id, email FROM items ORDER BY id") == [(1, None), (2, None), (3, "c@x")]
    assert shapes.of("sink")["items"].schema.fingerprint == latest.schema.fingerprint
    engine.dispose()
