"""Spark pools (the Connect workers) and rebalancing: an extension of both dialects."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Response
from pydantic import BaseModel, ConfigDict, Field

from connect_core.rest.deps import service
from connect_core.rest.errors import storable_params
from connect_core.rest.service import ConnectService

__all__ = ["router"]

router = APIRouter(tags=["Spark pools"], dependencies=[Depends(storable_params)])
Svc = Annotated[ConnectService, Depends(service)]


class PoolSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    master: str = Field(min_length=1, description="local[n], spark://host:port, yarn or k8s://…")
    capacity: int = Field(default=1, ge=1, le=10_000, description="Concurrent tasks (the Airflow pool's slots).")
    conf: dict[str, str] = Field(default_factory=dict, description="Spark conf of runs on this pool.")
    labels: dict[str, str] = Field(default_factory=dict, description="Free-form labels.")
    probe_url: str | None = Field(
        default=None, description="Liveness URL; a standalone master's /json by default, else heartbeats from outside."
    )


class RebalanceBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    strategy: str | None = Field(default=None, description="sticky, default or consistent-hash (default: configured).")


@router.get("/pools", summary="Spark pools with health and what each runs")
def list_pools(svc: Svc) -> list[dict[str, Any]]:
    return svc.pools()


@router.get("/pools/{pool}", summary="One Spark pool")
def get_pool(svc: Svc, pool: str) -> dict[str, Any]:
    return svc.pool(pool)


@router.put("/pools/{pool}", summary="Register or update a Spark pool (201 when created)")
def put_pool(svc: Svc, pool: str, body: PoolSpec, response: Response) -> dict[str, Any]:
    created, info = svc.put_pool(pool, body.model_dump())
    response.status_code = 201 if created else 200
    return info


@router.delete("/pools/{pool}", status_code=204, summary="Remove a Spark pool (its work moves at the next rebalance)")
def delete_pool(svc: Svc, pool: str) -> Response:
    svc.delete_pool(pool)
    return Response(status_code=204)


@router.post("/pools/{pool}/heartbeat", status_code=204, summary="A heartbeat for a pool that is not probed")
def heartbeat(svc: Svc, pool: str) -> Response:
    svc.pool_heartbeat(pool)
    return Response(status_code=204)


@router.post("/rebalance", summary="Probe the pools and rebalance now")
def rebalance(svc: Svc, body: RebalanceBody | None = None) -> dict[str, Any]:
    return svc.rebalance(body.strategy if body else None)


@router.get("/rebalances", summary="The latest rebalances: reason, moved count, old and new assignment")
def rebalances(svc: Svc, limit: Annotated[int, Query(ge=1, le=1000)] = 20) -> list[dict[str, Any]]:
    return svc.rebalances(limit)
