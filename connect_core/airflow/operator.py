"""`ConnectTaskOperator`: one Airflow task = one spark-submit run of one Connect task.

Thin on purpose: it holds template fields and builds the Spark provider's hook;
what to run and whether to run come from the library (`connect_core.runtime`).
Before paying for a Spark start-up it asks the connector whether anything is
new (`precheck`); a run with nothing new, or of a connector that is not
RUNNING, is *skipped*: it emits no Asset event, so sinks do not wake up for
nothing.

Secrets (the metadata database URL, Spark settings such as `fs.s3a.secret.key`) reach
spark-submit through `ConnectSubmitHook`, never as arguments, and are registered with Airflow's
log masker. A failed run fails the task with the run's own root cause (class and message,
masked), logged at ERROR; a `config` or `fatal` error fails it for good (no retries, which could
not help), a `retriable` or `unexpected` one leaves it to the task's retries.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from typing import Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk.exceptions import AirflowException, AirflowFailException, AirflowSkipException
from airflow.sdk.log import mask_secret
from sqlalchemy.engine import make_url

from connect_core.airflow.hook import ConnectSubmitHook
from connect_core.runtime.cluster.rebalancer import Placement, place
from connect_core.runtime.cluster.spark_connect import is_connect_master, public_master, token_of
from connect_core.runtime.context import Runtime
from connect_core.runtime.execution.precheck import has_new_data
from connect_core.runtime.execution.submit import (
    RUNNER_MAIN,
    connect_client_command,
    merge_spark_conf,
    runner_args,
    runner_env,
    spark_conf,
    split_secret_conf,
)
from connect_core.runtime.execution.worker_client import WorkerGone, find_worker, fingerprint, run_on_worker
from connect_core.runtime.lineage import Dataset, run_lineage
from connect_core.runtime.security import mask_text, masker
from connect_core.runtime.store.connectors import ConnectorInfo
from connect_core.runtime.topics.store import Segment
from connect_core.sdk.errors import ConfigError, FatalError

#: A topic's Asset is named this and the topic (dag_factory.topic_asset).
TOPIC_ASSET_PREFIX = "connect.topic."

__all__ = ["DEFAULT_SPARK_CONN_ID", "NO_RETRY_KINDS", "ConnectRunFailed", "ConnectTaskOperator", "root_cause"]

#: Error kinds (the runner's `stats.error_kind`) that a retry of the same run cannot fix.
NO_RETRY_KINDS = frozenset({"config", "data", "fatal"})


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

    def execute(self, context: Any) -> None:
        runtime = Runtime.open(upgrade=False)
        try:
            try:
                info = self._prepare(runtime)
            except (ConfigError, FatalError) as exc:  # found before Spark starts: no retry can fix it either
                message = mask_text(f"{type(exc).__name__}: {exc}")
                self.log.error("task `%s-%s` cannot run: %s", self.connector, self.connect_task_id, message)
                raise AirflowFailException(message) from exc
            before = _last_run_id(runtime, self.connector, self.connect_task_id)
            failure: Exception | None = None
            try:
                if self._placement is not None and is_connect_master(self._placement.master):
                    self._run_client(runtime)
                else:
                    super().execute(context)
            except Exception as exc:  # spark-submit's exit code; the run's own record says why
                failure = exc
            run = _last_run(runtime, self.connector, self.connect_task_id)
            landed: list[Segment] = []  # what the topic Asset events announce: only a source's have any
            if info.type == "source" and self.outlets and run is not None and run["state"] == "SUCCEEDED":
                landed = runtime.topics.run_segments(run["run_id"])
        finally:
            runtime.close()
        fresh = run is not None and run["run_id"] != before
        if run is not None and fresh and run["state"] == "FENCED":
            # Superseded by a rebalance or a config change: the newer run owns the task. Not a failure.
            raise AirflowSkipException(f"run {run['run_id']} was fenced: {run.get('error') or 'superseded'}")
        if run is not None and fresh and run["state"] == "FAILED":
            self._fail(run)
        if failure is not None:
            # spark-submit failed before the runner recorded a run (JVM start-up, a killed driver).
            message = (
                f"spark-submit of task `{self.connector}-{self.connect_task_id}` failed: {mask_text(str(failure))}"
            )
            self.log.error("%s", message)
            raise ConnectRunFailed(message) from None
        if run is None or not fresh:
            raise AirflowSkipException("the runner made no run (connector paused or stopped, or task moved meanwhile)")
        self.log.info(
            "run %s: %s, %s row(s), stats %s", run["run_id"], run["state"], run["stats"].get("rows"), run["stats"]
        )
        if info.type == "source" and not run["stats"].get("rows"):
            raise AirflowSkipException("the micro-batch was empty: no new data for sinks")
        self._announce(context, run, landed)

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        """OpenLineage (the Airflow provider calls it when the task ends): the datasets the run read
        and wrote, with the rows written and their columns (`runtime.lineage`); topics as datasets
        of their own. Read from the metadata store and segment footers only."""
        from airflow.providers.openlineage.extractors import OperatorLineage
        from openlineage.client.event_v2 import InputDataset, OutputDataset
        from openlineage.client.facet_v2 import output_statistics_output_dataset as statistics
        from openlineage.client.facet_v2 import schema_dataset

        runtime = Runtime.open(upgrade=False)
        try:
            found = run_lineage(runtime, self.connector, self.connect_task_id)
        finally:
            runtime.close()

        def facets(d: Dataset) -> dict[str, Any]:
            if d.fields is None:
                return {}
            fields = [schema_dataset.SchemaDatasetFacetFields(name=f.name, type=f.type) for f in d.fields]
            return {"schema": schema_dataset.SchemaDatasetFacet(fields=fields)}

        outputs = [
            OutputDataset(
                d.namespace,
                d.name,
                {"outputStatistics": statistics.OutputStatisticsOutputDatasetFacet(rowCount=d.rows)}
                if d.rows is not None
                else {},
                facets=facets(d),
            )
            for d in found.outputs
        ]
        inputs = [InputDataset(d.namespace, d.name, facets=facets(d)) for d in found.inputs]
        return OperatorLineage(inputs=inputs, outputs=outputs)

    def _announce(self, context: Any, run: dict[str, Any], landed: Sequence[Segment]) -> None:
        """Each topic's Asset event says what landed in it (rows, offsets by partition, the run), so a
        downstream DAG can read it from the event's `extra`."""
        events = context.get("outlet_events") if context else None
        if events is None:
            return
        by_topic: dict[str, list[Segment]] = {}
        for segment in landed:
            by_topic.setdefault(segment.topic, []).append(segment)
        for outlet in self.outlets:
            name = getattr(outlet, "name", "")
            segments = (
                by_topic.get(name.removeprefix(TOPIC_ASSET_PREFIX)) if name.startswith(TOPIC_ASSET_PREFIX) else None
            )
            if not segments:
                continue
            offsets: dict[str, list[int]] = {}
            for s in segments:  # [first offset, end offset) per partition
                span = offsets.setdefault(str(s.partition), [s.start_offset, s.end_offset])
                span[0], span[1] = min(span[0], s.start_offset), max(span[1], s.end_offset)
            events[outlet].extra.update(
                {
                    "connector": self.connector,
                    "task": self.connect_task_id,
                    "run_id": run["run_id"],
                    "rows": sum(s.row_count for s in segments),
                    "offsets": offsets,
                }
            )

    def _prepare(self, runtime: Runtime) -> ConnectorInfo:
        """Whether to run (else skip), where, and with what: the hook's master, environment and conf."""
        info = runtime.connectors.get(self.connector)
        if info.target_state != "RUNNING":
            raise AirflowSkipException(f"connector `{self.connector}` is {info.target_state}")
        if self.precheck and has_new_data(runtime, self.connector, self.connect_task_id) is False:
            raise AirflowSkipException("nothing new since the last commit: Spark not started")
        # Resolved here, on the worker, so the database URL never enters the serialized DAG; it
        # reaches spark-submit as its environment only (ConnectSubmitHook), and logs mask it.
        self._process_env = {**(self.env_vars or {}), **runner_env(runtime.settings, runtime.database_url)}
        _mask_everywhere(runtime.database_url)
        # Run where the current assignment says; the runner re-checks it under the task's row lock.
        self._placement = place(runtime.engine, runtime.settings, self.connector, self.connect_task_id)
        self.conf, self._secret_conf = split_secret_conf(
            spark_conf(
                merge_spark_conf(self._placement.conf, runtime.spark_conf_for(self.connector), self.conf or {}),
                runtime.settings,
            )
        )
        for value in self._secret_conf.values():
            mask_secret(value)
        self.application_args = runner_args(self.connector, self.connect_task_id, self._placement.pool)
        self.log.info(
            "task `%s-%s` runs on Spark pool `%s` (%s), rebalance generation %s",
            self.connector,
            self.connect_task_id,
            self._placement.pool,
            public_master(self._placement.master),
            self._placement.generation,
        )
        return info

    def _run_client(self, runtime: Runtime) -> None:
        """A Spark Connect pool: the run goes to the pool's worker if it runs on this machine (a warm
        process: no interpreter or imports to pay), else to the runner as a plain Python client of
        the warm server; either way its output is this task's log (masked), and no JVM starts."""
        assert self._placement is not None
        if token := token_of(self._placement.master):
            mask_secret(token)
        if self._run_on_worker(runtime):
            return
        cmd, env = connect_client_command(
            self.connector,
            self.connect_task_id,
            self._placement.master,
            {**os.environ, **self._process_env},
            pool=self._placement.pool,
        )
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        assert proc.stdout is not None
        for line in proc.stdout:
            self.log.info("%s", mask_text(line.rstrip()))
        if proc.wait() != 0:
            raise AirflowException(f"the runner (a Spark Connect client) exited with {proc.returncode}")

    def _run_on_worker(self, runtime: Runtime) -> bool:
        """Whether the pool's worker on this machine took the run (its record says how it went)."""
        assert self._placement is not None
        settings = runtime.settings
        mark = fingerprint(settings)
        path = find_worker(settings.home, mark, pool=self._placement.pool)
        if path is None:
            return False
        self.log.info("the run goes to the worker of pool `%s`", self._placement.pool)
        try:
            answer = run_on_worker(
                path,
                mark,
                [self.connector],
                task=self.connect_task_id,
                on_log=lambda level, line: self.log.log(level, "%s", mask_text(line)),
            )
        except WorkerGone as exc:
            raise AirflowException(str(exc)) from None
        if answer is None:
            return False
        for result in answer["results"]:  # as the runner's exit code says on the other paths
            if result.get("exit_code"):
                state, message = result.get("state"), result.get("message") or ""
                raise AirflowException(f"the run on pool `{self._placement.pool}` ended {state}: {message}")
        return True

    def _fail(self, run: dict[str, Any]) -> None:
        """Fail the task with the run's root cause: for good if a retry cannot help, else retriably."""
        kind = str((run.get("stats") or {}).get("error_kind") or "unexpected")
        cause = root_cause(run.get("error") or "") or "the run failed without recording why"
        message = (
            f"run {run['run_id']} of task `{self.connector}-{self.connect_task_id}` failed ({kind} error): {cause}"
        )
        self.log.error("%s", message)
        # `from None`: the chained exception would be spark-submit's exit status with its whole command
        # line, which says nothing the run's record does not; the masked trace is in the task status.
        if kind in NO_RETRY_KINDS:
            raise AirflowFailException(message + " (not retried: fix the connector's config or data)") from None
        raise ConnectRunFailed(message) from None

    def _get_hook(self) -> ConnectSubmitHook:
        if self._placement is None:
            raise RuntimeError("the task's Spark pool is resolved in execute(), before the hook is built")
        return ConnectSubmitHook(
            master=self._placement.master,
            process_env=self._process_env,
            secret_conf=self._secret_conf,
            cluster_env={k: v for k, v in self._process_env.items() if k.startswith("CONNECT_")},
            conf=self.conf,
            conn_id=self._conn_id,
            files=self.files,
            py_files=self.py_files,
            archives=self._archives,
            driver_class_path=self.driver_class_path,
            jars=self.jars,
            java_class=self._java_class,
            packages=self.packages,
            exclude_packages=self.exclude_packages,
            repositories=self._repositories,
            total_executor_cores=self._total_executor_cores,
            executor_cores=self._executor_cores,
            executor_memory=self._executor_memory,
            driver_memory=self._driver_memory,
            keytab=self.keytab,
            principal=self.principal,
            proxy_user=self.proxy_user,
            name=self.name,
            num_executors=self._num_executors,
            status_poll_interval=self._status_poll_interval,
            application_args=self.application_args,
            verbose=self._verbose,
            spark_binary=self._spark_binary,
            properties_file=self.properties_file,
            yarn_queue=self._yarn_queue,
            deploy_mode=self._deploy_mode,
            use_krb5ccache=self._use_krb5ccache,
            post_submit_commands=self.post_submit_commands,
            track_driver_via_k8s_api=self._track_driver_via_k8s_api,
            yarn_track_via_rm_api=self._yarn_track_via_rm_api,
            yarn_rm_auth=self._yarn_rm_auth,
        )


def root_cause(error: str) -> str:
    """The exception line(s) of a recorded run error: `Class: message` of the outermost exception,
    without the frames (the error is a masked traceback, or already just a message)."""
    text = error.strip()
    marker = "Traceback (most recent call last):"
    if marker in text:
        text = text[text.rindex(marker) + len(marker) :]
        lines = text.splitlines()
        # Frames are indented; the exception starts at the first line that is not.
        start = next((i for i, line in enumerate(lines) if line and not line[0].isspace()), len(lines))
        text = "\n".join(lines[start:]).strip()
    return mask_text(text[:2000])


def _mask_everywhere(database_url: str) -> None:
    """Register the URL and its password as secrets with Airflow's task-log masker and ours."""
    password = make_url(database_url).password
    for secret in (database_url, password):
        if secret:
            mask_secret(str(secret))
            masker.add(str(secret))


def _last_run(runtime: Runtime, connector: str, task_id: int) -> dict[str, Any] | None:
    runs = runtime.connectors.last_runs(connector, limit=1, task_id=task_id)
    return runs[0] if runs else None


def _last_run_id(runtime: Runtime, connector: str, task_id: int) -> int | None:
    run = _last_run(runtime, connector, task_id)
    return run["run_id"] if run else None
