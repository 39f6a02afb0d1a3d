"""The state enums are the strings they name: to JSON, f-strings, logs and Postgres (through
psycopg2 and SQLAlchemy), and a state read back as text compares equal to its member."""

from __future__ import annotations

import json
import logging

from sqlalchemy import bindparam, select, text
from sqlalchemy.dialects import postgresql
from sqlalchemy.schema import CreateTable

from connect_core.runtime.context import Runtime
from connect_core.runtime.execution.launcher import State
from connect_core.runtime.store.models import ConnectorRow, TaskRunRow
from connect_core.runtime.store.states import TARGET_STATES, ConnectorState, RunState, TargetState


def test_a_state_shows_as_its_value_wherever_it_is_written() -> None:
    for state in (*TargetState, *ConnectorState, *RunState):
        logged = logging.makeLogRecord({"msg": "is %s", "args": (state,)}).getMessage()
        assert state == state.value and str(state) == f"{state}" == state.value and logged == f"is {state.value}"
        assert json.dumps({"state": state, "states": [state]}) == json.dumps(
            {"state": state.value, "states": [state.value]}
        )
    # the error messages that show the target states keep their text
    assert TARGET_STATES == ("RUNNING", "PAUSED", "STOPPED") and all(type(s) is str for s in TARGET_STATES)
    assert f"{TARGET_STATES}" == "('RUNNING', 'PAUSED', 'STOPPED')"


def test_the_launcher_outcomes_of_a_run_are_its_run_states() -> None:
    assert [State(s) for s in (RunState.SUCCEEDED, RunState.FAILED, RunState.FENCED)] == [
        State.SUCCEEDED,
        State.FAILED,
        State.FENCED,
    ]
    assert type(State.SUCCEEDED.value) is str and State.SUCCEEDED.value == "SUCCEEDED"


def test_postgres_binds_and_returns_the_states_as_text(runtime: Runtime) -> None:
    store = runtime.connectors
    store.create(
        "paused", connector_class="X", type="source", config={}, task_configs=[{}], target_state=TargetState.PAUSED
    )
    store.create("running", connector_class="X", type="source", config={}, task_configs=[{}])
    with runtime.engine.connect() as conn:
        # a SQLAlchemy expression, an IN list, and a bound parameter of a text statement
        assert conn.scalars(select(ConnectorRow.name).where(ConnectorRow.target_state == TargetState.PAUSED)).all() == [
            "paused"
        ]
        in_list = select(ConnectorRow.name).where(ConnectorRow.target_state.in_(tuple(TargetState))).order_by("name")
        assert conn.scalars(in_list).all() == ["paused", "running"]
        raw = text("SELECT target_state FROM connect.connectors WHERE name = 'running' AND target_state = :s")
        read = conn.scalar(raw.bindparams(bindparam("s", TargetState.RUNNING)))
        assert type(read) is str and read == TargetState.RUNNING  # the server default, read back as text
        assert conn.scalar(select(TaskRunRow.id).where(TaskRunRow.state.in_(tuple(RunState)))) is None
    assert type(store.get("paused").target_state) is str and store.get("paused").target_state == "PAUSED"
    assert [t.state for t in store.status("running").tasks] == [ConnectorState.UNASSIGNED]


def test_the_schema_default_is_the_plain_text() -> None:
    ddl = str(CreateTable(ConnectorRow.__table__).compile(dialect=postgresql.dialect()))  # type: ignore[arg-type]
    assert "target_state TEXT DEFAULT 'RUNNING' NOT NULL" in ddl
