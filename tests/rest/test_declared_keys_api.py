"""Keys every source or sink has are validated at create like any other: a bad value is a 400 naming
the key, never a run that fails (and is retried) later; the plugin's definitions list them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.rest.conftest import Served


def _source(tmp_path: Path, **extra: object) -> dict[str, Any]:
    return {"connector.class": "FileSourceConnector", "file": str(tmp_path / "in.txt"), "topic": "t", **extra}


def _sink(tmp_path: Path, **extra: object) -> dict[str, Any]:
    return {"connector.class": "FileSinkConnector", "file": str(tmp_path / "out.txt"), "topics": "t", **extra}


@pytest.mark.parametrize("bad", ["abc", 0, -1, 10**9, True, 2.5])
def test_a_bad_topic_partitions_is_a_400_naming_it_and_nothing_is_stored(
    api: Served, tmp_path: Path, bad: object
) -> None:
    for key in ("topic.partitions", "topic.creation.default.partitions"):  # Kafka's name too
        response = httpx.post(f"{api.url}/connectors", json={"name": "src", "config": _source(tmp_path, **{key: bad})})
        assert response.status_code == 400, response.text
        assert key in response.json()["message"]
    assert httpx.get(f"{api.url}/connectors").json() == []


@pytest.mark.parametrize("bad", ["many", 0, False])
def test_a_bad_sink_batch_max_rows_is_a_400_naming_it(api: Served, tmp_path: Path, bad: object) -> None:
    response = httpx.post(
        f"{api.url}/connectors", json={"name": "out", "config": _sink(tmp_path, **{"batch.max.rows": bad})}
    )
    assert response.status_code == 400, response.text
    assert "batch.max.rows" in response.json()["message"]


def test_good_values_are_accepted_as_before(api: Served, tmp_path: Path) -> None:
    created = httpx.post(
        f"{api.url}/connectors", json={"name": "src", "config": _source(tmp_path, **{"topic.partitions": "3"})}
    )
    assert created.status_code == 201, created.text
    sink = httpx.post(
        f"{api.url}/connectors", json={"name": "out", "config": _sink(tmp_path, **{"batch.max.rows": 500})}
    )
    assert sink.status_code == 201, sink.text


def test_validate_and_the_plugin_definitions_name_the_common_keys(api: Served, tmp_path: Path) -> None:
    checked = httpx.put(
        f"{api.url}/connector-plugins/FileSourceConnector/config/validate",
        json=_source(tmp_path, **{"topic.partitions": "abc"}),
    ).json()
    errors = {c["value"]["name"]: c["value"]["errors"] for c in checked["configs"]}
    assert errors["topic.partitions"] and checked["error_count"] == 1

    source_keys = {d["name"] for d in httpx.get(f"{api.url}/connector-plugins/FileSourceConnector/config").json()}
    sink_keys = {d["name"] for d in httpx.get(f"{api.url}/connector-plugins/FileSinkConnector/config").json()}
    assert {"topic.partitions", "errors.tolerance"} <= source_keys and "batch.max.rows" not in source_keys
    assert {"batch.max.rows", "errors.tolerance"} <= sink_keys and "topic.partitions" not in sink_keys


# -- one whole-number rule, at create as where the keys are read ---------------------------------


@pytest.mark.parametrize(
    ("key", "bad"),
    [
        ("retention.ms", 3.0),
        ("retention.ms", "3.0"),
        ("retention.ms", "+3"),
        ("segment.bytes", "1_000"),
        ("retention.ms", 1e3),
        ("retention.bytes", 2**63),
    ],
)
def test_a_topic_creation_value_the_runner_would_refuse_is_a_400_naming_it(
    api: Served, tmp_path: Path, key: str, bad: object
) -> None:
    from connect_core.runtime.topics.config import TopicConfigError, creation_config

    config = _source(tmp_path, **{f"topic.creation.default.{key}": bad})
    with pytest.raises(TopicConfigError):  # what every run would say, topic creation after topic creation
        creation_config(config)
    response = httpx.put(f"{api.url}/connectors/src/config", json=config)
    assert response.status_code == 400, response.text
    assert f"topic.creation.default.{key}" in response.json()["message"]
    assert httpx.get(f"{api.url}/connectors").json() == []


@pytest.mark.parametrize("bad", [" 3 ", "+3", "3_0", "3.0", 3.0, "1e3", "\uff11\uff12", ""])
def test_topic_partitions_takes_plain_digits_only(api: Served, tmp_path: Path, bad: object) -> None:
    for key in ("topic.partitions", "topic.creation.default.partitions"):
        response = httpx.post(f"{api.url}/connectors", json={"name": "src", "config": _source(tmp_path, **{key: bad})})
        assert response.status_code == 400, response.text
        assert key in response.json()["message"]


@pytest.mark.parametrize("bad", [10**30, True, " 3 ", "+3", 5.0])
def test_batch_max_rows_takes_a_whole_number_within_a_bigint(api: Served, tmp_path: Path, bad: object) -> None:
    response = httpx.post(
        f"{api.url}/connectors", json={"name": "out", "config": _sink(tmp_path, **{"batch.max.rows": bad})}
    )
    assert response.status_code == 400, response.text
    assert "batch.max.rows" in response.json()["message"]


def test_the_jdbc_source_batch_max_rows_is_no_boolean() -> None:
    from pydantic import ValidationError

    from connect_core.connectors.jdbc.config import JdbcSourceConfig

    base = {
        "connector.class": "JdbcSourceConnector",
        "connection.url": "jdbc:postgresql://127.0.0.1:5432/x",
        "table.whitelist": "t",
        "mode": "bulk",
        "topic.prefix": "j_",
    }
    assert JdbcSourceConfig.model_validate({**base, "batch.max.rows": "600"}).batch_max_rows == 600
    for bad in (True, 10**30, "1e3"):
        with pytest.raises(ValidationError, match=r"batch\.max\.rows"):
            JdbcSourceConfig.model_validate({**base, "batch.max.rows": bad})


# -- one setting, two spellings ------------------------------------------------------------------


@pytest.mark.parametrize("second", [5, "bogus", 0])
def test_both_spellings_of_topic_partitions_must_agree_and_both_are_checked(
    api: Served, tmp_path: Path, second: object
) -> None:
    config = _source(tmp_path, **{"topic.partitions": 2, "topic.creation.default.partitions": second})
    response = httpx.post(f"{api.url}/connectors", json={"name": "src", "config": config})
    assert response.status_code == 400, response.text
    message = response.json()["message"]
    assert "topic.creation.default.partitions" in message
    if second == 5:
        assert "`topic.partitions` and `topic.creation.default.partitions`" in message
    assert httpx.get(f"{api.url}/connectors").json() == []


def test_both_spellings_with_one_value_are_accepted(api: Served, tmp_path: Path) -> None:
    config = _source(tmp_path, **{"topic.partitions": 2, "topic.creation.default.partitions": "2"})
    created = httpx.post(f"{api.url}/connectors", json={"name": "src", "config": config})
    assert created.status_code == 201, created.text
