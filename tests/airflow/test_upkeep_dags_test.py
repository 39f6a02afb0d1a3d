"""Real Airflow: `airflow dags test` of an Iceberg sink's DAG runs its sink task, then its upkeep tasks:
a due job runs (and is recorded), a job that succeeded within its `upkeep.schedule` is skipped. The
sink's topic has nothing new, so its task skips before any Spark start: the DAG runs in seconds."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
from sqlalchemy import create_engine, text

from connect_core.connectors.lakehouse.iceberg import IcebergSinkConfig, _catalog, _offsets
from connect_core.runtime.context import Runtime
from connect_core.runtime.store.upkeep import UpkeepStore
from tests.airflow.conftest import AirflowCli
from tests.connectors.jdbc_helpers import Database, target  # noqa: F401  (fixtures)
from tests.connectors.lakehouse.iceberg_helpers import Lake, sink_config


def _states(airflow_db: str, dag_id: str) -> dict[str, str]:
    """Each task's state in the DAG's latest run, from Airflow's own database."""
    engine = create_engine(airflow_db)
    try:
        with engine.connect() as conn:
            query = (
                "SELECT task_id, state FROM task_instance WHERE dag_id = :dag AND run_id = "
                "(SELECT run_id FROM dag_run WHERE dag_id = :dag ORDER BY id DESC LIMIT 1)"
            )
            return {task: state for task, state in conn.execute(text(query), {"dag": dag_id})}
    finally:
        engine.dispose()


def test_the_sink_then_a_due_upkeep_job_runs_and_one_not_due_is_skipped(
    airflow: AirflowCli,
    airflow_db: str,
    runtime: Runtime,
    target: Database,  # noqa: F811
    tmp_path: Path,
) -> None:
    lake = Lake(target, tmp_path / "warehouse")
    config = sink_config(lake, "orders", "shop.orders", **{"upkeep.schedule": "1d"})
    runtime.create_connector("lake", config)
    catalog = _catalog.load_catalog(IcebergSinkConfig.model_validate(config))
    catalog.create_namespace("shop")
    table = catalog.create_table("shop.orders", schema=pa.schema([("id", pa.int64()), ("body", pa.string())]))
    for run in range(3):  # three runs of the sink: three small files
        ids = list(range(run * 10, run * 10 + 10))
        offsets = {_offsets.key("lake"): _offsets.encode({"orders": {0: run * 10 + 10}})}
        table.append(pa.table({"id": ids, "body": [f"b{i}" for i in ids]}), snapshot_properties=offsets)
    rows = lake.scan("shop.orders", ("id", "body"))
    store = UpkeepStore(runtime.engine)
    store.record("lake", "expire_snapshots", started_at=datetime.now(UTC), result={"earlier": True})  # not due

    airflow("dags", "test", "connect__lake")

    assert _states(airflow_db, "connect__lake") == {
        "task_0": "skipped",  # nothing new in its topic: no Spark started
        "upkeep_compact": "success",
        "upkeep_expire_snapshots": "skipped",
        "upkeep_remove_orphans": "success",
    }
    assert len(lake.data_files("shop.orders")) == 1
    assert lake.scan("shop.orders", ("id", "body")) == rows
    assert json.loads(lake.offsets("shop.orders", "lake") or "{}") == {"orders": {"0": 30}}
    records = {r.job: r for r in store.listing("lake")}
    assert records["compact"].state == "SUCCEEDED"
    assert records["compact"].result["tables"]["shop.orders"]["files_rewritten"] == 3
    assert records["expire_snapshots"].result == {"earlier": True}  # skipped: its record untouched
    assert records["remove_orphans"].state == "SUCCEEDED"
