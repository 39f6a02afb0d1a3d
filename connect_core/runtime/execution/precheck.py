"""The cheap "anything new?" check that runs before paying for a Spark start-up.

Sources answer through `SourceTask.has_new_data` (file size vs position, ...);
sinks through the topic store: is there a committed segment past the offsets
of the partitions the task owns? No Spark, one or two metadata queries.
"""

from __future__ import annotations

import logging
from typing import Any

from connect_core.runtime.context import Runtime
from connect_core.sdk.config import SinkConnectorConfig
from connect_core.sdk.connector import SourceTask, TaskContext

__all__ = ["has_new_data"]

log = logging.getLogger(__name__)


def has_new_data(runtime: Runtime, connector: str, task_id: int) -> bool | None:
    """True/False when it can tell cheaply; None when only a run can tell."""
    info = runtime.connectors.get(connector)
    if task_id >= len(info.tasks):
        return None
    plugin_cls: Any = runtime.registry.resolve(info.connector_class).cls
    if info.type == "source":
        context = TaskContext(connector, task_id, len(info.tasks), logging.getLogger(f"connect.{connector}.precheck"))
        task: SourceTask = plugin_cls.task_class(runtime.providers.resolve(info.tasks[task_id]), context)
        try:
            return task.has_new_data(runtime.connectors.positions(connector))
        finally:
            task.close()
    model = plugin_cls.config_model.model_validate(info.config)
    topics = model.topics if isinstance(model, SinkConnectorConfig) else []
    owned = runtime.topics.owned_partitions(topics, task_id, len(info.tasks))
    committed = runtime.connectors.sink_offsets(connector)
    start = {tp: committed[tp].offset if tp in committed else 0 for tp in owned}
    return bool(start) and bool(runtime.topics.segments_after(start, max_rows=1))
