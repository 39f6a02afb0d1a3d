"""`/topics`: the topics, what they keep and who reads them; their settings (Kafka's topic configs:
retention, cleanup policy), cleaning them now, deleting one."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, Query

from connect_core.rest.deps import service
from connect_core.rest.errors import storable_params
from connect_core.rest.service import ConnectService

__all__ = ["router"]

router = APIRouter(tags=["Topics"], dependencies=[Depends(storable_params)])
Svc = Annotated[ConnectService, Depends(service)]


@router.get("/topics", summary="Topics: partitions, segments, rows, bytes, end offsets, settings, sinks and their lag")
def list_topics(svc: Svc) -> list[dict[str, Any]]:
    return svc.list_topics()


@router.get("/topics/{topic}", summary="One topic")
def describe_topic(svc: Svc, topic: str) -> dict[str, Any]:
    return svc.describe_topic(topic)


@router.put(
    "/topics/{topic}/config",
    summary="Set topic configs (`retention.ms`, `retention.bytes`, `cleanup.policy`, `delete.retention.ms`, "
    "`segment.bytes`; null: the default)",
)
def set_topic_config(
    svc: Svc,
    topic: str,
    config: Annotated[dict[str, Any], Body(examples=[{"retention.ms": 86400000, "cleanup.policy": "compact"}])],
) -> dict[str, Any]:
    return svc.set_topic_config(topic, config)


@router.delete(
    "/topics/{topic}",
    summary="Delete a topic: its rows, then its files (409 while a connector reads or writes it, unless force)",
)
def delete_topic(svc: Svc, topic: str, force: bool = False) -> dict[str, Any]:
    return svc.delete_topic(topic, force)


@router.post(
    "/topics/retention",
    summary="Clean the topics now: retention (segments past it that every sink committed), compaction, merging "
    "of small segments; dryRun lists what would happen",
)
def apply_retention(svc: Svc, dry_run: Annotated[bool, Query(alias="dryRun")] = False) -> dict[str, Any]:
    return svc.apply_topic_retention(dry_run)
