"""`ConnectTaskOperator`: one Airflow task = one run of one Connect task, where the launcher says.

Thin on purpose, as the Spark provider's operator is over its hook: it holds template fields, asks the
library whether to run (the connector is RUNNING, the source has something new: `precheck`, before any
Spark start-up), hands the run to the launcher (`runtime.execution.launcher`: the pool's warm worker, a
Spark Connect client in this process, or a spark-submit through `ConnectSubmitHook`), and maps the one
outcome it gets back to Airflow:

* SUCCEEDED: the topic Assets get an event saying what landed; a source's empty micro-batch is a skip,
  so sinks do not wake up for nothing.
* SKIPPED (the connector is not RUNNING) and FENCED (a rebalance or a config change gave the task a new
  generation: the newer run owns it): `AirflowSkipException`, as neither is a failure.
* BUSY (another run holds the task's lease: a `connect run`, a run that outlived its schedule):
  `AirflowRescheduleException`, as a sensor in reschedule mode waits: the task is up for reschedule, holds
  no worker slot, uses no retry, and runs once the lease is free; so the data that woke it is not left for
  the next trigger.
* FAILED with a `config`, `data` or `fatal` error: `AirflowFailException` (no retry could help); with a
  `retriable` or `unexpected` one, or a runner that died unreported: `ConnectRunFailed`, retried.

Secrets (the metadata database URL, Spark settings such as `fs.s3a.secret.key`) reach spark-submit
through `ConnectSubmitHook`, never as arguments, and are registered with Airflow's log masker.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk.exceptions import (
    AirflowException,
    AirflowFailException,
    AirflowRescheduleException,
    AirflowSkipException,
)
from airflow.sdk.log import mask_secret
from sqlalchemy.engine import make_url

from connect_core.airflow._facets import operator_lineage, topic_extras
from connect_core.airflow.hook import ConnectSubmitHook, hook_for
from connect_core.runtime.cluster.rebalancer import Placement
from connect_core.runtime.context import Runtime
from connect_core.runtime.execution.launcher import FATAL_KINDS, Launcher, Outcome, State, plan_runs, root_cause
from connect_core.runtime.execution.precheck import has_new_data, record_failure
from connect_core.runtime.execution.submit import RUNNER_MAIN, SubmitResult, exit_code, runner_args, runner_env
from connect_core.runtime.execution.worker_client import WorkerGone
from connect_core.runtime.lineage import run_lineage
from connect_core.runtime.security import mask_text, masker
from connect_core.runtime.spark.conf import merge_spark_conf, spark_conf, split_secret_conf
from connect_core.runtime.spark.connect import public_master, token_of
from connect_core.runtime.store.states import TargetState
from connect_core.runtime.topics.store import Segment
from connect_core.sdk.errors import ConfigError, FatalError

#: A topic's Asset is named this and the topic (dag_factory.topic_asset).
TOPIC_ASSET_PREFIX = "connect.topic."

__all__ = ["DEFAULT_SPARK_CONN_ID", "NO_RETRY_KINDS", "ConnectRunFailed", "ConnectTaskOperator", "root_cause"]

#: Error kinds (the runner's `stats.error_kind`) that a retry of the same run cannot fix.
NO_RETRY_KINDS = FATAL_KINDS


class ConnectRunFailed(AirflowException):
    """A run failed with an error a retry may fix (`retriable` or `unexpected`): Airflow retries it."""


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
        self._process_env: dict[str, str] = {}
        self._secret_conf: dict[str, str] = {}
        self._source = False
        self._started = time.monotonic()

    def execute(self, context: Any) -> None:
        self._started = time.monotonic()
        runtime = Runtime.open(upgrade=False)
        try:
            outcome = self._launch(runtime, context)
            landed: list[Segment] = []  # what the topic Asset events announce: only a source's have any
            if self._source and self.outlets and outcome.state is State.SUCCEEDED and outcome.run_id is not None:
                landed = runtime.topics.run_segments(outcome.run_id)
            busy_wait = _busy_wait(runtime.settings.lease_seconds)
        finally:
            runtime.close()
        self._report(outcome, busy_wait)
        self._announce(context, outcome, landed)

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        """OpenLineage (the Airflow provider calls it when the task ends): the datasets the run read
        and wrote (`runtime.lineage`), from the metadata store and segment footers only."""
        runtime = Runtime.open(upgrade=False)
        try:
            return operator_lineage(run_lineage(runtime, self.connector, self.connect_task_id))
        finally:
            runtime.close()

    def _announce(self, context: Any, outcome: Outcome, landed: Sequence[Segment]) -> None:
        """Each topic's Asset event says what landed in it (rows, offsets by partition, the run), so a
        downstream DAG can read it from the event's `extra`."""
        events = context.get("outlet_events") if context else None
        if events is None:
            return
        extras = topic_extras(landed)
        for outlet in self.outlets:
            name = getattr(outlet, "name", "")
            extra = extras.get(name.removeprefix(TOPIC_ASSET_PREFIX)) if name.startswith(TOPIC_ASSET_PREFIX) else None
            if extra:
                run = {"connector": self.connector, "task": self.connect_task_id, "run_id": outcome.run_id}
                events[outlet].extra.update({**run, **extra})

    def _launch(self, runtime: Runtime, context: Any) -> Outcome:
        """Whether to run (else skip), where (the task's placement), and the launcher's outcome."""
        try:
            info = runtime.connectors.get(self.connector)
            self._source = info.type == "source"
            if info.target_state != TargetState.RUNNING:
                raise AirflowSkipException(f"connector `{self.connector}` is {info.target_state}")
            if self.precheck and self._nothing_new(runtime):
                raise AirflowSkipException("nothing new since the last commit: Spark not started")
            # Resolved here, on the worker, so the database URL never enters the serialized DAG; it
            # reaches a spark-submit as its environment only (ConnectSubmitHook), and logs mask it.
            self._process_env = {**(self.env_vars or {}), **runner_env(runtime.settings, runtime.database_url)}
            _mask_everywhere(runtime.database_url)
            # Run where the current assignment says; the runner re-checks it under the task's row lock.
            (planned,) = plan_runs(runtime, [self.connector], task=self.connect_task_id)
            self._placement = placement = planned.placement
            assert placement is not None
            if token := token_of(placement.master):
                mask_secret(token)
            self.log.info(
                "task `%s-%s` runs on Spark pool `%s` (%s), rebalance generation %s",
                self.connector,
                self.connect_task_id,
                placement.pool,
                public_master(placement.master),
                placement.generation,
            )
            launcher = Launcher(
                runtime,
                submit=lambda tasks, **kw: self._spark_submit(runtime, context, **kw),
                on_log=lambda level, line: self.log.log(level, "%s", mask_text(line)),
                logger=self.log,
            )
            (outcome,) = launcher.launch([planned]).outcomes
            return outcome
        except (ConfigError, FatalError) as exc:  # found before Spark starts: no retry can fix it either
            message = mask_text(f"{type(exc).__name__}: {exc}")
            self.log.error("task `%s-%s` cannot run: %s", self.connector, self.connect_task_id, message)
            raise AirflowFailException(message) from exc
        except WorkerGone as exc:  # its run may have committed or not: a retry's run will know
            raise ConnectRunFailed(str(exc)) from None

    def _nothing_new(self, runtime: Runtime) -> bool:
        """The pre-check; a cause it finds that no run can get past (a refused login) fails the task
        now, recorded as the task's failed run, instead of after a Spark start-up."""
        try:
            return has_new_data(runtime, self.connector, self.connect_task_id) is False
        except (ConfigError, FatalError) as exc:
            record_failure(runtime, self.connector, self.connect_task_id, exc)
            raise

    def _spark_submit(
        self,
        runtime: Runtime,
        context: Any,
        *,
        master: str | None,
        placement: Placement | None,
        conf: Mapping[str, str],
    ) -> list[SubmitResult]:
        """The launcher's spark-submit, through the Spark provider (its connection, deploy modes and
        driver tracking); the runner's result comes back in its output (`ConnectSubmitHook.results`)."""
        assert placement is not None
        self.conf, self._secret_conf = split_secret_conf(
            spark_conf(merge_spark_conf(placement.conf, conf, self.conf or {}), runtime.settings)
        )
        for value in self._secret_conf.values():
            mask_secret(value)
        self.application_args = runner_args(self.connector, self.connect_task_id, placement.pool)
        started, code, tail = time.monotonic(), 0, ""
        self._hook = None  # a hook of this try's placement, with this try's results only
        try:
            super().execute(context)
        except Exception as exc:  # spark-submit's exit code; the runner's result or the run's record says why
            code, tail = 1, mask_text(str(exc))
        hook = self._hook
        result: dict[str, Any] = hook.results[0] if isinstance(hook, ConnectSubmitHook) and hook.results else {}
        code = exit_code(str(result["state"])) if result else code
        wall = round(time.monotonic() - started, 3)
        return [SubmitResult(self.connector, self.connect_task_id, code, wall, result, tail)]

    def _report(self, outcome: Outcome, busy_wait: float) -> None:
        """The outcome, as Airflow's: a success, a skip, a reschedule, or a failure (retried or not)."""
        task = f"task `{self.connector}-{self.connect_task_id}`"
        run = f"run {outcome.run_id}" if outcome.run_id is not None else task
        if outcome.where is not None:
            self.log.info("%s took %s", task, outcome.breakdown(time.monotonic() - self._started))
        if outcome.state is State.SUCCEEDED:
            self.log.info("run %s: SUCCEEDED, %s row(s)", outcome.run_id, outcome.rows)
            if self._source and not outcome.rows:
                raise AirflowSkipException("the micro-batch was empty: no new data for sinks")
        elif outcome.state is State.SKIPPED:
            raise AirflowSkipException(outcome.cause or "the runner made no run")
        elif outcome.state is State.FENCED:
            # Superseded by a rebalance or a config change: the newer run owns the task. Not a failure.
            self.log.warning("%s was fenced: %s", run, outcome.cause or "superseded")
            raise AirflowSkipException(f"{run} was fenced: {outcome.cause or 'superseded'}")
        elif outcome.state is State.BUSY:
            self.log.warning("%s is busy, tried again in %.0f s: %s", task, busy_wait, outcome.cause)
            raise AirflowRescheduleException(datetime.now(UTC) + timedelta(seconds=busy_wait))
        else:
            kind = outcome.error_kind or "unexpected"
            message = f"{run} of {task} failed ({kind} error): {outcome.cause or 'no cause was recorded'}"
            if outcome.run_id is None:
                message = f"{outcome.where or 'the launch'} of {task} failed: {outcome.cause}"
            self.log.error("%s", message)
            # `from None`: a chained exception would be spark-submit's exit status with its whole command
            # line, which says nothing the run's own result does not.
            if outcome.fatal:
                raise AirflowFailException(message + " (not retried: fix the connector's config or data)") from None
            raise ConnectRunFailed(message) from None

    def _get_hook(self) -> ConnectSubmitHook:
        if self._placement is None:
            raise RuntimeError("the task's Spark pool is resolved in execute(), before the hook is built")
        return hook_for(
            self, master=self._placement.master, process_env=self._process_env, secret_conf=self._secret_conf
        )


def _busy_wait(lease_seconds: float) -> float:
    """How long a BUSY task waits before it tries again: a quarter of a lease (5 s to a minute), within
    which the holder either finishes or, dead, lets its lease lapse."""
    return min(60.0, max(5.0, lease_seconds / 4))


def _mask_everywhere(database_url: str) -> None:
    """Register the URL and its password as secrets with Airflow's task-log masker and ours."""
    password = make_url(database_url).password
    for secret in (database_url, password):
        if secret:
            mask_secret(str(secret))
            masker.add(str(secret))
