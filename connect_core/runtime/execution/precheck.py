"""The cheap "anything new?" check that runs before paying for a Spark start-up.

Sources answer through `SourceTask.has_new_data` (file size vs position, ...);
sinks through the topic store: is there a committed segment past the offsets
of the partitions the task owns, or the end of a `replace` re-read to tell it? No Spark, a few
metadata queries.
"""

from __future__ import annotations

import logging
import traceback
from typing import Any

from connect_core.runtime.context import Runtime
from connect_core.runtime.execution.runner import error_kind, task_signals
from connect_core.runtime.security.masking import mask_text
from connect_core.runtime.store.states import RunState
from connect_core.runtime.topics.resyncs import plan_batch, told_of
from connect_core.sdk.config import SinkConnectorConfig
from connect_core.sdk.connector import SourceTask, TaskContext
from connect_core.sdk.errors import ConnectError

__all__ = ["has_new_data", "record_failure"]

log = logging.getLogger(__name__)


def has_new_data(runtime: Runtime, connector: str, task_id: int) -> bool | None:
    """True/False when it can tell cheaply; None when only a run can tell."""
    info = runtime.connectors.get(connector)
    if task_id >= len(info.tasks):
        return None
    plugin_cls: Any = runtime.registry.resolve(info.connector_class).cls
    if info.type == "source":
        signals = tuple(signal for _, signal in task_signals(runtime.registry, runtime.connectors, connector, task_id))
        logger = logging.getLogger(f"connect.{connector}.precheck")
        context = TaskContext(connector, task_id, len(info.tasks), logger, signals=signals)
        task: SourceTask = plugin_cls.task_class(runtime.providers.resolve(info.tasks[task_id]), context)
        try:
            return task.has_new_data(runtime.connectors.positions(connector))
        finally:
            task.close()
    model = plugin_cls.config_model.model_validate(info.config)
    topics = model.topics if isinstance(model, SinkConnectorConfig) else []
    owned = runtime.topics.owned_partitions(topics, task_id, len(info.tasks))
    committed = {tp: c for tp, c in runtime.connectors.sink_offsets(connector).items() if tp in owned}
    start = {tp: committed[tp].offset if tp in committed else 0 for tp in owned}
    if not start:
        return False
    if runtime.topics.segments_after(start, max_rows=1):
        return True
    # no rows, but maybe the end of a `replace` re-read the sink has every row of, and was not told
    rereads = runtime.topics.resyncs.replacing(owned)
    told = told_of(next(iter(committed.values())).metadata if committed else {})
    return bool(rereads) and bool(plan_batch([], rereads, start, told, None).replacing)


def record_failure(runtime: Runtime, connector: str, task_id: int, exc: BaseException) -> None:
    """A cause found before Spark (a refused login, a config no run can use), recorded as a failed
    run of the task, as a run that failed in Spark would be: its status, `connect status` and the
    Connect view show it. Best effort: a task held by another run or a store that is down keeps
    what it has (the Airflow task fails all the same)."""
    try:
        lease = runtime.runs.acquire(connector, task_id, runtime.settings.lease_seconds)
    except ConnectError as busy:  # busy, fenced, gone: that run's outcome stands
        log.info("task `%s-%s`: the cause found before Spark is not recorded: %s", connector, task_id, busy)
        return
    except Exception as down:
        log.warning("task `%s-%s`: the cause found before Spark is not recorded: %s", connector, task_id, down)
        return
    trace = mask_text("".join(traceback.format_exception(exc)))
    try:
        runtime.runs.finish(lease, RunState.FAILED, trace, {"error_kind": error_kind(exc), "failed_before": "spark"})
    except Exception as down:  # the lease lapses; the next run takes it over
        log.warning("task `%s-%s`: the cause found before Spark is not recorded: %s", connector, task_id, down)
