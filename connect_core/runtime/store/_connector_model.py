"""What the connector store answers with: connectors, their status, and pages of them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from connect_core.sdk.errors import ConflictError

__all__ = [
    "ConnectorExistsError",
    "ConnectorInfo",
    "ConnectorOverview",
    "ConnectorStatus",
    "Listing",
    "Page",
    "TaskStatus",
]


class ConnectorExistsError(ConflictError):
    """A connector of that name exists already."""


@dataclass(frozen=True)
class ConnectorInfo:
    name: str
    connector_class: str
    type: str
    config: dict[str, Any]
    target_state: str
    config_version: int
    tasks: tuple[dict[str, Any], ...]


@dataclass(frozen=True)
class TaskStatus:
    id: int
    state: str
    trace: str | None
    worker_id: str | None
    last_run_id: int | None
    #: records failed, skipped, dead-lettered, retries: totals over the task's runs
    errors: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class ConnectorStatus:
    name: str
    type: str
    state: str
    trace: str | None
    worker_id: str | None
    tasks: tuple[TaskStatus, ...]


@dataclass(frozen=True)
class ConnectorOverview:
    """What Kafka's connector info shows: the config and how many tasks, not the task configs."""

    name: str
    type: str
    config: dict[str, Any]
    task_count: int


@dataclass(frozen=True)
class Page:
    """A slice of the connectors in name order (the database's collation, as its primary key index):
    those after `after` (a keyset cursor: stable while connectors come and go, and it reads only
    the page through the index), then `offset` skipped, then at most `limit` (all when None)."""

    limit: int | None = None
    offset: int = 0
    after: str | None = None


@dataclass(frozen=True)
class Listing:
    """One page of connectors, read in one snapshot of the database."""

    #: the change count the rows are exactly as new as (read in the same snapshot)
    version: int
    names: tuple[str, ...]
    #: filled when asked for (`info=True`, `status=True`), by name
    overviews: Mapping[str, ConnectorOverview]
    statuses: Mapping[str, ConnectorStatus]
    #: whether connectors follow this page
    more: bool
