"""Input the metadata store cannot hold, or should not, answers 4xx naming the problem; never a 500
quoting SQL, and an unexpected error shows an id, not its text."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from connect_core.rest.service import ConnectService
from connect_core.runtime.context import Runtime
from tests.rest.conftest import Served

SQL_WORDS = ("INSERT", "SELECT", "psycopg2", "sqlalchemy", "Traceback")


def _source(tmp_path: Path, **extra: object) -> dict[str, Any]:
    return {"connector.class": "FileSourceConnector", "file": str(tmp_path / "in.txt"), "topic": "t", **extra}


def _assert_400_naming(response: httpx.Response, *named: str) -> None:
    assert response.status_code == 400, response.text
    for word in SQL_WORDS:
        assert word not in response.text
    for name in named:
        assert name in response.text, f"{name!r} not in {response.text}"


def test_a_nul_in_a_name_key_or_value_is_a_400_naming_it(api: Served, tmp_path: Path) -> None:
    url = api.url
    _assert_400_naming(
        httpx.post(f"{url}/connectors", json={"name": "a\x00b", "config": _source(tmp_path)}), "name", "NUL"
    )
    secret = {"name": "s", "config": _source(tmp_path, **{"connection.password": "hunter2\x00"})}
    response = httpx.post(f"{url}/connectors", json=secret)
    _assert_400_naming(response, "connection.password", "NUL")
    assert "hunter2" not in response.text
    _assert_400_naming(
        httpx.post(f"{url}/connectors", json={"name": "k", "config": _source(tmp_path, **{"bad\x00key": "v"})}),
        "key",
    )
    nested = {"name": "n", "config": _source(tmp_path, extra={"list": ["ok", "x\x00"]})}
    _assert_400_naming(httpx.post(f"{url}/connectors", json=nested), "extra.list[1]")
    # A lone surrogate is not Unicode: UTF-8 (and so Postgres) cannot hold it either.
    surrogate = httpx.post(
        f"{url}/connectors",
        content=b'{"name": "u", "config": {"connector.class": "FileSourceConnector", "topic": "\\ud800"}}',
        headers={"content-type": "application/json"},
    )
    _assert_400_naming(surrogate, "topic", "surrogate")

    httpx.post(f"{url}/connectors", json={"name": "src", "config": _source(tmp_path)}).raise_for_status()
    _assert_400_naming(httpx.put(f"{url}/connectors/src/config", json=_source(tmp_path, x="\x00")), "x", "NUL")
    _assert_400_naming(httpx.put(f"{url}/connectors/new/config", json=_source(tmp_path, x="\x00")), "x", "NUL")
    _assert_400_naming(httpx.patch(f"{url}/connectors/src/config", json={"y": "a\x00"}), "y", "NUL")
    assert httpx.get(f"{url}/connectors").json() == ["src"]  # nothing half-written
    assert "y" not in httpx.get(f"{url}/connectors/src/config").json()


def test_a_nul_through_rocketmq_routes_is_a_400_in_the_envelope(api: Served, tmp_path: Path) -> None:
    response = httpx.post(f"{api.url}/connectors/r", json=_source(tmp_path, x="a\x00"))
    _assert_400_naming(response, "x", "NUL")
    response = httpx.post(f"{api.url}/rocketmq/connectors/r", json=_source(tmp_path, x="a\x00"))
    _assert_400_naming(response, "x", "NUL")
    query = httpx.get(f"{api.url}/rocketmq/connectors/r", params={"config": '{"x": "\\u0000"}'})
    _assert_400_naming(query, "`x`", "NUL")  # a query parameter: past the body checks
    assert query.json()["status"] == 400  # in RocketMQ's envelope
    assert httpx.get(f"{api.url}/connectors").json() == []


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/connectors/a%00b"),
        ("GET", "/connectors/a%00b/status"),
        ("GET", "/connectors/a%00b/config"),
        ("PUT", "/connectors/a%00b/pause"),
        ("DELETE", "/connectors/a%00b"),
        ("GET", "/connectors/a%00b/offsets"),
        ("PUT", "/pools/a%00b"),
        ("DELETE", "/pools/a%00b"),
        ("GET", "/rocketmq/connectors/a%00b/status"),
        ("GET", "/connectors/a%00b/stop"),
        ("GET", "/allocated/connectors?pool=a%00b"),
    ],
)
def test_a_nul_in_a_path_or_query_parameter_is_a_400(api: Served, method: str, path: str) -> None:
    body = {"master": "local[1]"} if path.startswith("/pools") else None
    _assert_400_naming(httpx.request(method, f"{api.url}{path}", json=body), "NUL")


def test_hostile_pools_offsets_and_limits_answer_4xx(api: Served, tmp_path: Path) -> None:
    url = api.url
    for spec in (
        {"master": "local[1]", "capacity": 10**20},
        {"master": "local[1]", "capacity": -1},
        {"master": "local[1]", "capacity": "many"},
        {"master": "   "},
        {"master": "local[1]\x00"},
        {"master": "local[1]", "conf": {"spark.x": "\x00"}},
        {"master": "local[1]", "conf": {"spark.x": {"nested": 1}}},
        {"master": "local[1]", "labels": {"\x00": "v"}},
        {"master": "local[1]", "probe_url": "file:///etc/passwd"},
        {"master": ["local[1]"]},
    ):
        response = httpx.put(f"{url}/pools/p", json=spec)
        assert response.status_code == 400, (spec, response.text)
    assert "p" not in {pool["name"] for pool in httpx.get(f"{url}/pools").json()}

    sink = {"connector.class": "FileSinkConnector", "file": str(tmp_path / "out.txt"), "topics": "t"}
    httpx.post(f"{url}/connectors", json={"name": "snk", "config": sink}).raise_for_status()
    httpx.post(f"{url}/connectors", json={"name": "src", "config": _source(tmp_path)}).raise_for_status()
    httpx.put(f"{url}/connectors/snk/stop").raise_for_status()
    httpx.put(f"{url}/connectors/src/stop").raise_for_status()
    for name, entry in (
        ("snk", {"partition": {"kafka_topic": "t", "kafka_partition": 2**40}, "offset": {"kafka_offset": 1}}),
        ("snk", {"partition": {"kafka_topic": "t", "kafka_partition": 0}, "offset": {"kafka_offset": 2**70}}),
        ("snk", {"partition": {"kafka_topic": "t", "kafka_partition": -1}, "offset": {"kafka_offset": 1}}),
        ("snk", {"partition": ["t", 0], "offset": {"kafka_offset": 1}}),
        ("snk", {"partition": {"kafka_topic": "t", "kafka_partition": 0}, "offset": 5}),
        ("snk", {"partition": {"kafka_topic": "t\x00", "kafka_partition": 0}, "offset": {"kafka_offset": 1}}),
        ("src", {"partition": {"file\x00": "x"}, "offset": {"position": 1}}),
        ("src", {"partition": {"file": "x"}, "offset": {"position": "\x00"}}),
        ("src", {"partition": "x", "offset": {"position": 1}}),
    ):
        response = httpx.patch(f"{url}/connectors/{name}/offsets", json={"offsets": [entry]})
        assert response.status_code == 400, (entry, response.text)
    assert httpx.get(f"{url}/connectors/snk/offsets").json() == {"offsets": []}

    for path in (
        "/connectors/src/runs?limit=100000000000000000000",
        "/connectors/src/runs?limit=-1",
        "/rebalances?limit=abc",
        "/connectors/src/tasks/99999999999999999999/status",
        "/rocketmq/connectors/src/tasks/99999999999999999999/status",
    ):
        response = httpx.get(f"{url}{path}")
        assert 400 <= response.status_code < 500, (path, response.text)
    assert httpx.post(f"{url}/connectors/src/tasks/99999999999999999999/restart").status_code == 404


def test_an_unexpected_error_shows_an_id_not_its_text(
    api: Served, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(_self: ConnectService) -> list[dict[str, Any]]:
        raise RuntimeError("SELECT secret FROM vault WHERE password = 'hunter2'")

    monkeypatch.setattr(ConnectService, "plugins", broken)
    with caplog.at_level(logging.ERROR, logger="connect_core.rest.errors"):
        for path in ("/connector-plugins", "/plugin/list"):  # Kafka's shape and RocketMQ's envelope
            response = httpx.get(f"{api.url}{path}")
            assert response.status_code == 500
            assert "hunter2" not in response.text and "SELECT" not in response.text
            error_id = response.text.split("id `")[1].split("`")[0]
            assert any(error_id in r.getMessage() and r.exc_info for r in caplog.records)


def test_a_stored_config_that_no_longer_validates_shows_none_of_its_values(
    api: Served, runtime: Runtime, tmp_path: Path
) -> None:
    httpx.post(f"{api.url}/connectors", json={"name": "src", "config": _source(tmp_path)}).raise_for_status()
    broken = {"connector.class": "FileSourceConnector", "topic": "t", "connection.password": "hunter2"}
    with runtime.engine.begin() as conn:  # as a settings change or an older version could leave it
        conn.execute(text("UPDATE connect.connectors SET config = :c"), {"c": json.dumps(broken)})
    for path in ("/connectors/src", "/connectors/src/config", "/connectors/src/topics", "/connectors/src/status"):
        response = httpx.get(f"{api.url}{path}")
        assert response.status_code in (200, 400), (path, response.text)
        assert "hunter2" not in response.text, path
