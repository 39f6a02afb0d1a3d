"""`ConnectUpkeepOperator`: one Airflow task = one table-upkeep job of a sink (compaction, snapshot
expiry, orphan files, optimize, vacuum), downstream of the sink's tasks.

Thin, as `ConnectTaskOperator`: the library decides and does it (`runtime.execution.upkeep`), in
this task's process (pyiceberg and delta-rs need no Spark, so the task takes no Spark pool's slot);
the operator maps the outcome to Airflow's:

* SUCCEEDED: what the job did is logged (and recorded in the metadata store, `upkeep_jobs`).
* SKIPPED: not due (its last success is younger than `upkeep.schedule`), the connector is not
  RUNNING, or the job is gone from its config: `AirflowSkipException`, not a failure.
* FAILED: one line, secrets masked; `AirflowFailException` when the config or the table must change
  first (`config`, `data`, `fatal` errors), else `AirflowException`, retried as the DAG says.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowException, AirflowFailException, AirflowSkipException

from connect_core.runtime.context import Runtime
from connect_core.runtime.execution.upkeep import UpkeepOutcome, UpkeepState, run_upkeep

__all__ = ["ConnectUpkeepOperator"]


class ConnectUpkeepOperator(BaseOperator):
    template_fields: Sequence[str] = ("connector", "job")
    ui_color = "#eef7e8"

    def __init__(self, *, connector: str, job: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.connector = connector
        self.job = job

    def execute(self, context: Any) -> None:
        runtime = Runtime.open(upgrade=False)
        try:
            outcome = run_upkeep(runtime, self.connector, self.job)
        finally:
            runtime.close()
        self._report(outcome)

    def _report(self, outcome: UpkeepOutcome) -> None:
        what = f"upkeep `{self.job}` of connector `{self.connector}`"
        if outcome.state is UpkeepState.SKIPPED:
            self.log.info("%s skipped: %s", what, outcome.cause)
            raise AirflowSkipException(outcome.cause)
        if outcome.state is UpkeepState.FAILED:
            message = f"{what} failed ({outcome.error_kind or 'unexpected'} error): {outcome.cause}"
            self.log.error("%s", message)
            if outcome.fatal:
                raise AirflowFailException(message + " (not retried: fix the connector's config or table)")
            raise AirflowException(message)
        self.log.info("%s done: %s", what, json.dumps(outcome.result, sort_keys=True, default=str)[:4000])
