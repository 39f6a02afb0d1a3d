"""Transformations and predicates over Kafka's REST API: listed, described, validated with a 400 per key."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

import httpx

from tests.rest.conftest import Served


def test_plugins_list_transformations_only_when_asked(api: Served) -> None:
    connectors = httpx.get(f"{api.url}/connector-plugins").json()
    assert {p["type"] for p in connectors} == {"source", "sink"}
    everything = httpx.get(f"{api.url}/connector-plugins", params={"connectorsOnly": "false"}).json()
    by_type: dict[str, set[str]] = {}
    for p in everything:
        by_type.setdefault(p["type"], set()).add(p["class"].rsplit(".", 1)[-1])
    assert {"InsertFieldValue", "RegexRouter", "Filter", "SqlTransform"} <= by_type["transformation"]
    assert by_type["predicate"] >= {"TopicNameMatches", "HasHeaderKey", "RecordIsTombstone"}


def test_a_transformations_config_definitions(api: Served) -> None:
    kafka_name = "org.apache.kafka.connect.transforms.RegexRouter"
    defs = httpx.get(f"{api.url}/connector-plugins/{quote(kafka_name)}/config").json()
    assert {d["name"] for d in defs} == {"regex", "replacement"}
    assert all(d["documentation"] for d in defs)
    assert httpx.get(f"{api.url}/connector-plugins/{quote('InsertField$Value')}/config").status_code == 200


def test_create_with_bad_transforms_is_a_400_naming_every_key(api: Served, tmp_path: Path) -> None:
    config = {
        "connector.class": "FileSourceConnector",
        "file": str(tmp_path / "in.txt"),
        "topic": "t",
        "transforms": "route,missing,filter",
        "transforms.route.type": "RegexRouter",
        "transforms.route.regex": "(broken",
        "transforms.route.replacement": "$1",
        "transforms.missing.type": "NoSuchTransform",
        "transforms.filter.type": "Filter",
        "transforms.filter.predicate": "nope",
    }
    answer = httpx.post(f"{api.url}/connectors", json={"name": "src", "config": config})
    assert answer.status_code == 400
    message = answer.json()["message"]
    for key in ("transforms.route.regex", "transforms.missing.type", "transforms.filter.predicate"):
        assert key in message
    assert httpx.get(f"{api.url}/connectors").json() == []

    infos = httpx.put(f"{api.url}/connector-plugins/FileSourceConnector/config/validate", json=config).json()
    assert infos["error_count"] == 3
    assert {c["value"]["name"] for c in infos["configs"] if c["value"]["errors"]} == {
        "transforms.route.regex",
        "transforms.missing.type",
        "transforms.filter.predicate",
    }
