"""OpenLineage from a real Airflow run: the file pair's tasks report the file, the topic, the rows and
their columns (the schema facet), through the OpenLineage provider's file transport; never a secret."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest

from connect_core.runtime.context import Runtime
from connect_core.runtime.execution.runner import TaskRunner
from connect_core.runtime.lineage import run_lineage
from tests.airflow.conftest import AirflowCli
from tests.conftest import file_pair
from tests.connectors.jdbc_helpers import Database, create_upsert_sink, postgres, synced, target  # noqa: F401  (fixtures)

pytestmark = pytest.mark.spark_submit


def _completes(path: Path) -> list[dict[str, Any]]:
    events = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [e for e in events if e.get("eventType") == "COMPLETE" and "." in e["job"]["name"]]


def test_tasks_report_their_datasets_and_rows(airflow: AirflowCli, runtime: Runtime, tmp_path: Path) -> None:
    events = tmp_path / "openlineage.jsonl"
    airflow.env["AIRFLOW__OPENLINEAGE__TRANSPORT"] = json.dumps(
        {"type": "file", "log_file_path": str(events), "append": True}
    )
    airflow.env["AIRFLOW__OPENLINEAGE__NAMESPACE"] = "connect-test"
    source, sink = file_pair(runtime, tmp_path)
    for name in ("fileSourceConnector", "fileSinkConnector"):  # secrets a connector may hold: none may leak
        config = runtime.connectors.get(name).config
        runtime.update_connector(name, {**config, **_SECRETS})
    source.write_text("one\ntwo\n")
    ran = airflow("dags", "test", "connect__fileSourceConnector")
    assert "OpenLineage provider method failed" not in ran.stdout + ran.stderr
    airflow("dags", "test", "connect__fileSinkConnector")
    assert sink.read_text() == "one\ntwo\n"

    topics = f"connect://{runtime.topics.cluster_id()}"
    host = f"file://{socket.gethostname()}"
    done = {e["job"]["name"].split(".")[0]: e for e in _completes(events)}
    read, wrote = done["connect__fileSourceConnector"], done["connect__fileSinkConnector"]
    assert [(d["namespace"], d["name"]) for d in read["inputs"]] == [(host, str(source.resolve()))]
    assert [(d["namespace"], d["name"]) for d in read["outputs"]] == [(topics, "fileTopic")]
    assert read["outputs"][0]["outputFacets"]["outputStatistics"]["rowCount"] == 2
    assert [(d["namespace"], d["name"]) for d in wrote["inputs"]] == [(topics, "fileTopic")]
    assert [(d["namespace"], d["name"]) for d in wrote["outputs"]] == [(host, str(sink.resolve()))]
    assert wrote["outputs"][0]["outputFacets"]["outputStatistics"]["rowCount"] == 2

    # the columns: the file source's `line`, through its topic, to the sink's file
    line = [{"name": "line", "type": "string"}]
    for dataset in (*read["inputs"], *read["outputs"], *wrote["inputs"], *wrote["outputs"]):
        assert _fields(dataset) == line, dataset
    # no password anywhere in the events; not even a user name in what the tasks report of datasets
    # (the DAG's documentation facet shows the config as the Connect view does: passwords masked)
    text = events.read_text()
    for secret in ("hunter2", "s3cret", "db-pass"):
        assert secret not in text
    datasets = json.dumps([e.get(side) for e in _completes(events) for side in ("inputs", "outputs")])
    for secret in ("hunter2", "s3cret", "db-pass", "etl-user"):
        assert secret not in datasets


_SECRETS = {
    "connection.user": "etl-user",
    "connection.password": "s3cret",
    "connection.url": "jdbc:postgresql://etl-user:db-pass@db.internal:5432/shop?password=hunter2",
}


def _fields(dataset: dict[str, Any]) -> list[dict[str, Any]]:
    fields = dataset["facets"]["schema"]["fields"]
    return [{k: f[k] for k in ("name", "type")} for f in fields]


def test_jdbc_lineage_names_tables_and_never_credentials(runtime: Runtime) -> None:
    runtime.create_connector(
        "orders",
        {
            "connector.class": "JdbcSourceConnector",
            "connection.url": "jdbc:mariadb://db.internal:3307/shop?user=etl&password=hunter2",
            "connection.password": "s3cret",
            "table.whitelist": "orders,crm.customers",
            "mode": "incrementing",
            "incrementing.column.name": "id",
            "topic.prefix": "shop-",
        },
    )
    found = run_lineage(runtime, "orders", 0)
    assert [(d.namespace, d.name) for d in found.inputs] == [
        ("mysql://db.internal:3307", "shop.orders"),
        ("mysql://db.internal:3307", "crm.customers"),
    ]
    assert [d.name for d in found.outputs] == ["shop-customers", "shop-orders"]
    assert found.run_id is None and all(d.rows is None for d in found.outputs)  # no run yet
    assert "hunter2" not in repr(found) and "s3cret" not in repr(found) and "etl" not in repr(found)


def test_jdbc_runs_report_their_tables_columns(
    runtime: Runtime,
    runner: TaskRunner,
    postgres: Database,  # noqa: F811
    target: Database,  # noqa: F811
) -> None:
    """A table's columns through a JDBC source's topic to the JDBC sink's table: the schema facet's
    fields, from the segments' footers, with no connection to either database."""
    postgres.execute(
        "CREATE TABLE orders (id BIGINT PRIMARY KEY, name TEXT, amount NUMERIC(12,2), updated_at TIMESTAMPTZ)",
        "INSERT INTO orders VALUES (1, 'a', 1.50, '2024-01-01 10:00:00+00'), (2, NULL, NULL, NULL)",
    )
    secret = {"connection.password": "s3cret-pw"}
    runtime.create_connector(
        "src",
        postgres.source_config(
            mode="incrementing",
            **{"incrementing.column.name": "id", "table.whitelist": "orders", "topic.prefix": "pg_"},
            **secret,
        ),
    )
    create_upsert_sink(runtime, target, "pg_orders", **{"table.name.format": "orders"}, **secret)
    synced(runner, "src", "sink")

    columns = [("id", "bigint"), ("name", "string"), ("amount", "decimal(12,2)"), ("updated_at", "timestamp")]
    source, sink = run_lineage(runtime, "src", 0), run_lineage(runtime, "sink", 0)
    for dataset in (*source.inputs, *source.outputs, *sink.inputs, *sink.outputs):
        assert [(f.name, f.type) for f in dataset.fields or ()] == columns, dataset
    assert [(d.name, d.rows) for d in source.outputs] == [("pg_orders", 2)]
    written = target.rows(
        "SELECT column_name FROM information_schema.columns WHERE table_name = 'orders' ORDER BY ordinal_position"
    )
    assert [f.name for f in sink.outputs[0].fields or ()] == [c for (c,) in written]
    assert "s3cret-pw" not in repr(source) + repr(sink) and "user=" not in repr(source) + repr(sink)
