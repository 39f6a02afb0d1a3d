"""Kafka Connect's REST API (3.x surface), same paths, shapes and status codes."""

from __future__ import annotations

import asyncio
import functools
from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, Query, Request, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field
from starlette.concurrency import run_in_threadpool

from connect_core.rest import paging
from connect_core.rest.deps import service
from connect_core.rest.errors import answer_for, storable_params, warned
from connect_core.rest.service import ConnectService, server_info
from connect_core.runtime.management import expand_kinds, expanded_dict
from connect_core.runtime.store.connectors import Listing
from connect_core.runtime.store.states import TargetState
from connect_core.sdk.errors import ConfigError

__all__ = ["router"]

router = APIRouter(tags=["Kafka Connect"], dependencies=[Depends(storable_params)])
Svc = Annotated[ConnectService, Depends(service)]
ConfigBody = Annotated[dict[str, Any], Body(description="Connector config: keys to values.")]


class CreateConnector(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, description="Connector name.")
    config: dict[str, Any] = Field(description="Connector config.")
    initial_state: str = Field(default=TargetState.RUNNING, description="RUNNING, PAUSED or STOPPED.")


class OffsetsBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    offsets: list[dict[str, Any]] = Field(description='[{"partition": {…}, "offset": {…} | null}]')


@router.get("/", summary="Server version")
def root() -> dict[str, Any]:
    return server_info()  # no service: answers while the metadata store is down


@router.get("/health", summary="Whether the worker can serve requests (KIP-1017)")
async def health(request: Request) -> JSONResponse:
    """200 `healthy`; 503 `starting` while the metadata schema is behind this server's migrations;
    503 `unhealthy` when the metadata store cannot be reached. Always with the reason."""
    try:
        svc = await service(request)
        behind = await run_in_threadpool(svc.check_store)
        if behind is not None:
            return JSONResponse(status_code=503, content={"status": "starting", "message": behind})
    except Exception as exc:
        answer = answer_for(exc)
        return JSONResponse(
            status_code=503, content={"status": "unhealthy", "message": answer.message}, headers=answer.headers
        )
    return JSONResponse(
        {"status": "healthy", "message": "Worker has completed startup and is ready to handle requests."}
    )


def _json(body: bytes) -> Response:
    return Response(content=body, media_type="application/json")


def _names(listing: Listing) -> list[str]:
    return list(listing.names)


@router.get("/connectors", summary="List connectors (optionally expanded with status and info; optionally a page)")
async def list_connectors(
    svc: Svc,
    request: Request,
    expand: Annotated[list[str] | None, Query()] = None,
    limit: Annotated[str | None, Query(description=paging.LIMIT_DOC)] = None,
    offset: Annotated[str | None, Query(description=paging.OFFSET_DOC)] = None,
    after: Annotated[str | None, Query(description=paging.AFTER_DOC)] = None,
) -> Response:
    """Kafka's list: the names, or with `expand` each connector's status and/or info. One query
    per kind shown, whatever the number of connectors; the whole list's JSON is kept until the
    store changes. With `limit`/`offset`/`after`, a page, and a `Link` header to the next one."""
    shown = expand_kinds(expand or ())
    page = paging.page_of(limit, offset, after)
    render = functools.partial(expanded_dict, expand=shown) if shown else _names
    if page is None:
        await asyncio.sleep(0)  # yield once: keeps the event loop fair across 100s of connections
        view = "kafka:" + ",".join(sorted(shown))
        body = svc.cached_list(view)
        if body is None:
            body = await run_in_threadpool(svc.list_json, view, shown, render)
        return _json(body)
    listing = await run_in_threadpool(svc.listing, shown, page)
    headers = {"Link": paging.next_link(request.url, listing.names[-1])} if listing.more else None
    return JSONResponse(render(listing), headers=headers)


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


@router.put(
    "/connectors/{connector}/apply",
    summary="Create, update only if the config differs, or leave as is (`kubectl apply`; extension)",
)
def apply(
    svc: Svc,
    connector: str,
    config: ConfigBody,
    response: Response,
    dry_run: Annotated[
        bool, Query(alias="dryRun", description="Validate and tell what would change; write nothing.")
    ] = False,
    initial_state: Annotated[
        str, Query(alias="initialState", description="State of a created connector.")
    ] = TargetState.RUNNING,
) -> dict[str, Any]:
    """`{"name", "action": created|updated|unchanged, "changed": [keys], "type", "tasks"}`: 201 when
    created; an unchanged config writes nothing (no new config version: running tasks go on)."""
    result = svc.apply(connector, config, dry_run=dry_run, initial_state=initial_state)
    response.status_code = 201 if result["action"] == "created" and not dry_run else 200
    return result


