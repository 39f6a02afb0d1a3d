"""The REST app: Kafka Connect's API and RocketMQ Connect's routes over one service, and Confluent
Schema Registry's read API over the topics' schema histories.

`create_app(runtime_factory, auth=…)` is served alone by `connect serve` and
mounted under `/connect` in Airflow's api-server by the plugin. The runtime is
opened at the first request, not at import (Airflow imports plugins early).
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any

from fastapi import Depends, FastAPI, Request
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse

from connect_core import __version__
from connect_core.rest import kafka, metrics, pools, rocketmq, subjects, topics
from connect_core.rest.auth import route_role
from connect_core.rest.edge import EdgeMiddleware, EdgePolicy
from connect_core.rest.errors import install_error_handlers
from connect_core.rest.service import ConnectService
from connect_core.runtime.context import Runtime

__all__ = ["create_app"]


def create_app(
    runtime: Callable[[], Runtime],
    *,
    auth: Sequence[Callable[..., Any]] = (),
    edge: EdgePolicy | None = None,
) -> FastAPI:
    """The app; `auth` guards every route (the OpenAPI document and docs too) and tells the caller's role
    (`connect_core.rest.auth`), which each route's role is checked against; `edge` sets the limits
    and allow-lists every request passes first (default: loopback names, 1 MiB bodies)."""
    lock = threading.Lock()
    holder: dict[str, ConnectService] = {}

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        yield
        if "svc" in holder:  # stop the change listener with the server
            holder["svc"].close()

    app = FastAPI(
        lifespan=lifespan,
        title="Connect REST API",
        version=__version__,
        description="Kafka Connect's REST API and RocketMQ Connect's routes for connect-core.",
        # auth first (it tells the caller's role), then the route's role (403 naming the role needed)
        dependencies=[*(Depends(a) for a in auth), Depends(route_role)],
        # Served by the routes below instead, so they need the same auth as every other route.
        openapi_url=None,
        docs_url=None,
        redoc_url=None,
    )

    @app.get("/openapi.json", include_in_schema=False)
    def openapi() -> dict[str, Any]:
        return app.openapi()

    @app.get("/docs", include_in_schema=False)
    def docs(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return get_swagger_ui_html(openapi_url=f"{root}/openapi.json", title="Connect REST API")

    def connect_service() -> ConnectService:
        if "svc" not in holder:
            with lock:
                if "svc" not in holder:
                    holder["svc"] = ConnectService(runtime())
        return holder["svc"]

    app.state.connect_service = connect_service
    install_error_handlers(app)
    # RocketMQ's fixed paths (/connectors/list, /connectors/stop/all…) first, so Kafka's
    # /connectors/{connector} does not swallow them.
    app.include_router(rocketmq.router)
    app.include_router(kafka.router)
    app.include_router(pools.router)
    app.include_router(metrics.router)
    app.include_router(topics.router)
    app.include_router(subjects.router)  # Schema Registry's read API: Kafka Connect has no /subjects
    app.include_router(rocketmq.prefixed_router, prefix="/rocketmq")
    app.add_middleware(EdgeMiddleware, policy=edge or EdgePolicy())
    return app
