"""Roles over REST: each token's role, each route's role, a 403 that names the role needed."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest

from connect_core.rest.app import create_app
from connect_core.rest.auth import bearer_or_loopback, tokens_from_settings
from connect_core.runtime.context import Runtime
from connect_core.runtime.security.roles import ROUTE_ROLES, Role, required_role
from connect_core.runtime.settings import Settings
from connect_core.web.view import create_view_app
from tests.rest.conftest import Served, serve

TOKENS = {Role.operator: "op-token-1", Role.connector: "conn-token-2", Role.viewer: "view-token-3"}
SOURCE = "org.apache.rocketmq.connect.file.FileSourceConnector"


@pytest.fixture
def roles_api(runtime: Runtime) -> Iterator[Served]:
    yield from serve(create_app(lambda: runtime, auth=[bearer_or_loopback(tokens=TOKENS)]))


def _as(role: Role) -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKENS[role]}"}


def _source(tmp_path: Path) -> dict[str, str]:
    return {"connector.class": SOURCE, "filename": str(tmp_path / "in.txt"), "connect.topicname": "roles"}


def test_every_route_has_a_role_decided(runtime: Runtime) -> None:
    app = create_app(lambda: runtime)
    for route in app.routes:
        for method in getattr(route, "methods", ()) or ():
            path = route.path.removeprefix("/rocketmq") if route.path.startswith("/rocketmq/") else route.path
            assert (method, path) in ROUTE_ROLES, f"{method} {route.path} has no role in ROUTE_ROLES"
    assert required_role("GET", "/a/route/nobody/classified") is Role.operator


def test_each_role_does_what_it_may_and_a_403_names_the_role_needed(roles_api: Served, tmp_path: Path) -> None:
    url = roles_api.url
    # the viewer reads, and nothing else
    assert httpx.get(f"{url}/connectors", headers=_as(Role.viewer)).status_code == 200
    assert httpx.get(f"{url}/pools", headers=_as(Role.viewer)).status_code == 200
    refused = httpx.post(
        f"{url}/connectors", json={"name": "r1", "config": _source(tmp_path)}, headers=_as(Role.viewer)
    )
    assert refused.status_code == 403
    assert "`connector` role" in refused.json()["message"] and "`viewer`" in refused.json()["message"]
    assert httpx.get(f"{url}/connectors/r1", headers=_as(Role.connector)).status_code == 404  # nothing created

    # the connector role manages connectors …
    created = httpx.post(
        f"{url}/connectors", json={"name": "r1", "config": _source(tmp_path)}, headers=_as(Role.connector)
    )
    assert created.status_code == 201, created.text
    assert httpx.put(f"{url}/connectors/r1/pause", headers=_as(Role.connector)).status_code == 202
    assert httpx.put(f"{url}/connectors/r1/stop", headers=_as(Role.connector)).status_code == 204
    # … but not the worker's: pools, the rebalance, topics, offsets resets, every connector at once
    operator_only = [
        ("PUT", "/pools/east", {"master": "local[1]", "capacity": 1}),
        ("DELETE", "/pools/local", None),
        ("POST", "/rebalance", None),
        ("DELETE", "/topics/roles", None),
        ("POST", "/topics/retention", None),
        ("DELETE", "/connectors/r1/offsets", None),
        ("PATCH", "/connectors/r1/offsets", {"offsets": []}),
        ("GET", "/connectors/stop/all", None),
        ("GET", "/rocketmq/connectors/pause/all", None),
        ("GET", "/plugin/reload", None),
    ]
    for method, path, body in operator_only:
        answer = httpx.request(method, f"{url}{path}", json=body, headers=_as(Role.connector))
        assert answer.status_code == 403, (method, path, answer.text)
        assert "needs the `operator` role" in answer.json()["message"], answer.text
    assert httpx.get(f"{url}/connectors/r1/status", headers=_as(Role.connector)).json()["connector"]["state"] == (
        "STOPPED"
    )  # and nothing of the refused happened: still stopped, not reset or paused by `pause/all`
    assert httpx.get(f"{url}/connectors/r1/offsets", headers=_as(Role.viewer)).status_code == 200

    # the operator may do all of it
    reset = httpx.delete(f"{url}/connectors/r1/offsets", headers=_as(Role.operator))
    assert reset.status_code == 200, reset.text
    pool = httpx.put(f"{url}/pools/east", json={"master": "local[1]", "capacity": 1}, headers=_as(Role.operator))
    assert pool.status_code in (200, 201), pool.text


def test_rocketmqs_create_by_get_needs_the_connector_role(roles_api: Served, tmp_path: Path) -> None:
    config = quote(json.dumps(_source(tmp_path)))
    for prefix in ("", "/rocketmq"):
        refused = httpx.get(f"{roles_api.url}{prefix}/connectors/r2?config={config}", headers=_as(Role.viewer))
        assert refused.status_code == 403 and "`connector` role" in refused.text, refused.text
    assert httpx.get(f"{roles_api.url}/connectors/r2", headers=_as(Role.viewer)).status_code == 404
    made = httpx.get(f"{roles_api.url}/rocketmq/connectors/r2?config={config}", headers=_as(Role.connector))
    assert made.status_code == 200, made.text
    assert httpx.get(f"{roles_api.url}/connectors/r2", headers=_as(Role.viewer)).status_code == 200


def test_a_token_of_no_role_or_no_token_is_401(roles_api: Served) -> None:
    assert httpx.get(f"{roles_api.url}/connectors").status_code == 401
    assert httpx.get(f"{roles_api.url}/connectors", headers={"Authorization": "Bearer op-token"}).status_code == 401
    assert httpx.get(f"{roles_api.url}/connectors", headers={"Authorization": "Basic op-token-1"}).status_code == 401


def test_tokens_come_from_settings_and_must_differ() -> None:
    settings = Settings(rest_token="a-token", rest_connector_token="b-token")
    assert tokens_from_settings(settings) == {Role.operator: "a-token", Role.connector: "b-token"}
    with pytest.raises(ValueError, match="same token"):
        tokens_from_settings(Settings(rest_token="same", rest_viewer_token="same"))


def test_the_view_offers_only_what_the_role_may_do(runtime: Runtime) -> None:
    for role in Role:
        app = create_view_app(lambda: runtime, auth=[bearer_or_loopback(tokens=TOKENS)])
        for served in serve(app):
            page = httpx.get(f"{served.url}/", headers=_as(role))
            assert page.status_code == 200 and f'data-role="{role.name}"' in page.text
