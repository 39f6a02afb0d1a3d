"""Running a task through a real `spark-submit` of the runner.

Secrets never travel as arguments: `ps` and `/proc/<pid>/cmdline` show every process's
arguments to every user of the machine, and spark-submit's command line ends up in logs. The
metadata database URL goes by the process environment (`runner_env`); Spark settings whose key
looks secret (`spark.hadoop.fs.s3a.secret.key`) go in a properties file only the user can read,
deleted as soon as spark-submit exits (`spark.conf.secret_properties`). The command that is logged
is masked.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from connect_core.runtime.security import mask_text, masker
from connect_core.runtime.settings import Settings
from connect_core.runtime.spark.conf import merge_spark_conf, secret_properties, spark_conf, split_secret_conf
from connect_core.runtime.spark.conf_policy import check_master
from connect_core.runtime.spark.connect import REMOTE_ENV, is_connect_master, token_of
from connect_core.runtime.spark.install import spark_env, spark_submit_path
from connect_core.runtime.store.states import RunState

if TYPE_CHECKING:
    from connect_core.runtime.cluster.rebalancer import Placement
    from connect_core.runtime.context import Runtime

__all__ = [
    "RESULT_PREFIX",
    "RUNNER_MAIN",
    "SubmitResult",
    "connect_client_command",
    "exit_code",
    "run_as_client",
    "runner_args",
    "runner_env",
    "security_env",
    "spark_submit_command",
    "submit_task",
    "submit_tasks",
]

log = logging.getLogger(__name__)

RESULT_PREFIX = "CONNECT_RESULT "
RUNNER_MAIN = Path(__file__).with_name("_runner_main.py")


def exit_code(state: str) -> int:
    """The runner's exit code for a run's state: 0 succeeded or skipped, 3 fenced, 1 anything else."""
    return {RunState.SUCCEEDED: 0, "SKIPPED": 0, RunState.FENCED: 3}.get(state, 1)


@dataclass(frozen=True)
class SubmitResult:
    connector: str
    task_id: int
    exit_code: int
    wall_s: float
    result: dict[str, Any]  # RunResult.to_dict() from the driver, {} if it died
    stderr_tail: str

    @property
    def state(self) -> str:
        return str(
            self.result.get("state") or ("KILLED" if self.exit_code < 0 or self.exit_code == 137 else RunState.FAILED)
        )


def runner_args(
    connector: str, task_id: int, pool: str | None = None, more: Sequence[tuple[str, int]] = ()
) -> list[str]:
    """The runner's arguments: a run of the task, then of each task in `more`, in one process."""
    args = ["--connector", connector, "--task", str(task_id), *(["--pool", pool] if pool else [])]
    for other, other_task in more:
        args += ["--connector", other, "--task", str(other_task)]
    return args


def security_env(settings: Settings) -> dict[str, str]:
    """The worker's security settings, resolved, for a child process (a runner, Airflow's processes):
    it must check against what this process was started with, whatever its own working directory
    (the default of `file.allowed.paths`)."""
    return {
        "CONNECT_FILE_ALLOWED_PATHS": ",".join(map(str, settings.allowed_file_dirs())),
        "CONNECT_CONFIG_PROVIDERS": settings.config_providers,
        "CONNECT_CONFIG_PROVIDERS_FILE_ALLOWED_PATHS": ",".join(map(str, settings.provider_file_dirs())),
        "CONNECT_CONFIG_PROVIDERS_ENV_ALLOWLIST_PATTERN": settings.config_providers_env_allowlist_pattern,
    }


def runner_env(settings: Settings, database_url: str) -> dict[str, str]:
    """What the runner needs from its parent. The database URL goes by environment, never on
    the command line, so it does not show in `ps` or logs."""
    return {
        "CONNECT_DATABASE_URL": database_url,
        "CONNECT_HOME": str(settings.home),
        "CONNECT_TOPICS_PATH": settings.topics_base,
        "CONNECT_PLUGIN_PATH": settings.plugin_path,
        "CONNECT_LEASE_SECONDS": str(settings.lease_seconds),
        **security_env(settings),
        **spark_env(settings),
    }


def spark_submit_command(
    settings: Settings,
    connector: str,
    task_id: int,
    *,
    master: str,
    conf: Mapping[str, str] | None = None,
    pool: str | None = None,
    more: Sequence[tuple[str, int]] = (),
    secret_args: Sequence[str] = (),
) -> list[str]:
    """The spark-submit of one run of task `connector`-`task_id` — and of the tasks in `more` after
    it, one after another in the same Spark application (as a Kafka Connect worker hosts many tasks).

    Settings whose key looks secret are left out of the arguments: pass `secret_args` (from
    `secret_properties` of the second half of `split_secret_conf`) to load them from a file."""
    check_master(master, "spark-submit")  # an argument: never one that starts with `-` or holds a blank
    cmd = [spark_submit_path(settings), "--master", master]
    cmd += ["--name", f"connect:{connector}:task-{task_id}" + (f"+{len(more)}" if more else "")]
    public, _ = split_secret_conf(spark_conf(conf, settings))
    for key, value in public.items():
        cmd += ["--conf", f"{key}={value}"]
    cmd += secret_args
    return [*cmd, str(RUNNER_MAIN), *runner_args(connector, task_id, pool, more)]


