"""RocketMQ Connect's routes (RestHandler, port 8082) with its envelope `{"status": 200, "body": …}`.

Every route is served under `/rocketmq/…`. At the root, the routes whose path
and method Kafka's API does not also use are served too, so RocketMQ's scripts
and `rocketmq-connect-cli` work unchanged (`/getClusterInfo`, `/connectors/list`,
`GET /connectors/{name}/stop`, `POST /connectors/{name}` …); where both APIs
have the same GET path (`/connectors/{name}/config|status|tasks`), the root
answers in Kafka's shape and `/rocketmq/…` in RocketMQ's.

Deliberate differences from RocketMQ: `stop` keeps the connector's config and
positions (RocketMQ deletes the config; here, as in Kafka, it is STOPPED and
can be resumed); `/plugin/config` is implemented (RocketMQ's is a stub).
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import json
from collections.abc import Callable
from typing import Annotated, Any, NamedTuple

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import JSONResponse, Response
from starlette.concurrency import run_in_threadpool

from connect_core.rest import paging
from connect_core.rest.deps import service
from connect_core.rest.errors import answer_for, warned
from connect_core.rest.service import ConnectService
from connect_core.runtime.management import expanded_dict
from connect_core.runtime.security import mask_config
from connect_core.runtime.store.connectors import Listing
from connect_core.runtime.store.db import check_storable
from connect_core.runtime.store.states import TargetState
from connect_core.sdk.errors import ConfigError, NotFoundError

__all__ = ["prefixed_router", "router"]

router = APIRouter(tags=["RocketMQ Connect"])
prefixed_router = APIRouter(tags=["RocketMQ Connect"])
Svc = Annotated[ConnectService, Depends(service)]


class _WithHeaders(NamedTuple):
    """A route's body and the headers to send with it (a warning)."""

    body: Any
    headers: dict[str, str]


