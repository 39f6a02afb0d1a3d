"""`ConnectSubmitHook`: the Spark provider's hook, with the task's Spark pool as master and no secret in argv.

Two defaults of `SparkSubmitHook` leak secrets when used as is:

* Without the `connect_spark` Airflow connection it resolves the master to `yarn` and decides
  *then* that it submits to YARN; overriding the master afterwards leaves that decision in place,
  so every `env_vars` entry became a `--conf spark.yarn.appMasterEnv.NAME=value` argument: in
  `ps`, and in the task log's "Spark-Submit cmd" line. This hook takes the master of the task's
  pool and decides YARN / Kubernetes / standalone-cluster from *that*.
* `env_vars` are arguments whenever the master is YARN or Kubernetes, even in client mode where
  the driver is the spark-submit process itself. This hook never hands the provider `env_vars`:
  the runner's environment goes to the spark-submit process as its environment, and where the
  driver runs elsewhere (cluster deploy mode) as Spark settings in a 0600 properties file, as do
  Spark settings whose key looks secret (`spark.conf.secret_properties`), deleted after the submit.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

from connect_core.runtime.execution.submit import RESULT_PREFIX
from connect_core.runtime.spark.conf import secret_properties

if TYPE_CHECKING:
    from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

__all__ = ["ConnectSubmitHook", "driver_env_conf", "hook_for"]


def driver_env_conf(master: str, env: Mapping[str, str]) -> dict[str, str]:
    """Spark settings that give a driver running on the cluster (cluster deploy mode) `env`."""
    if "yarn" in master:
        prefix = "spark.yarn.appMasterEnv."
    elif "k8s" in master:
        prefix = "spark.kubernetes.driverEnv."
    else:  # standalone: Spark runs no Python driver in cluster deploy mode there
        return {}
    return {prefix + name: value for name, value in env.items()}


class ConnectSubmitHook(SparkSubmitHook):
    """A `SparkSubmitHook` that submits to `master` with `process_env` and `secret_conf` kept off argv."""

    def __init__(
        self,
        *,
        master: str,
        process_env: Mapping[str, str],
        secret_conf: Mapping[str, str],
        cluster_env: Mapping[str, str],
        **kwargs: Any,
    ) -> None:
        if kwargs.get("env_vars"):
            raise ValueError("ConnectSubmitHook takes `process_env`, never `env_vars` (which become arguments)")
        self._master = master
        super().__init__(**kwargs)
        self._process_env = dict(process_env)
        self._secret_conf = dict(secret_conf)
        if self._connection["deploy_mode"] == "cluster":
            # The driver is not this process's child: it gets the runner's settings from Spark.
            self._secret_conf.update(driver_env_conf(master, cluster_env))
        if self._secret_conf and self._properties_file:
            # spark-submit reads one --properties-file: ours would silently replace the user's.
            raise ValueError(
                "`properties_file` cannot be combined with secret Spark settings or cluster deploy mode: "
                "move its settings into the Spark pool's conf"
            )
        self._secret_args: list[str] = []
        #: What the runner reported of each run (its `CONNECT_RESULT` lines), in order; none when the
        #: driver runs on the cluster (cluster deploy mode), whose output spark-submit does not relay.
        self.results: list[dict[str, Any]] = []

    _quiet: _Quiet | None = None

    @property
    def log(self) -> Any:
        return self._quiet or super().log

    def _resolve_connection(self) -> dict[str, Any]:
        # The base __init__ derives YARN / Kubernetes / cluster tracking from this: the pool's master.
        # The provider's "defaulting to yarn" line, when there is no such connection, would be
        # wrong here: the master is the pool's whatever the connection says.
        self._quiet = quiet = _Quiet(super().log, "Could not load connection string")
        try:
            connection = super()._resolve_connection()
        finally:
            self._quiet = None
        if quiet.dropped:
            self.log.info("no Airflow connection `%s`: spark-submit to the Spark pool's master", self._conn_id)
        connection["master"] = self._master
        # Without the connection, the provider drops the deploy mode and queue it was given.
        connection["deploy_mode"] = connection["deploy_mode"] or self._deploy_mode
        connection["queue"] = connection["queue"] or self._yarn_queue
        return connection

    def _build_spark_common_args(self) -> list[str]:
        return [*super()._build_spark_common_args(), *self._secret_args]

    def _process_spark_submit_log(self, itr: Iterator[Any]) -> None:
        super()._process_spark_submit_log(self._results_from(itr))

    def _results_from(self, lines: Iterator[Any]) -> Iterator[Any]:
        for line in lines:
            if isinstance(line, str) and line.startswith(RESULT_PREFIX):
                self.results.append(json.loads(line[len(RESULT_PREFIX) :]))
            yield line

    def submit(self, application: str = "", **kwargs: Any) -> str | None:
        env = {**os.environ, **kwargs.pop("env", {}), **self._process_env}
        with secret_properties(self._secret_conf) as self._secret_args:
            try:
                return super().submit(application, env=env, **kwargs)
            finally:
                self._secret_args = []  # the file is gone once the block ends


class _Quiet:
    """A logger that drops the info lines whose template starts with `prefix` (counting them)."""

    def __init__(self, log: Any, prefix: str) -> None:
        self._log, self.prefix, self.dropped = log, prefix, 0

    def info(self, msg: Any, *args: Any, **kwargs: Any) -> None:
        if str(msg).startswith(self.prefix):
            self.dropped += 1
        else:
            self._log.info(msg, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._log, name)


def hook_for(
    operator: SparkSubmitOperator,
    *,
    master: str,
    process_env: Mapping[str, str],
    secret_conf: Mapping[str, str],
) -> ConnectSubmitHook:
    """The hook of a `SparkSubmitOperator` (as its own `_get_hook` builds it), submitting to `master`
    with `process_env` and `secret_conf` off argv."""
    op: Any = operator  # the provider keeps these as private attributes
    return ConnectSubmitHook(
        master=master,
        process_env=process_env,
        secret_conf=secret_conf,
        cluster_env={k: v for k, v in process_env.items() if k.startswith("CONNECT_")},
        conf=op.conf,
        conn_id=op._conn_id,
        files=op.files,
        py_files=op.py_files,
        archives=op._archives,
        driver_class_path=op.driver_class_path,
        jars=op.jars,
        java_class=op._java_class,
        packages=op.packages,
        exclude_packages=op.exclude_packages,
        repositories=op._repositories,
        total_executor_cores=op._total_executor_cores,
        executor_cores=op._executor_cores,
        executor_memory=op._executor_memory,
        driver_memory=op._driver_memory,
        keytab=op.keytab,
        principal=op.principal,
        proxy_user=op.proxy_user,
        name=op.name,
        num_executors=op._num_executors,
        status_poll_interval=op._status_poll_interval,
        application_args=op.application_args,
        verbose=op._verbose,
        spark_binary=op._spark_binary,
        properties_file=op.properties_file,
        yarn_queue=op._yarn_queue,
        deploy_mode=op._deploy_mode,
        use_krb5ccache=op._use_krb5ccache,
        post_submit_commands=op.post_submit_commands,
        track_driver_via_k8s_api=op._track_driver_via_k8s_api,
        yarn_track_via_rm_api=op._yarn_track_via_rm_api,
        yarn_rm_auth=op._yarn_rm_auth,
    )
