"""The REST edge over real HTTP: hostile sizes and shapes, DNS rebinding, cross-site browsers, docs behind auth."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from connect_core.runtime.context import Runtime
from tests.rest.conftest import Served


def _source(tmp_path: Path, **extra: object) -> dict[str, object]:
    return {"connector.class": "FileSourceConnector", "file": str(tmp_path / "in.txt"), "topic": "t", **extra}


def test_a_body_over_the_limit_is_refused_at_once(api: Served, runtime: Runtime, tmp_path: Path) -> None:
    big = json.dumps({"name": "big", "config": _source(tmp_path, blob="x" * (2 * 1024 * 1024))})
    started = time.monotonic()
    answer = httpx.post(f"{api.url}/connectors", content=big, headers={"content-type": "application/json"})
    assert answer.status_code == 413 and "CONNECT_REST_MAX_BODY_BYTES" in answer.json()["message"]
    assert time.monotonic() - started < 2
    # Chunked (no Content-Length): refused as soon as the limit passes.
    chunks = (big[i : i + 65536].encode() for i in range(0, len(big), 65536))
    chunked = httpx.post(f"{api.url}/connectors", content=chunks, headers={"content-type": "application/json"})
    assert chunked.status_code == 413
    assert runtime.connectors.names() == []


def test_a_long_value_and_deep_nesting_are_400_and_never_stored(api: Served, runtime: Runtime, tmp_path: Path) -> None:
    long_value = httpx.post(
        f"{api.url}/connectors", json={"name": "long", "config": _source(tmp_path, blob="x" * 200_000)}
    )
    assert long_value.status_code == 400 and "CONNECT_REST_MAX_VALUE_BYTES" in long_value.json()["message"]
    deep: object = "leaf"
    for _ in range(900):
        deep = {"a": deep}
    nested = httpx.post(f"{api.url}/connectors", json={"name": "deep", "config": _source(tmp_path, deep=deep)})
    assert nested.status_code == 400 and "nested deeper" in nested.json()["message"]
    very_deep = '{"name": "d", "config": ' + "[" * 100_000 + "]" * 100_000 + "}"
    too_deep = httpx.post(f"{api.url}/connectors", content=very_deep, headers={"content-type": "application/json"})
    assert too_deep.status_code == 400
    # The same limits hold where a config comes in by query string (RocketMQ's GET create).
    forty: object = 1
    for _ in range(40):
        forty = {"a": forty}
    by_query = httpx.get(f"{api.url}/rocketmq/connectors/q", params={"config": json.dumps(_source(tmp_path, d=forty))})
    assert by_query.status_code == 400 and "nested deeper" in by_query.json()["body"]
    assert runtime.connectors.names() == []


def test_a_40kb_value_is_served_in_milliseconds(api: Served, tmp_path: Path) -> None:
    """A 40 KB value took 16.7 s to create (quadratic masking) and stalled every other request."""
    value = "a" * 40_000 + "://" + "b:" * 10_000
    started = time.monotonic()
    created = httpx.post(f"{api.url}/connectors", json={"name": "wide", "config": _source(tmp_path, note=value)})
    assert created.status_code == 201, created.text
    assert httpx.get(f"{api.url}/connectors/wide/config").status_code == 200
    assert time.monotonic() - started < 3


def test_a_slow_request_does_not_stall_the_others(api: Served) -> None:
    """A client that trickles its body holds one connection, not the server."""
    host, port = api.url.removeprefix("http://").split(":")
    slow = socket.create_connection((host, int(port)))
    slow.sendall(
        b"POST /connectors HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Content-Length: 100000\r\n\r\n{"
    )
    try:
        answers: list[int] = []
        threads = [
            threading.Thread(target=lambda: answers.append(httpx.get(f"{api.url}/connectors").status_code))
            for _ in range(5)
        ]
        started = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join(10)
        assert answers == [200] * 5 and time.monotonic() - started < 5
    finally:
        slow.close()


def test_a_foreign_host_header_is_refused(api: Served) -> None:
    """DNS rebinding: a page on evil.example resolving to 127.0.0.1 sends `Host: evil.example`."""
    rebound = httpx.get(f"{api.url}/connectors", headers={"Host": "evil.example:8082"})
    assert rebound.status_code == 421 and "CONNECT_REST_ALLOWED_HOSTS" in rebound.json()["message"]
    assert httpx.get(f"{api.url}/connectors", headers={"Host": "localhost:8082"}).status_code == 200


def test_cross_site_browser_requests_are_refused_clients_are_not(api: Served, runtime: Runtime, tmp_path: Path) -> None:
    runtime.create_connector("c", _source(tmp_path))
    # RocketMQ's state-changing GET from an <img> on another site: no Origin, but Sec-Fetch-Site.
    img = httpx.get(
        f"{api.url}/connectors/c/stop", headers={"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors"}
    )
    assert img.status_code == 403
    form = httpx.post(
        f"{api.url}/connectors",
        json={"name": "x", "config": _source(tmp_path)},
        headers={"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"},
    )
    assert form.status_code == 403 and "CONNECT_REST_ALLOWED_ORIGINS" in form.json()["message"]
    assert runtime.connectors.get("c").target_state == "RUNNING" and runtime.connectors.names() == ["c"]
    # Same origin (a page served by this server) and plain clients (curl, the CLI) are served.
    same = httpx.get(f"{api.url}/connectors", headers={"Origin": api.url, "Sec-Fetch-Site": "same-origin"})
    assert same.status_code == 200
    assert httpx.get(f"{api.url}/connectors/c/stop").json() == {"status": 200, "body": "success"}
    assert runtime.connectors.get("c").target_state == "STOPPED"


def test_openapi_and_docs_need_the_token(make_api: Callable[..., Served]) -> None:
    api = make_api(token="t0ken-for-docs")
    for path in ("/openapi.json", "/docs"):
        assert httpx.get(f"{api.url}{path}").status_code == 401
        assert httpx.get(f"{api.url}{path}", headers={"Authorization": "Bearer t0ken-for-docs"}).status_code == 200
    spec = httpx.get(f"{api.url}/openapi.json", headers={"Authorization": "Bearer t0ken-for-docs"}).json()
    assert "/connectors" in spec["paths"]


def test_non_finite_numbers_are_400(api: Served, runtime: Runtime, tmp_path: Path) -> None:
    """Python's JSON parser takes `NaN` and `Infinity`; Postgres' jsonb does not (it was a 500)."""
    body = '{"name": "nan", "config": {"connector.class": "FileSourceConnector", "topic": "t", "x": NaN}}'
    answer = httpx.post(f"{api.url}/connectors", content=body, headers={"content-type": "application/json"})
    assert answer.status_code == 400 and "finite" in answer.json()["message"]
    by_query = httpx.get(f"{api.url}/rocketmq/connectors/q", params={"config": '{"x": Infinity}'})
    assert by_query.status_code == 400
    assert runtime.connectors.names() == []
