"""The states of connectors, tasks and runs, named once.

Each is a `StrEnum`: a member is the string it names (`TargetState.RUNNING == "RUNNING"`, and
`json.dumps`, f-strings and the database driver give `"RUNNING"`), so the store's text columns,
the REST API's JSON and the CLI's output keep their values, and a state read back from the
database as a plain string compares equal to its member. The standard library only: the
launcher imports this before anything heavy.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["TARGET_STATES", "ConnectorState", "RunState", "TargetState"]


class TargetState(StrEnum):
    """The state a user sets a connector to (`connectors.target_state`; Kafka Connect's target
    state, whose `STARTED` its REST API, and this one, call `RUNNING`)."""

    RUNNING = "RUNNING"  # its tasks run when scheduled or triggered
    PAUSED = "PAUSED"  # its tasks and schedule stay, but nothing runs (its DAG is paused)
    STOPPED = "STOPPED"  # no tasks (KIP-875): its offsets may change; its DAG loses its schedule


#: The target states as plain strings: what a value is checked against, and what its error shows.
TARGET_STATES: tuple[str, ...] = tuple(state.value for state in TargetState)


class ConnectorState(StrEnum):
    """A connector's or a task's state as Kafka Connect's status API reports it (`connector_status`,
    `task_status`). Of Kafka's, RESTARTING and DESTROYED never show: a restart here only clears a
    FAILED state (to UNASSIGNED), and a deleted connector has no status."""

    UNASSIGNED = "UNASSIGNED"  # a task that has not run yet, or was restarted
    RUNNING = "RUNNING"
    PAUSED = "PAUSED"
    STOPPED = "STOPPED"
    FAILED = "FAILED"  # its last run failed; the trace says why


class RunState(StrEnum):
    """The state of one run of a task (`task_runs.state`): RUNNING while it holds the task's lease,
    then how it ended."""

    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"  # committed
    FAILED = "FAILED"  # committed nothing
    FENCED = "FENCED"  # a newer generation took the task: its output was discarded
    ABANDONED = "ABANDONED"  # its lease lapsed and a newer run took it over, or its connector was no longer RUNNING
