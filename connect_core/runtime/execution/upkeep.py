"""Table upkeep of a sink: its jobs, whether one is due, and one run of it, recorded.

A sink connector declares upkeep jobs (`SinkConnector.upkeep`: compaction, snapshot expiry, orphan
files, vacuum …); with an `upkeep.schedule`, each job is a task of the connector's DAG after its
sink tasks (`connect_core.airflow.upkeep`), and this module decides and does what such a task does:

* skip when the connector is not RUNNING, has no such job (any more), or the job is not due: its
  last success (`upkeep_jobs`, the database's clock) is younger than the schedule's interval, or no
  tick of the schedule's cron has passed since. Only a database read: the skip is what most DAG
  runs (every time data lands) do.
* else run the job with the config a task run gets (`Runtime.run_config`: providers resolved,
  paths confined), outside Spark, and record the run: when, what it did, or its error as one line
  with secrets masked.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from connect_core.runtime.execution.launcher import FATAL_KINDS
from connect_core.runtime.execution.runner import error_kind
from connect_core.runtime.security import MaskingFilter, mask_config, mask_text
from connect_core.runtime.store.states import TargetState
from connect_core.runtime.store.upkeep import UpkeepStore
from connect_core.sdk.config import CRON_PRESETS, SinkConnectorConfig, schedule_interval
from connect_core.sdk.connector import SinkConnector, Upkeep
from connect_core.sdk.errors import ConfigError, NotFoundError

if TYPE_CHECKING:
    from connect_core.runtime.context import Runtime

__all__ = ["UPKEEP_TASK_PREFIX", "UpkeepOutcome", "UpkeepState", "next_due", "run_upkeep", "upkeep_of"]

#: An upkeep job's Airflow task is named this and the job (`upkeep_compact`).
UPKEEP_TASK_PREFIX = "upkeep_"
#: The longest error line recorded and reported.
_ERROR_CHARS = 1_000


class UpkeepState(StrEnum):
    SUCCEEDED = "SUCCEEDED"
    SKIPPED = "SKIPPED"
    FAILED = "FAILED"


@dataclass(frozen=True)
class UpkeepOutcome:
    """What one upkeep task did: `cause` says why it skipped or failed (one line, masked)."""

    state: UpkeepState
    cause: str = ""
    result: dict[str, Any] = field(default_factory=dict)
    error_kind: str | None = None

    @property
    def fatal(self) -> bool:
        """A failure a retry would meet again (the config or the table must change first)."""
        return self.state is UpkeepState.FAILED and (self.error_kind or "unexpected") in FATAL_KINDS


def upkeep_of(plugin_cls: Any, name: str, config: Any) -> list[Upkeep]:
    """The upkeep jobs connector `name` runs, in order: its plugin's, when it is a sink with an
    `upkeep.schedule` (none otherwise). Describes them only: nothing runs."""
    if not isinstance(config, SinkConnectorConfig) or config.upkeep_schedule is None:
        return []
    if not (isinstance(plugin_cls, type) and issubclass(plugin_cls, SinkConnector)):
        return []
    return list(plugin_cls().upkeep(name, config))


def next_due(schedule: str, last_success: datetime) -> datetime:
    """When a job that last succeeded at `last_success` is due again: an interval after it, or the
    first tick of the schedule's cron (UTC, as the DAG's timetable) after it."""
    interval = schedule_interval(schedule)
    if interval is not None:
        return last_success + interval
    from croniter import croniter

    after = last_success.astimezone(UTC)
    due: datetime = croniter(CRON_PRESETS.get(schedule, schedule), after).get_next(datetime)
    return due


def upkeep_logger(connector: str, job: str) -> logging.Logger:
    """The logger a job gets: its records pass the secret masker before any handler sees them."""
    logger = logging.getLogger(f"connect.{connector}.upkeep.{job}")
    if not any(isinstance(f, MaskingFilter) for f in logger.filters):
        logger.addFilter(MaskingFilter())
    return logger


def run_upkeep(runtime: Runtime, connector: str, job: str) -> UpkeepOutcome:
    """Run upkeep job `job` of `connector` if it is due, and record the run."""
    try:
        info = runtime.connectors.get(connector)
    except NotFoundError:
        return UpkeepOutcome(UpkeepState.SKIPPED, f"connector `{connector}` does not exist (any more)")
    if info.target_state != TargetState.RUNNING:
        return UpkeepOutcome(UpkeepState.SKIPPED, f"connector `{connector}` is {info.target_state}")
    store = UpkeepStore(runtime.engine)
    now, last = store.last(connector, job)
    since = last.succeeded_at if last is not None else None  # its last success
    try:  # the stored config says the schedule and the jobs (no placeholder can hold them)
        plugin: Any = runtime.registry.resolve(info.connector_class).cls
        stored = plugin.config_model.model_validate(info.config)
        jobs = {u.name for u in upkeep_of(plugin, connector, stored)}
        schedule = str(stored.upkeep_schedule)
        due = next_due(schedule, since) if since is not None else None
    except ValidationError as exc:  # a config stored before a stricter check (a cron that never fires)
        problems = "; ".join(f"`{'.'.join(map(str, e['loc']))}`: {e['msg']}" for e in exc.errors())
        cause = ConfigError(f"the stored config of connector `{connector}` is no longer valid: {problems}")
        return _failed(store, connector, job, now, cause)
    except Exception as exc:  # a plugin gone
        return _failed(store, connector, job, now, exc)
    if job not in jobs:
        return UpkeepOutcome(UpkeepState.SKIPPED, f"connector `{connector}` has no upkeep job `{job}` (any more)")
    if since is not None and due is not None and now < due:
        return UpkeepOutcome(
            UpkeepState.SKIPPED,
            f"`{job}` is not due: it last succeeded at {_iso(since)}, and with "
            f"`upkeep.schedule` {schedule} is due at {_iso(due)}",
        )
    try:
        _, config = runtime.run_config(info)  # as a run gets it: providers resolved, paths confined
        (upkeep,) = [u for u in upkeep_of(plugin, connector, config) if u.name == job]
        result = mask_config(dict(upkeep.run(upkeep_logger(connector, job))))
    except Exception as exc:  # recorded and reported as one line, then the task fails
        return _failed(store, connector, job, now, exc)
    store.record(connector, job, started_at=now, result=result)
    return UpkeepOutcome(UpkeepState.SUCCEEDED, result=result)


def _failed(store: UpkeepStore, connector: str, job: str, started_at: datetime, exc: BaseException) -> UpkeepOutcome:
    cause = _one_line(exc)
    store.record(connector, job, started_at=started_at, error=cause)
    return UpkeepOutcome(UpkeepState.FAILED, cause, error_kind=error_kind(exc))


def _one_line(exc: BaseException) -> str:
    """`Class: message` on one line, secrets masked, at most `_ERROR_CHARS` long."""
    text = mask_text(" ".join(f"{type(exc).__name__}: {exc}".split()))
    return text if len(text) <= _ERROR_CHARS else text[: _ERROR_CHARS - 1] + "…"


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="seconds")