def _route(method: str, path: str, *, root: bool = True) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register on `/rocketmq` and (unless Kafka owns the path) at the root; wrap in the envelope."""

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        async def wrapper(*args: Any, **kwargs: Any) -> JSONResponse:
            try:
                for key, value in kwargs.items():  # path and query parameters: a `%00` is a 400
                    if isinstance(value, str):
                        check_storable(value, f"parameter `{key}`")
                if inspect.iscoroutinefunction(fn):
                    body = await fn(*args, **kwargs)
                else:  # blocking store calls: off the event loop
                    body = await run_in_threadpool(fn, *args, **kwargs)
            except Exception as exc:  # every error, in the envelope (a store outage is a 503 too)
                return _error(exc)
            if isinstance(body, _WithHeaders):
                return JSONResponse(content={"status": 200, "body": body.body}, headers=body.headers)
            return JSONResponse(content={"status": 200, "body": body})

        routers = [router, prefixed_router] if root else [prefixed_router]
        for r in routers:
            r.add_api_route(path, wrapper, methods=[method], summary=(fn.__doc__ or "").strip().split("\n")[0])
        return fn

    return decorate


def _error(exc: Exception) -> JSONResponse:
    """RocketMQ's envelope around the answer Kafka's routes give for the same error."""
    answer = answer_for(exc)
    return JSONResponse(
        status_code=answer.status, content={"status": answer.status, "body": answer.message}, headers=answer.headers
    )


def _status(svc: ConnectService, name: str) -> dict[str, Any]:
    return _rocketmq_status(svc.status(name))


def _rocketmq_status(st: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": st["name"],
        "connector": {
            "state": st["connector"]["state"],
            "trace": st["connector"].get("trace"),
            "workerId": st["connector"]["worker_id"],
        },
        "tasks": [
            {"state": t["state"], "trace": t.get("trace"), "workerId": t["worker_id"], "id": t["id"]}
            for t in st["tasks"]
        ],
        "type": st["type"].upper(),
    }


def _rocketmq_info(info: dict[str, Any]) -> dict[str, Any]:
    return {**info, "type": info["type"].upper()}


@_route("GET", "/getClusterInfo")
def cluster_info(svc: Svc) -> list[dict[str, Any]]:
    """Workers of the cluster (here: the runtime and its Spark master)."""
    return svc.cluster_info()


#: RocketMQ's list shows both.
_BOTH = frozenset({"status", "info"})


def _list_body(listing: Listing) -> dict[str, Any]:
    return {
        name: {
            "status": _rocketmq_status(entry["status"]),
            "info": {**entry["info"], "type": entry["info"]["type"].upper()},
        }
        for name, entry in expanded_dict(listing, _BOTH).items()
    }


async def list_connectors(
    svc: Svc,
    request: Request,
    limit: Annotated[str | None, Query(description=paging.LIMIT_DOC)] = None,
    offset: Annotated[str | None, Query(description=paging.OFFSET_DOC)] = None,
    after: Annotated[str | None, Query(description=paging.AFTER_DOC)] = None,
) -> Response:
    """Every connector with its status and info (kept as JSON until the store changes); with
    `limit`/`offset`/`after` a page of them, and a `Link` header to the next page."""
    await asyncio.sleep(0)  # yield once: fairness under many connections
    try:  # every error in the envelope, as every RocketMQ route answers
        page = paging.page_of(limit, offset, after)
        if page is None:
            body = svc.cached_list("rocketmq")
            if body is None:
                body = await run_in_threadpool(svc.list_json, "rocketmq", _BOTH, _list_body)
            return Response(content=b'{"status":200,"body":' + body + b"}", media_type="application/json")
        listing = await run_in_threadpool(svc.listing, _BOTH, page)
    except Exception as exc:
        return _error(exc)
    headers = {"Link": paging.next_link(request.url, listing.names[-1])} if listing.more else None
    return JSONResponse(content={"status": 200, "body": _list_body(listing)}, headers=headers)


for _router in (router, prefixed_router):
    _router.add_api_route(
        "/connectors/list", list_connectors, methods=["GET"], summary="Every connector, status and info (or a page)"
    )


PoolQuery = Annotated[str | None, Query(description="A Spark pool (worker); every pool when absent.")]


@_route("GET", "/allocated/connectors")
def allocated_connectors(svc: Svc, pool: PoolQuery = None) -> dict[str, Any]:
    """Connector configs allocated to a Spark pool (the worker), or to any pool."""
    return svc.allocated_connectors(pool)


@_route("GET", "/allocated/tasks")
def allocated_tasks(svc: Svc, pool: PoolQuery = None) -> dict[str, Any]:
    """Task configs allocated to a Spark pool (the worker), or to any pool."""
    return svc.allocated_tasks(pool)


def _pause_all(svc: ConnectService, state: str) -> str:
    for name in svc.names():
        svc.set_state(name, state)
    return "success"


@_route("GET", "/connectors/stop/all")
def stop_all(svc: Svc) -> str:
    """Stop every connector (config and positions are kept)."""
    return _pause_all(svc, TargetState.STOPPED)


@_route("GET", "/connectors/pause/all")
def pause_all(svc: Svc) -> str:
    """Pause every connector."""
    return _pause_all(svc, TargetState.PAUSED)


@_route("GET", "/connectors/resume/all")
def resume_all(svc: Svc) -> str:
    """Resume every connector."""
    return _pause_all(svc, TargetState.RUNNING)


async def _json_config(request: Request) -> dict[str, Any]:
    raw = await request.body()
    try:
        config = json.loads(raw or b"{}")
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError("the request body is not valid JSON (UTF-8)") from exc
    if not isinstance(config, dict):
        raise ConfigError("the request body must be a JSON object of config keys")
    return config


@_route("POST", "/connectors/{name}")
async def create(svc: Svc, name: str, request: Request) -> dict[str, Any]:
    """Create a connector from the JSON config in the body."""
    config = await _json_config(request)
    return _rocketmq_info(await run_in_threadpool(svc.create, name, config))


@router.get("/connectors/{name}", tags=["RocketMQ Connect", "Kafka Connect"], summary="Connector info, or create")
@prefixed_router.get("/connectors/{name}", summary="Create a connector from `?config=<json>`")
def get_or_create(svc: Svc, name: str, config: Annotated[str | None, Query()] = None) -> Any:
    """Kafka's GET /connectors/{name} (info); with `?config=<json>`, RocketMQ's create."""
    check_storable(name, "path parameter `connector`")
    if config is None:
        return svc.info(name)
    try:
        try:
            parsed = json.loads(config)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"`config` is not valid JSON: {exc.msg} at position {exc.pos}") from exc
        if not isinstance(parsed, dict):
            raise ConfigError("`config` must be a JSON object of config keys")
        return {"status": 200, "body": _rocketmq_info(svc.create(name, parsed))}
    except Exception as exc:
        return _error(exc)


@_route("GET", "/connectors/{name}/stop")
def stop(svc: Svc, name: str) -> str:
    """Stop a connector (unlike RocketMQ, its config is kept: resume brings it back)."""
    svc.set_state(name, TargetState.STOPPED)
    return "success"


@_route("GET", "/connectors/{name}/pause")
def pause(svc: Svc, name: str) -> Any:  # "success", with a warning header
    """Pause a connector."""
    return _WithHeaders("success", warned(svc.set_state(name, TargetState.PAUSED)))


@_route("GET", "/connectors/{name}/resume")
def resume(svc: Svc, name: str) -> Any:  # "success", with a warning header
    """Resume a connector."""
    return _WithHeaders("success", warned(svc.set_state(name, TargetState.RUNNING)))


@_route("GET", "/connectors/{name}/config", root=False)
def config(svc: Svc, name: str) -> dict[str, Any]:
    """Connector config (secrets masked)."""
    return mask_config(svc.config(name))


@_route("GET", "/connectors/{name}/status", root=False)
def status(svc: Svc, name: str) -> dict[str, Any]:
    """Connector and task states."""
    return _status(svc, name)


@_route("GET", "/connectors/{name}/tasks", root=False)
def tasks(svc: Svc, name: str) -> list[dict[str, Any]]:
    """Task configs (secrets masked)."""
    return [t["config"] for t in svc.tasks(name)]


@_route("GET", "/connectors/{name}/tasks/{task}/status", root=False)
def task_status(svc: Svc, name: str, task: int) -> dict[str, Any]:
    """One task's state."""
    for found in _status(svc, name)["tasks"]:  # one read of the connector's status
        if found["id"] == task:
            return found
    raise NotFoundError(f"task {task} of connector `{name}` not found")


@_route("GET", "/plugin/reload")
def reload(svc: Svc) -> list[str]:
    """Scan entry points and the plugin path again."""
    return svc.reload_plugins()


@_route("GET", "/plugin/list")
def plugin_list(svc: Svc) -> list[dict[str, Any]]:
    """Every plugin (class, type, version, aliases)."""
    return svc.plugins()


@_route("GET", "/plugin/list/connectors")
def plugin_list_connectors(svc: Svc) -> list[str]:
    """Connector class names, including the RocketMQ/Kafka aliases."""
    return sorted({p["class"] for p in svc.plugins()} | {a for p in svc.plugins() for a in p["aliases"]})


@_route("GET", "/plugin/config")
def plugin_config(svc: Svc, plugin: Annotated[str, Query(description="connector class")]) -> list[dict[str, Any]]:
    """A plugin's config definitions (unimplemented in RocketMQ)."""
    return svc.plugin_config(plugin)


@_route("POST", "/plugin/config/validate")
async def plugin_validate(svc: Svc, request: Request) -> dict[str, Any]:
    """Validate a connector config (Kafka's ConfigInfos in the body)."""
    return svc.validate(None, await _json_config(request))
