"""Auth of `connect serve`: a bearer token when configured, else loopback clients only."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest

from connect_core.rest.app import create_app
from connect_core.rest.auth import bearer_or_loopback
from connect_core.runtime.context import Runtime
from tests.rest.conftest import Served


def test_token_is_required_when_configured(make_api: Callable[..., Served]) -> None:
    api = make_api(token="s3cret-token")
    assert httpx.get(f"{api.url}/connectors").status_code == 401
    wrong = httpx.get(f"{api.url}/connectors", headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 401 and wrong.json()["error_code"] == 401
    assert httpx.get(f"{api.url}/connectors/list").status_code == 401  # RocketMQ routes too
    ok = httpx.get(f"{api.url}/connectors", headers={"Authorization": "Bearer s3cret-token"})
    assert ok.status_code == 200


def test_loopback_clients_are_served_without_a_token(api: Served) -> None:
    assert httpx.get(f"{api.url}/connectors").status_code == 200


@pytest.mark.anyio
async def test_other_clients_are_refused_without_a_token(runtime: Runtime) -> None:
    app = create_app(lambda: runtime, auth=[bearer_or_loopback(None)])
    transport = httpx.ASGITransport(app=app, client=("192.0.2.7", 40000))
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
        refused = await client.get("/connectors")
    assert refused.status_code == 403 and "loopback" in refused.json()["message"]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