def connect_client_command(
    connector: str,
    task_id: int,
    master: str,
    env: Mapping[str, str],
    *,
    pool: str | None = None,
    more: Sequence[tuple[str, int]] = (),
) -> tuple[list[str], dict[str, str]]:
    """The runner as a plain Python client of the Spark Connect server at `master` (no spark-submit,
    no JVM of its own), and its environment: the URL, which may hold the server's token, goes there
    (`REMOTE_ENV`), never into the arguments."""
    if token := token_of(master):
        masker.add(token)
    return [sys.executable, str(RUNNER_MAIN), *runner_args(connector, task_id, pool, more)], {**env, REMOTE_ENV: master}


def run_as_client(
    runtime: Runtime, tasks: Sequence[tuple[str, int]], master: str, pool: str | None
) -> list[SubmitResult]:
    """Runs of `tasks`, in order, in this process, as a client of the Spark Connect server at
    `master` (a session per run): what `connect run` does on a warm pool, where a second process
    would cost more than the run (its interpreter, imports and metadata connection)."""
    from pyspark.sql import SparkSession

    from connect_core.runtime.execution.runner import TaskRunner

    if token := token_of(master):
        masker.add(token)
    runner = TaskRunner.for_runtime(runtime, lambda: SparkSession.builder.remote(master).create(), pool=pool)
    found = []
    for connector, task_id in tasks:
        started = time.monotonic()
        result = runner.run(connector, task_id)
        wall = round(time.monotonic() - started, 3)
        found.append(SubmitResult(connector, task_id, exit_code(result.state), wall, result.to_dict(), ""))
    return found


def submit_task(
    settings: Settings,
    database_url: str,
    connector: str,
    task_id: int,
    *,
    master: str | None = None,
    placement: Placement | None = None,
    conf: Mapping[str, str] | None = None,
    extra_env: Mapping[str, str] | None = None,
    timeout: float | None = None,
) -> SubmitResult:
    """spark-submit one run of the task and wait for it: on `master` if given (no pool check), else
    where `placement` says (default: the local pool's machine, `local[*]`)."""
    (result,) = submit_tasks(
        settings,
        database_url,
        [(connector, task_id)],
        master=master,
        placement=placement,
        conf=conf,
        extra_env=extra_env,
        timeout=timeout,
    )
    return result


def submit_tasks(
    settings: Settings,
    database_url: str,
    tasks: Sequence[tuple[str, int]],
    *,
    master: str | None = None,
    placement: Placement | None = None,
    conf: Mapping[str, str] | None = None,
    extra_env: Mapping[str, str] | None = None,
    timeout: float | None = None,
) -> list[SubmitResult]:
    """One spark-submit running a run of each task in `tasks`, in order, in one Spark application
    (one JVM and SparkSession start-up for all). The first task's start-up is in its `wall_s`."""
    (connector, task_id), *more = tasks
    masker.add_config({"database_url": database_url})  # its password, should any output echo it
    env = {**os.environ, **runner_env(settings, database_url), **(extra_env or {})}
    if master is None and placement is not None:
        master, pool, conf = placement.master, placement.pool, merge_spark_conf(placement.conf, conf or {})
    else:
        master, pool = master or "local[*]", None
    _, secret = split_secret_conf(spark_conf(conf, settings))
    with secret_properties(secret) as secret_args:
        if is_connect_master(master):
            cmd, env = connect_client_command(connector, task_id, master, env, pool=pool, more=more)
        else:
            cmd = spark_submit_command(
                settings, connector, task_id, master=master, conf=conf, pool=pool, more=more, secret_args=secret_args
            )
        log.info("run of %s: %s", ", ".join(f"`{c}-{t}`" for c, t in tasks), mask_text(" ".join(cmd)))
        started = time.monotonic()
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    wall = round(time.monotonic() - started, 3)
    results = [
        json.loads(line[len(RESULT_PREFIX) :]) for line in proc.stdout.splitlines() if line.startswith(RESULT_PREFIX)
    ]
    tail = mask_text("\n".join(proc.stderr.splitlines()[-30:]))
    run_s = [float(r.get("timings", {}).get("run_s", 0.0)) for r in results]
    found = []
    for i, (name, task) in enumerate(tasks):
        result = results[i] if i < len(results) else {}
        code = exit_code(str(result.get("state"))) if result else (proc.returncode or 1)
        if len(tasks) == 1:
            task_wall = wall
        elif i == 0:
            task_wall = round(wall - sum(run_s[1:]), 3)
        else:
            task_wall = run_s[i] if i < len(run_s) else 0.0
        found.append(SubmitResult(name, task, code, task_wall, result, tail))
    return found
