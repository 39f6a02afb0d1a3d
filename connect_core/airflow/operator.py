"""`ConnectTaskOperator`: one Airflow task = one spark-submit run of one Connect task.

Thin on purpose: it holds template fields and builds the Spark provider's hook;
what to run and whether to run come from the library (`connect_core.runtime`).
Before paying for a Spark start-up it asks the connector whether anything is
new (`precheck`); a run with nothing new, or of a connector that is not
RUNNING, is *skipped*: it emits no Asset event, so sinks do not wake up for
nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook
from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk.exceptions import AirflowSkipException

from connect_core.runtime.context import Runtime
from connect_core.runtime.precheck import has_new_data
from connect_core.runtime.rebalancer import Placement, place
from connect_core.runtime.submit import RUNNER_MAIN, merge_spark_conf, runner_args, runner_env, spark_conf

__all__ = ["DEFAULT_SPARK_CONN_ID", "ConnectTaskOperator"]

#: An optional Airflow connection with spark-submit settings (deploy mode, binary, queue); the
#: master always comes from the Spark pool the task is assigned to.
DEFAULT_SPARK_CONN_ID = "connect_spark"


class ConnectTaskOperator(SparkSubmitOperator):
    template_fields: Sequence[str] = ("connector", "connect_task_id", *SparkSubmitOperator.template_fields)
    ui_color = "#e8f4fd"

    def __init__(
        self,
        *,
        connector: str,
        connect_task_id: int,
        precheck: bool = True,
        conn_id: str = DEFAULT_SPARK_CONN_ID,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            application=str(RUNNER_MAIN),
            application_args=runner_args(connector, connect_task_id),
            name=f"connect:{connector}:task-{connect_task_id}",
            conf=spark_conf(kwargs.pop("conf", None)),
            conn_id=conn_id,
            **kwargs,
        )
        self.connector = connector
        self.connect_task_id = connect_task_id
        self.precheck = precheck
        self._placement: Placement | None = None

    def execute(self, context: Any) -> None:
        runtime = Runtime.open(upgrade=False)
        try:
            info = runtime.connectors.get(self.connector)
            if info.target_state != "RUNNING":
                raise AirflowSkipException(f"connector `{self.connector}` is {info.target_state}")
            if self.precheck and has_new_data(runtime, self.connector, self.connect_task_id) is False:
                raise AirflowSkipException("nothing new since the last commit: Spark not started")
            # Resolved here, on the worker, so the database URL never enters the serialized DAG.
            self.env_vars = {**runner_env(runtime.settings, runtime.database_url), **(self.env_vars or {})}
            # Run where the current assignment says; the runner re-checks it under the task's row lock.
            self._placement = place(runtime.engine, runtime.settings, self.connector, self.connect_task_id)
            self.conf = spark_conf(
                merge_spark_conf(self._placement.conf, runtime.spark_conf_for(self.connector), self.conf or {}),
                runtime.settings,
            )
            self.application_args = runner_args(self.connector, self.connect_task_id, self._placement.pool)
            self.log.info(
                "task `%s-%s` runs on Spark pool `%s` (%s), rebalance generation %s",
                self.connector,
                self.connect_task_id,
                self._placement.pool,
                self._placement.master,
                self._placement.generation,
            )
            before = _last_run_id(runtime, self.connector, self.connect_task_id)
            failure: Exception | None = None
            try:
                super().execute(context)
            except Exception as exc:  # spark-submit's exit code; the run's own record says why
                failure = exc
            run = _last_run(runtime, self.connector, self.connect_task_id)
        finally:
            runtime.close()
        fresh = run is not None and run["run_id"] != before
        if run is not None and fresh and run["state"] == "FENCED":
            # Superseded by a rebalance or a config change: the newer run owns the task. Not a failure.
            raise AirflowSkipException(f"run {run['run_id']} was fenced: {run.get('error') or 'superseded'}")
        if failure is not None:
            raise failure
        if run is None or not fresh:
            raise AirflowSkipException("the runner made no run (connector paused or stopped, or task moved meanwhile)")
        self.log.info(
            "run %s: %s, %s row(s), stats %s", run["run_id"], run["state"], run["stats"].get("rows"), run["stats"]
        )
        if info.type == "source" and not run["stats"].get("rows"):
            raise AirflowSkipException("the micro-batch was empty: no new data for sinks")

    def _get_hook(self) -> SparkSubmitHook:
        hook = super()._get_hook()
        if self._placement is not None:
            hook._connection["master"] = self._placement.master
        return hook


def _last_run(runtime: Runtime, connector: str, task_id: int) -> dict[str, Any] | None:
    runs = runtime.connectors.last_runs(connector, limit=1, task_id=task_id)
    return runs[0] if runs else None


def _last_run_id(runtime: Runtime, connector: str, task_id: int) -> int | None:
    run = _last_run(runtime, connector, task_id)
    return run["run_id"] if run else None
