"""OpenLineage from a real Airflow run: the file pair's tasks report the file, the topic and the rows,
through the OpenLineage provider's file transport; never a secret."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest

from connect_core.runtime.context import Runtime
from connect_core.runtime.lineage import run_lineage
from tests.airflow.conftest import AirflowCli
from tests.conftest import file_pair

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
