"""Kafka Connect's JSON shapes of a connector's info and status, and of the expanded list.

Every config that leaves through these is masked; traces are masked too.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from connect_core.runtime.security import mask_config, mask_text
from connect_core.runtime.store.connectors import ConnectorInfo, ConnectorOverview, ConnectorStatus, Listing
from connect_core.sdk.errors import ConfigError

__all__ = ["WORKER_ID", "expand_kinds", "expanded_dict", "info_dict", "info_of", "masked_pool", "status_dict"]

#: The `worker_id` shown where no run named one.
WORKER_ID = "connect-core"


def expand_kinds(expand: Collection[str]) -> frozenset[str]:
    """Kafka's `expand` values, checked: `status` and/or `info`."""
    shown = frozenset(expand)
    unknown = shown - {"status", "info"}
    if unknown:
        raise ConfigError(f"unknown `expand` value(s) {sorted(unknown)}: use status and/or info")
    return shown


def expanded_dict(listing: Listing, expand: Collection[str]) -> dict[str, Any]:
    """Kafka's `GET /connectors?expand=…` body for `listing`: by name, `status` and/or `info`."""

    def entry(name: str) -> dict[str, Any]:
        shown: dict[str, Any] = {}
        if "status" in expand:
            shown["status"] = status_dict(listing.statuses[name])
        if "info" in expand:
            shown["info"] = info_dict(listing.overviews[name])
        return shown

    return {name: entry(name) for name in listing.names}


def info_dict(info: ConnectorOverview) -> dict[str, Any]:
    """Kafka's connector info: name, masked config, task ids, type."""
    return {
        "name": info.name,
        "config": mask_config({**info.config, "name": info.name}),
        "tasks": [{"connector": info.name, "task": i} for i in range(info.task_count)],
        "type": info.type,
    }


def info_of(info: ConnectorInfo) -> dict[str, Any]:
    """Kafka's connector info of a connector as a write of it returned it."""
    return info_dict(ConnectorOverview(info.name, info.type, info.config, len(info.tasks)))


def status_dict(st: ConnectorStatus) -> dict[str, Any]:
    """Kafka's connector status, with each task's error counts (an extension) and masked traces."""
    connector: dict[str, Any] = {"state": st.state, "worker_id": st.worker_id or WORKER_ID}
    if st.trace:
        connector["trace"] = mask_text(st.trace)
    tasks = []
    for t in st.tasks:
        task: dict[str, Any] = {"id": t.id, "state": t.state, "worker_id": t.worker_id or WORKER_ID}
        if t.trace:
            task["trace"] = mask_text(t.trace)
        if t.errors:  # Kafka's task-error-metrics, as totals over the task's runs (an extension)
            task["errors"] = dict(t.errors)
        tasks.append(task)
    return {"name": st.name, "connector": connector, "tasks": tasks, "type": st.type}


def masked_pool(pool: dict[str, Any]) -> dict[str, Any]:
    """A pool's Spark conf can hold credentials (e.g. `spark.hadoop.fs.s3a.secret.key`)."""
    return {**pool, "conf": mask_config(pool["conf"])}
