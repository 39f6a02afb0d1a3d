"""The Delta sink's config through the real REST API: every problem a 400 naming its key, no table
outside `file.allowed.paths`, no storage option that reads the worker's files or reaches elsewhere,
and no credential in any answer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.rest.conftest import Served, api, make_api  # noqa: F401  (fixtures)

SECRET = "s3cr3t-delta-key-0123"


def _config(tmp_path: Path, **extra: Any) -> dict[str, Any]:
    config = {
        "connector.class": "DeltaSinkConnector",
        "topics": "orders",
        "delta.table.uri": "s3://lake-bucket/tables/${topic}",
        "delta.storage.aws_endpoint_url": "http://127.0.0.1:9000",
        "delta.storage.aws_allow_http": "true",
        "delta.storage.aws_access_key_id": "AKIAEXAMPLE",
        "delta.storage.aws_secret_access_key": SECRET,
    }
    config.update({k: v.replace("{tmp}", str(tmp_path)) if isinstance(v, str) else v for k, v in extra.items()})
    return {k: v for k, v in config.items() if v is not None}


def _local(tmp_path: Path, **extra: Any) -> dict[str, Any]:
    drop = {k: None for k in _config(tmp_path) if k.startswith("delta.")}
    return _config(tmp_path, **{**drop, "delta.table.path": str(tmp_path / "lake" / "${topic}"), **extra})


def _refused(client: httpx.Client, config: dict[str, Any]) -> dict[str, list[str]]:
    created = client.post("/connectors", json={"name": "lake", "config": config})
    assert created.status_code == 400, created.text
    assert SECRET not in created.text
    checked = client.put("/connector-plugins/DeltaSinkConnector/config/validate", json=config)
    assert checked.status_code == 200 and SECRET not in checked.text
    return {c["value"]["name"]: c["value"]["errors"] for c in checked.json()["configs"] if c["value"]["errors"]}


@pytest.mark.parametrize(
    ("extra", "key", "words"),
    [
        ({"delta.table.uri": None}, "delta.table.path", "name where the table lives"),
        ({"delta.table.path": "{tmp}/lake"}, "delta.table.path", "not both"),
        ({"delta.table.uri": "gs://lake-bucket/t"}, "delta.table.uri", "s3://bucket/path"),
        ({"delta.table.uri": "s3://b/t"}, "delta.table.uri", "bucket is 3-63"),
        ({"delta.table.uri": f"s3://AKIA:{SECRET}@lake-bucket/t"}, "delta.table.uri", "credentials go in"),
        ({"delta.table.uri": "s3://lake-bucket"}, "delta.table.uri", "name the table's prefix"),
        ({"delta.table.uri": "s3://lake-bucket/a/../../etc"}, "delta.table.uri", "no `.` or `..`"),
        ({"delta.table.uri": "s3://lake-bucket/t_${topic}"}, "delta.table.uri", "whole part"),
        (
            {"delta.storage.aws_web_identity_token_file": "/etc/shadow"},
            "delta.storage.aws_web_identity_token_file",
            "read a file",
        ),
        ({"delta.storage.AWS_PROFILE": "prod"}, "delta.storage.AWS_PROFILE", "refused"),
        (
            {"delta.storage.aws_container_credentials_full_uri": "http://169.254.170.2/creds"},
            "delta.storage.aws_container_credentials_full_uri",
            "elsewhere",
        ),
        ({"delta.storage.proxy_url": "http://evil:3128"}, "delta.storage.proxy_url", "elsewhere"),
        (
            {"delta.storage.azure_storage_account_key": SECRET},
            "delta.storage.azure_storage_account_key",
            "not a storage option",
        ),
        (
            {"delta.storage.aws_endpoint_url": f"http://u:{SECRET}@minio:9000/x"},
            "delta.storage.aws_endpoint_url",
            "no credentials",
        ),
        ({"delta.storage.aws_allow_http": "yes"}, "delta.storage.aws_allow_http", "`true` or `false`"),
        ({"delta.tables.id-columns": "id; DROP"}, "delta.tables.id-columns", "no column name"),
        ({"delta.tables.partition-by": "day(ts)"}, "delta.tables.partition-by", "no column name"),
        ({"delta.vacuum.retention-hours": 0}, "delta.vacuum.retention-hours", "greater than or equal to 1"),
        # delta-rs takes a u64: a larger number failed every upkeep run (an OverflowError) instead of a 400
        ({"delta.optimize.target-file-size": 10**30}, "delta.optimize.target-file-size", "less than or equal to"),
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


@pytest.mark.parametrize(
    ("path", "words"),
    [
        ("/etc/lake", "outside the directories"),
        ("../../../../../../etc/lake", "outside the directories"),
        ("{tmp}/lake/t_${{topic}}", "whole directory name"),
    ],
)
def test_a_local_table_must_be_inside_the_allowed_paths(
    api: Served,  # noqa: F811
    tmp_path: Path,
    path: str,
    words: str,
) -> None:
    with httpx.Client(base_url=api.url, timeout=30) as client:
        errors = _refused(client, _local(tmp_path, **{"delta.table.path": path.format(tmp=tmp_path)}))
        assert any(words in e for e in errors["delta.table.path"]), errors


def test_all_problems_come_at_once_and_good_configs_are_created(api: Served, tmp_path: Path) -> None:  # noqa: F811
    with httpx.Client(base_url=api.url, timeout=30) as client:
        errors = _refused(
            client,
            _config(
                tmp_path,
                **{
                    "delta.table.uri": "gs://x/y",
                    "delta.storage.aws_profile": "prod",
                    "delta.tables.id-columns": "a b",
                },
            ),
        )
        assert {"delta.table.uri", "delta.storage.aws_profile", "delta.tables.id-columns"} <= set(errors)
        errors = _refused(client, _local(tmp_path, **{"delta.storage.aws_region": "eu-west-1"}))
        assert "takes no storage options" in errors["delta.storage.aws_region"][0]

        created = client.post("/connectors", json={"name": "lake", "config": _config(tmp_path)})
        assert created.status_code == 201, created.text
        shown = client.get("/connectors/lake/config").text
        assert SECRET not in shown and "AKIAEXAMPLE" not in shown  # masked like every credential
        local = client.post("/connectors", json={"name": "local", "config": _local(tmp_path)})
        assert local.status_code == 201, local.text
