"""The last run of each table-upkeep job of a sink (`upkeep_jobs`, migration 0015).

One row per connector and job, replaced by each run in one statement: when it started and
finished, whether it succeeded, what it did (JSON) or its error (one line, masked by the caller).
The last success survives failures, since it is what says whether the job is due. Times are the
database's clock, the one clock every Airflow worker shares.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Engine, case, exists, func, literal, select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session

from connect_core.runtime.store.models import ConnectorRow, UpkeepJobRow

__all__ = ["MAX_ERROR_CHARS", "MAX_RESULT_BYTES", "UpkeepRecord", "UpkeepStore"]

#: What a run's result may take as JSON; a larger one is recorded as its size only.
MAX_RESULT_BYTES = 16_384
#: What a run's error may take.
MAX_ERROR_CHARS = 2_000


@dataclass(frozen=True)
class UpkeepRecord:
    """The last run of a job."""

    connector: str
    job: str
    state: str  # SUCCEEDED | FAILED
    started_at: datetime
    finished_at: datetime
    succeeded_at: datetime | None
    result: dict[str, Any]
    error: str | None


class UpkeepStore:
    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def last(self, connector: str, job: str) -> tuple[datetime, UpkeepRecord | None]:
        """The database's time now, and the job's last run (None: it never ran)."""
        query = select(UpkeepJobRow).where(UpkeepJobRow.connector == connector, UpkeepJobRow.job == job)
        with Session(self._engine) as s:
            now: datetime = s.execute(select(func.now())).scalar_one()
            row = s.scalars(query).one_or_none()
            return now, None if row is None else _record(row)

    def record(
        self,
        connector: str,
        job: str,
        *,
        started_at: datetime,
        result: Mapping[str, Any] | None = None,
        error: str | None = None,
    ) -> None:
        """Record a run that started at `started_at` and ended now: a success with `result`, or a
        failure with `error`. Nothing is recorded for a connector deleted meanwhile."""
        succeeded = error is None
        values = {
            "connector": connector,
            "job": job,
            "state": "SUCCEEDED" if succeeded else "FAILED",
            "started_at": started_at,
            "finished_at": func.now(),
            "succeeded_at": func.now() if succeeded else None,
            "result": _bounded(result or {}),
            "error": None if error is None else error[:MAX_ERROR_CHARS],
        }
        # INSERT … SELECT … WHERE the connector exists: a connector deleted meanwhile takes its rows
        # along (ON DELETE CASCADE), and a run ending after the delete records nothing
        row = select(*_typed(values)).where(exists().where(ConnectorRow.name == connector))
        upsert = insert(UpkeepJobRow).from_select(list(values), row)
        upsert = upsert.on_conflict_do_update(
            index_elements=[UpkeepJobRow.connector, UpkeepJobRow.job],
            set_={
                "state": upsert.excluded.state,
                "started_at": upsert.excluded.started_at,
                "finished_at": upsert.excluded.finished_at,
                "succeeded_at": case(
                    (upsert.excluded.state == "SUCCEEDED", upsert.excluded.succeeded_at),
                    else_=UpkeepJobRow.succeeded_at,
                ),
                "result": upsert.excluded.result,
                "error": upsert.excluded.error,
            },
        )
        with self._engine.begin() as conn:
            conn.execute(upsert)

    def listing(self, connector: str) -> list[UpkeepRecord]:
        """Every job's last run of `connector`, by job name."""
        query = select(UpkeepJobRow).where(UpkeepJobRow.connector == connector).order_by(UpkeepJobRow.job)
        with Session(self._engine) as s:
            return [_record(r) for r in s.scalars(query)]


def _record(row: UpkeepJobRow) -> UpkeepRecord:
    return UpkeepRecord(
        row.connector, row.job, row.state, row.started_at, row.finished_at, row.succeeded_at, row.result, row.error
    )


def _typed(values: dict[str, Any]) -> list[Any]:
    """The values of an INSERT … SELECT, typed as their columns (a bare NULL or dict has no type)."""
    columns = UpkeepJobRow.__table__.c
    return [v if hasattr(v, "compile") else literal(v, type_=columns[k].type) for k, v in values.items()]


def _bounded(result: Mapping[str, Any]) -> dict[str, Any]:
    """`result` as JSON (anything else as its text), or only its size when it is too large."""
    text = json.dumps(result, default=str, sort_keys=True)
    if len(text.encode()) > MAX_RESULT_BYTES:
        return {"result_bytes": len(text.encode()), "note": f"larger than {MAX_RESULT_BYTES} bytes: not kept"}
    loaded: dict[str, Any] = json.loads(text)
    return loaded
