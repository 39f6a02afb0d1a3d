"""Reading connectors: names, the expanded list, info, config, status, tasks, active topics, runs.

A single connector's info, config, status or tasks is one query for that connector, whatever the
number of connectors; a list is one query per kind of data it shows.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from connect_core.runtime.management._room import Room
from connect_core.runtime.management.shapes import expand_kinds, expanded_dict, info_dict, status_dict
from connect_core.runtime.security import mask_config, mask_text
from connect_core.runtime.store.connector_schemas import Pending
from connect_core.runtime.store.connectors import Listing, Page
from connect_core.sdk.errors import NotFoundError

__all__ = ["ConnectorReads"]


class ConnectorReads(Room):
    def listing(self, expand: Collection[str], page: Page) -> Listing:
        """A page of connectors with what `expand` asks (`info`, `status`): one query per kind."""
        shown = expand_kinds(expand)
        return self.rt.connectors.listing(page, info="info" in shown, status="status" in shown)

    def names(self, page: Page | None = None) -> list[str]:
        return self.rt.connectors.names(page)

    def expanded(self, expand: Collection[str], page: Page | None = None) -> dict[str, Any]:
        """Kafka's `GET /connectors?expand=…`: each connector's status and/or info, by name."""
        return expanded_dict(self.listing(expand, page or Page()), expand)

    def info(self, name: str) -> dict[str, Any]:
        return info_dict(self.rt.connectors.overview(name))

    def config(self, name: str) -> dict[str, Any]:
        return mask_config({**self.rt.connectors.overview(name).config, "name": name})

    def status(self, name: str) -> dict[str, Any]:
        return status_dict(self.rt.connectors.status(name))

    def task_status(self, name: str, task: int) -> dict[str, Any]:
        for t in self.status(name)["tasks"]:
            if t["id"] == task:
                return dict(t)
        raise NotFoundError(f"task {task} of connector `{name}` not found")

    def schemas(self, name: str) -> dict[str, Any]:
        self.rt.connectors.get(name)  # 404 for an unknown connector
        found = self.rt.connectors.schemas.of(name)
        topics = {
            topic: {
                "fingerprint": ref.schema.fingerprint,
                "schema": dict(ref.schema.document),
                "run_id": ref.run_id,
                "pending": _pending(ref.pending),
            }
            for topic, ref in sorted(found.items())
        }
        return {"name": name, "topics": topics}

    def tasks(self, name: str) -> list[dict[str, Any]]:
        info = self.rt.connectors.get(name)
        return [{"id": {"connector": name, "task": i}, "config": mask_config(cfg)} for i, cfg in enumerate(info.tasks)]

    def topics(self, name: str) -> dict[str, Any]:
        """Kafka's active topics (KIP-558): those the connector wrote or read since its creation or the
        last reset, as its runs committed them (not its config: a CDC source names its topics as it finds
        tables, a sink's configured topic may never have had data)."""
        return {name: {"topics": self.rt.connectors.active_topics(name)}}

    def reset_topics(self, name: str) -> None:
        self.rt.connectors.reset_topics(name)

    def runs(self, name: str, limit: int = 10) -> list[dict[str, Any]]:
        """The last task runs (an extension of Kafka's API: micro-batch runs have no Kafka equivalent)."""
        self.rt.connectors.get(name)
        return [
            {**r, "error": mask_text(r["error"]) if r["error"] else None}
            for r in self.rt.connectors.last_runs(name, limit=limit)
        ]


def _pending(pending: Pending | None) -> dict[str, Any] | None:
    if pending is None:
        return None
    return {
        "fingerprint": pending.schema.fingerprint,
        "schema": dict(pending.schema.document),
        "diff": dict(pending.diff),
        "reason": mask_text(pending.reason),
        "run_id": pending.run_id,
        "accepted": pending.accepted,
    }