@router.patch("/connectors/{connector}/config", summary="Change some keys (null removes a key)")
def patch_config(svc: Svc, connector: str, config: ConfigBody) -> dict[str, Any]:
    return svc.patch_config(connector, config)


@router.delete("/connectors/{connector}", status_code=204, summary="Delete a connector")
def delete(svc: Svc, connector: str) -> Response:
    svc.delete(connector)
    return Response(status_code=204)


@router.get("/connectors/{connector}/status", summary="Connector and task states")
async def status(svc: Svc, connector: str) -> Response:
    """One query for that connector; its JSON is kept until the store changes (a hot read: none)."""
    body = svc.cached_status(connector)
    if body is None:
        body = await run_in_threadpool(svc.status_json, connector)
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
    return Response(status_code=202, headers=warned(svc.set_state(connector, TargetState.PAUSED)))


@router.put("/connectors/{connector}/resume", status_code=202, summary="Resume")
def resume(svc: Svc, connector: str) -> Response:
    return Response(status_code=202, headers=warned(svc.set_state(connector, TargetState.RUNNING)))


@router.put("/connectors/{connector}/stop", status_code=204, summary="Stop (no runs; config and offsets stay)")
def stop(svc: Svc, connector: str) -> Response:
    svc.set_state(connector, TargetState.STOPPED)
    return Response(status_code=204)


@router.get("/connectors/{connector}/topics", summary="Active topics: written or read since creation or reset")
def topics(svc: Svc, connector: str) -> dict[str, Any]:
    return svc.topics(connector)


@router.put("/connectors/{connector}/topics/reset", summary="Empty the connector's active topics")
def reset_topics(svc: Svc, connector: str) -> Response:
    svc.reset_topics(connector)
    return Response(status_code=200)


@router.get("/connectors/{connector}/offsets", summary="Committed positions / offsets")
def offsets(svc: Svc, connector: str) -> dict[str, Any]:
    return svc.offsets(connector)


@router.patch("/connectors/{connector}/offsets", summary="Alter offsets (connector must be STOPPED)")
def alter_offsets(svc: Svc, connector: str, body: OffsetsBody) -> dict[str, str]:
    return svc.alter_offsets(connector, body.offsets)


@router.delete("/connectors/{connector}/offsets", summary="Reset offsets (connector must be STOPPED)")
def reset_offsets(
    svc: Svc,
    connector: str,
    to_time: Annotated[
        str | None, Query(alias="toTime", description="Extension: a sink's offsets to this time (ISO 8601), to replay")
    ] = None,
) -> dict[str, str]:
    return svc.reset_offsets(connector, to_time)


class SignalBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str | None = Field(default=None, max_length=200, description="The sender's id of the signal.")
    type: str = Field(max_length=50, description="execute-snapshot, stop-snapshot, pause-snapshot or resume-snapshot.")
    data: dict[str, Any] = Field(
        default_factory=dict,
        description='Debezium\'s signal data: {"data-collections": ["schema.table"], "type": "incremental"}.',
    )


@router.post(
    "/connectors/{connector}/signals",
    status_code=202,
    summary="Send a signal (Debezium's: an incremental snapshot of tables) to the connector's next run (extension)",
)
def send_signal(svc: Svc, connector: str, body: SignalBody) -> dict[str, Any]:
    return svc.send_signal(connector, body.id, body.type, body.data)


class ResyncBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    table: str = Field(min_length=1, max_length=300, description="The table to re-read, as `table.whitelist` names it.")
    mode: str = Field(
        default="retain",
        max_length=20,
        description="retain (re-read rows are upserted) or replace (the sinks swap the re-read copy in at its end).",
    )


@router.post(
    "/connectors/{connector}/resync",
    status_code=202,
    summary="Re-read one table of a JDBC source, the other tables keeping their positions (extension)",
)
def resync(svc: Svc, connector: str, body: ResyncBody) -> dict[str, Any]:
    return svc.resync(connector, body.table, body.mode)


class AcceptBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    topics: list[str] | None = Field(
        default=None, max_length=1000, description="The topics whose pending change to accept (default: all)."
    )


@router.get(
    "/connectors/{connector}/schemas",
    summary="The shape the connector last let through per topic, and a change it paused on (extension)",
)
def schemas(svc: Svc, connector: str) -> dict[str, Any]:
    return svc.schemas(connector)


@router.post(
    "/connectors/{connector}/schemas/accept",
    summary="Accept the schema change the connector paused on, and resume it (extension)",
)
def accept_schema(svc: Svc, connector: str, body: Annotated[AcceptBody | None, Body()] = None) -> Response:
    result = svc.accept_schema(connector, body.topics if body is not None else None)
    warning = result.pop("warning", None)
    return JSONResponse(content=result, headers=warned(warning))


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
