"""The Iceberg sink's config through the real REST API: every problem a 400 naming its key, and
nothing in the catalog keys that makes pyiceberg load code or write outside the allowed paths."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.rest.conftest import Served, api, make_api  # noqa: F401  (fixtures)

SECRET = "s3cr3t-pw"


def _config(tmp_path: Path, **extra: Any) -> dict[str, Any]:
    config = {
        "connector.class": "io.tabular.iceberg.connect.IcebergSinkConnector",
        "topics": "orders",
        "iceberg.tables": "shop.orders",
        "iceberg.catalog.type": "sql",
        "iceberg.catalog.uri": f"postgresql+psycopg2://etl:{SECRET}@127.0.0.1:5432/lake",
        "iceberg.catalog.warehouse": str(tmp_path / "warehouse"),
    }
    config.update(extra)
    return {k: v for k, v in config.items() if v is not None}


def _refused(client: httpx.Client, config: dict[str, Any]) -> dict[str, list[str]]:
    created = client.post("/connectors", json={"name": "lake", "config": config})
    assert created.status_code == 400, created.text
    assert SECRET not in created.text
    checked = client.put("/connector-plugins/IcebergSinkConnector/config/validate", json=config)
    assert checked.status_code == 200 and SECRET not in checked.text
    return {c["value"]["name"]: c["value"]["errors"] for c in checked.json()["configs"] if c["value"]["errors"]}


@pytest.mark.parametrize(
    ("extra", "key", "words"),
    [
        ({"iceberg.tables": None}, "iceberg.tables", "name the tables"),
        ({"iceberg.tables": "orders"}, "iceberg.tables", "no table name"),
        ({"iceberg.tables.dynamic-enabled": "true"}, "iceberg.tables.route-field", "needs the column"),
        ({"iceberg.catalog.type": "dynamodb"}, "iceberg.catalog.type", "not one of the catalogs"),
        ({"iceberg.catalog.type": None}, "iceberg.catalog.type", "name the catalog"),
        ({"iceberg.catalog.py-catalog-impl": "os.system"}, "iceberg.catalog.py-catalog-impl", "code"),
        ({"iceberg.catalog.py-io-impl": "evil.FileIO"}, "iceberg.catalog.py-io-impl", "code"),
        ({"iceberg.catalog.catalog-impl": "com.evil.Catalog"}, "iceberg.catalog.catalog-impl", "not load"),
        ({"iceberg.catalog.s3.endpoint": "http://x"}, "iceberg.catalog.s3.endpoint", "not a catalog setting"),
        ({"iceberg.catalog.uri": "sqlite:////etc/cron.d/x.db"}, "iceberg.catalog.uri", "PostgreSQL"),
        ({"iceberg.catalog.uri": f"postgresql://u:{SECRET}@h/db?sslkey=/etc/shadow"}, "iceberg.catalog.uri", "sslkey"),
        ({"iceberg.catalog.warehouse": None}, "iceberg.catalog.warehouse", "name the directory"),
        ({"iceberg.catalog.warehouse": "/etc/lake"}, "iceberg.catalog.warehouse", "outside the directories"),
        ({"iceberg.catalog.warehouse": "../../../../etc"}, "iceberg.catalog.warehouse", "outside the directories"),
        (
            {"iceberg.tables.default-partition-by": "days(ts), bucket(id, 0)"},
            "iceberg.tables.default-partition-by",
            "at least 1",
        ),
        (
            {"iceberg.tables.default-partition-by": "ts; DROP"},
            "iceberg.tables.default-partition-by",
            "no partition spec",
        ),
    ],
)
def test_each_problem_is_a_400_naming_its_key(
    api: Served,  # noqa: F811
    tmp_path: Path,
    extra: dict[str, Any],
    key: str,
    words: str,
) -> None:
    with httpx.Client(base_url=api.url, timeout=30) as client:
        errors = _refused(client, _config(tmp_path, **extra))
        assert key in errors and any(words in e for e in errors[key]), errors
        assert client.get("/connectors").json() == []


def test_all_problems_come_at_once_and_a_good_config_is_created(api: Served, tmp_path: Path) -> None:  # noqa: F811
    with httpx.Client(base_url=api.url, timeout=30) as client:
        errors = _refused(
            client,
            _config(
                tmp_path,
                **{"iceberg.tables": None, "iceberg.catalog.type": "bigquery", "iceberg.catalog.py-io-impl": "x.Y"},
            ),
        )
        assert {"iceberg.tables", "iceberg.catalog.type", "iceberg.catalog.py-io-impl"} <= set(errors)

        java = _config(
            tmp_path,
            **{
                "iceberg.catalog.type": None,
                "iceberg.catalog.catalog-impl": "org.apache.iceberg.jdbc.JdbcCatalog",
                "iceberg.catalog.uri": "jdbc:postgresql://127.0.0.1:5432/lake",
                "iceberg.catalog.jdbc.user": "etl",
                "iceberg.catalog.jdbc.password": SECRET,
                "iceberg.catalog.io-impl": "org.apache.iceberg.hadoop.HadoopFileIO",
                "iceberg.tables.default-partition-by": "days(ts), name",
                "iceberg.control.commit.interval-ms": "120000",
            },
        )
        created = client.post("/connectors", json={"name": "lake", "config": java})
        assert created.status_code == 201, created.text
        assert SECRET not in client.get("/connectors/lake/config").text  # masked like every password


def test_lineage_names_each_table_in_its_catalog_and_one_task_writes(tmp_path: Path) -> None:
    from connect_core.connectors.lakehouse.iceberg import IcebergSinkConfig, IcebergSinkConnector
    from connect_core.sdk import LineageDataset

    connector = IcebergSinkConnector()
    sql = IcebergSinkConfig.model_validate(_config(tmp_path, **{"iceberg.tables": "shop.orders, shop.items"}))
    warehouse = f"file://{tmp_path / 'warehouse'}"
    assert connector.lineage(sql) == [LineageDataset(warehouse, "shop.orders"), LineageDataset(warehouse, "shop.items")]
    rest = IcebergSinkConfig.model_validate(
        _config(
            tmp_path,
            **{"iceberg.catalog.type": "rest", "iceberg.catalog.uri": f"https://u:{SECRET}@cat.example:8181/api/"},
        )
    )
    assert connector.lineage(rest) == [LineageDataset("https://cat.example:8181/api", "shop.orders")]
    routed = IcebergSinkConfig.model_validate(
        _config(tmp_path, **{"iceberg.tables.dynamic-enabled": "true", "iceberg.tables.route-field": "t"})
    )
    assert connector.lineage(routed) == []  # known only from the records
    assert len(connector.task_configs(sql, 8)) == 1  # one committer per table, as the Java sink's coordinator
