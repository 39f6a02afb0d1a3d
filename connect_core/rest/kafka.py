"""Kafka Connect's REST API (3.x surface), same paths, shapes and status codes."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, Query, Request, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field
from starlette.concurrency import run_in_threadpool

from connect_core.rest.deps import service
from connect_core.rest.errors import answer_for, storable_params
from connect_core.rest.service import ConnectService, server_info
from connect_core.sdk.errors import ConfigError

__all__ = ["router"]

router = APIRouter(tags=["Kafka Connect"], dependencies=[Depends(storable_params)])
Svc = Annotated[ConnectService, Depends(service)]
ConfigBody = Annotated[dict[str, Any], Body(description="Connector config: keys to values.")]


class CreateConnector(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, description="Connector name.")
    config: dict[str, Any] = Field(description="Connector config.")
    initial_state: str = Field(default="RUNNING", description="RUNNING, PAUSED or STOPPED.")


class OffsetsBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    offsets: list[dict[str, Any]] = Field(description='[{"partition": {…}, "offset": {…} | null}]')


@router.get("/", summary="Server version")
def root() -> dict[str, Any]:
    return server_info()  # no service: answers while the metadata store is down


@router.get("/health", summary="Whether the worker can serve requests (KIP-1017)")
async def health(request: Request) -> JSONResponse:
    """200 `healthy`, or 503 `unhealthy` with the reason (e.g. the metadata store is down)."""
    try:
        svc = await service(request)
        await run_in_threadpool(svc.check_store)
    except Exception as exc:
        answer = answer_for(exc)
        return JSONResponse(
            status_code=503, content={"status": "unhealthy", "message": answer.message}, headers=answer.headers
        )
    return JSONResponse(
        {"status": "healthy", "message": "Worker has completed startup and is ready to handle requests."}
    )


async def _snapshot(svc: ConnectService) -> Any:
    await asyncio.sleep(0)  # yield once: keeps the event loop fair across 100s of connections
    return svc.fresh_snapshot() or await run_in_threadpool(svc.snapshot)


def _json(body: bytes) -> Response:
    return Response(content=body, media_type="application/json")


# The hot read paths are async and answer with the snapshot's ready-made JSON: no
# thread hop, no query, no re-encoding, whatever the number of connectors.
@router.get("/connectors", summary="List connectors (optionally expanded with status and info)")
async def list_connectors(svc: Svc, expand: Annotated[list[str] | None, Query()] = None) -> Response:
    if expand:
        unknown = set(expand) - {"status", "info"}
        if unknown:
            raise ConfigError(f"unknown `expand` value(s) {sorted(unknown)}: use status and/or info")
        return _json((await _snapshot(svc)).expanded_json(expand))
    return _json((await _snapshot(svc)).names_json)


@router.post("/connectors", status_code=201, summary="Create a connector")
def create(svc: Svc, body: CreateConnector) -> dict[str, Any]:
    if body.config.get("name") not in (None, body.name):
        raise ConfigError(f"`config.name` ({body.config['name']}) differs from `name` ({body.name})")
    return svc.create(body.name, body.config, body.initial_state)


@router.get("/connectors/{connector}", summary="Connector info")
def info(svc: Svc, connector: str) -> dict[str, Any]:
    return svc.info(connector)


@router.get("/connectors/{connector}/config", summary="Connector config (secrets masked)")
def get_config(svc: Svc, connector: str) -> dict[str, Any]:
    return svc.config(connector)


@router.put("/connectors/{connector}/config", summary="Create or replace a connector's config")
def put_config(svc: Svc, connector: str, config: ConfigBody, response: Response) -> dict[str, Any]:
    created, info = svc.put_config(connector, config)
    response.status_code = 201 if created else 200
    return info


@router.patch("/connectors/{connector}/config", summary="Change some keys (null removes a key)")
def patch_config(svc: Svc, connector: str, config: ConfigBody) -> dict[str, Any]:
    return svc.patch_config(connector, config)


@router.delete("/connectors/{connector}", status_code=204, summary="Delete a connector")
def delete(svc: Svc, connector: str) -> Response:
    svc.delete(connector)
    return Response(status_code=204)


@router.get("/connectors/{connector}/status", summary="Connector and task states")
async def status(svc: Svc, connector: str) -> Response:
    body = (await _snapshot(svc)).status_json.get(connector)
    if body is None:  # not in the snapshot: the store says (404, or created a moment ago)
        return JSONResponse(await run_in_threadpool(svc.status, connector))
    return _json(body)


@router.get("/connectors/{connector}/tasks", summary="Task configs (secrets masked)")
def tasks(svc: Svc, connector: str) -> list[dict[str, Any]]:
    return svc.tasks(connector)


@router.get("/connectors/{connector}/tasks/{task}/status", summary="One task's state")
def task_status(svc: Svc, connector: str, task: int) -> dict[str, Any]:
    return svc.task_status(connector, task)


@router.post("/connectors/{connector}/tasks/{task}/restart", status_code=204, summary="Restart a task")
def restart_task(svc: Svc, connector: str, task: int) -> Response:
    svc.restart_task(connector, task)
    return Response(status_code=204)


@router.post("/connectors/{connector}/restart", summary="Restart a connector (and its tasks)")
def restart(
    svc: Svc,
    connector: str,
    include_tasks: Annotated[bool, Query(alias="includeTasks")] = False,
    only_failed: Annotated[bool, Query(alias="onlyFailed")] = False,
) -> Response:
    result = svc.restart(connector, include_tasks=include_tasks, only_failed=only_failed)
    if not include_tasks and not only_failed:
        return Response(status_code=204)
    result.pop("dag_run_id", None)
    return JSONResponse(status_code=202, content=result)


@router.put("/connectors/{connector}/pause", status_code=202, summary="Pause (the DAG is paused)")
def pause(svc: Svc, connector: str) -> Response:
    svc.set_state(connector, "PAUSED")
    return Response(status_code=202)


@router.put("/connectors/{connector}/resume", status_code=202, summary="Resume")
def resume(svc: Svc, connector: str) -> Response:
    svc.set_state(connector, "RUNNING")
    return Response(status_code=202)


@router.put("/connectors/{connector}/stop", status_code=204, summary="Stop (no runs; config and offsets stay)")
def stop(svc: Svc, connector: str) -> Response:
    svc.set_state(connector, "STOPPED")
    return Response(status_code=204)


@router.get("/connectors/{connector}/topics", summary="Topics the connector uses")
def topics(svc: Svc, connector: str) -> dict[str, Any]:
    return svc.topics(connector)


@router.get("/connectors/{connector}/offsets", summary="Committed positions / offsets")
def offsets(svc: Svc, connector: str) -> dict[str, Any]:
    return svc.offsets(connector)


@router.patch("/connectors/{connector}/offsets", summary="Alter offsets (connector must be STOPPED)")
def alter_offsets(svc: Svc, connector: str, body: OffsetsBody) -> dict[str, str]:
    return svc.alter_offsets(connector, body.offsets)


@router.delete("/connectors/{connector}/offsets", summary="Reset offsets (connector must be STOPPED)")
def reset_offsets(svc: Svc, connector: str) -> dict[str, str]:
    return svc.reset_offsets(connector)


@router.get("/connectors/{connector}/runs", summary="Last task runs with stats (extension)")
def runs(svc: Svc, connector: str, limit: Annotated[int, Query(ge=1, le=1000)] = 10) -> list[dict[str, Any]]:
    return svc.runs(connector, limit)


@router.post("/connectors/{connector}/trigger", summary="Start a run of the connector's DAG now (Airflow)")
def trigger(svc: Svc, connector: str) -> dict[str, Any]:
    return svc.trigger(connector)


@router.get("/connector-plugins", summary="Installed plugins (Kafka's `connectorsOnly=false`: transformations too)")
def plugins(svc: Svc, connectorsOnly: bool = True) -> list[dict[str, Any]]:
    return [{"class": p["class"], "type": p["type"], "version": p["version"]} for p in svc.plugins(connectorsOnly)]


@router.get("/connector-plugins/{plugin}/config", summary="A plugin's config definitions")
def plugin_config(svc: Svc, plugin: str) -> list[dict[str, Any]]:
    return svc.plugin_config(plugin)


@router.put("/connector-plugins/{plugin}/config/validate", summary="Validate a config (Kafka's ConfigInfos)")
def validate(svc: Svc, plugin: str, config: ConfigBody) -> dict[str, Any]:
    return svc.validate(plugin, config)
