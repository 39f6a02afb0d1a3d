"""Running a task through a real `spark-submit` of the runner.

Secrets never travel as arguments: `ps` and `/proc/<pid>/cmdline` show every process's
arguments to every user of the machine, and spark-submit's command line ends up in logs. The
metadata database URL goes by the process environment (`runner_env`); Spark settings whose key
looks secret (`spark.hadoop.fs.s3a.secret.key`) go in a properties file only the user can read,
deleted as soon as spark-submit exits (`secret_properties`). The command that is logged is masked.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from connect_core.runtime.cluster.conf_policy import ENFORCED_CONF, SparkConfPolicy, check_master
from connect_core.runtime.cluster.spark_connect import is_connect_master, token_of
from connect_core.runtime.execution.jvm_archive import driver_java_options
from connect_core.runtime.execution.spark_install import BASE_SPARK_CONF, spark_env, spark_submit_path
from connect_core.runtime.security import is_secret_key, mask_text, masker
from connect_core.runtime.security.urls import mask_url_credentials
from connect_core.runtime.settings import Settings
from connect_core.sdk.errors import ConfigError

if TYPE_CHECKING:
    from connect_core.runtime.cluster.rebalancer import Placement
    from connect_core.runtime.context import Runtime

__all__ = [
    "REMOTE_ENV",
    "RESULT_PREFIX",
    "RUNNER_MAIN",
    "SubmitResult",
    "checked_jars",
    "connect_client_command",
    "exit_code",
    "merge_spark_conf",
    "run_as_client",
    "runner_args",
    "runner_env",
    "secret_properties",
    "security_env",
    "spark_conf",
    "spark_env",
    "spark_submit_command",
    "spark_submit_path",
    "split_secret_conf",
    "submit_task",
    "submit_tasks",
]

log = logging.getLogger(__name__)

RESULT_PREFIX = "CONNECT_RESULT "
#: The environment variable that makes the runner a client of a Spark Connect server (its URL).
REMOTE_ENV = "CONNECT_SPARK_REMOTE"
RUNNER_MAIN = Path(__file__).with_name("_runner_main.py")


def exit_code(state: str) -> int:
    """The runner's exit code for a run's state: 0 succeeded or skipped, 3 fenced, 1 anything else."""
    return {"SUCCEEDED": 0, "SKIPPED": 0, "FENCED": 3}.get(state, 1)


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
        return str(self.result.get("state") or ("KILLED" if self.exit_code < 0 or self.exit_code == 137 else "FAILED"))


def spark_conf(conf: Mapping[str, str] | None = None, settings: Settings | None = None) -> dict[str, str]:
    """The Spark settings of a run, in the order they win: every runner's (`BASE_SPARK_CONF`: no UI,
    UTC, a driver bound to loopback), then `conf` (a pool's and its connectors') as far as the pool
    conf policy allows (`conf_policy`, extended by `settings`; refused keys dropped, named in a
    warning), then with `settings` the driver's class-data archive (`jvm_archive`), and last the
    runtime's safety settings (`ENFORCED_CONF`), which nothing overrides.

    `spark.jars` is the one key beyond the policy: connectors name their JDBC drivers with it
    (`Connector.spark_conf`); only local `.jar` paths pass (`checked_jars`)."""
    policy = SparkConfPolicy.from_settings(settings) if settings is not None else SparkConfPolicy()
    archive = driver_java_options(settings) if settings is not None else None
    ours = {**BASE_SPARK_CONF, **({"spark.driver.extraJavaOptions": archive} if archive else {})}
    # what this function added before (a conf built once, then merged again): not the caller's
    given = {str(k): str(v) for k, v in (conf or {}).items() if ours.get(str(k)) != str(v)}
    jars = given.pop("spark.jars", "")
    merged = {**BASE_SPARK_CONF, **policy.sanitized(given, "the run's Spark conf")}
    if jars.strip():
        merged["spark.jars"] = checked_jars(jars)
    if archive:
        merged["spark.driver.extraJavaOptions"] = archive
    return {**merged, **ENFORCED_CONF}


def checked_jars(jars: str) -> str:
    """`spark.jars` of a connector: comma-separated absolute local paths of `.jar` files (no URL Spark
    would download, no blank or control character), else a ConfigError naming what is refused."""
    entries = [j.strip() for j in jars.split(",") if j.strip()]
    bad = [
        j
        for j in entries
        if not j.startswith(("/", "file:/", "local:/"))
        or not j.endswith(".jar")
        or any(c.isspace() or not c.isprintable() for c in j)
        or len(j) > 1024
    ]
    if bad:
        shown = ", ".join(f"`{mask_url_credentials(b[:200])}`" for b in bad)
        raise ConfigError(
            f"`spark.jars` may list only absolute local paths of .jar files, not {shown} "
            "(a connector's `connection.jar`: put the driver jar on the machine and name its path)"
        )
    return ",".join(entries)


def merge_spark_conf(*confs: Mapping[str, str]) -> dict[str, str]:
    """Later settings win, except `spark.jars`, whose comma-separated lists are joined."""
    merged: dict[str, str] = {}
    for conf in confs:
        for key, value in conf.items():
            if key == "spark.jars" and merged.get(key):
                jars = [*merged[key].split(","), *(j for j in value.split(",") if j not in merged[key].split(","))]
                merged[key] = ",".join(j for j in jars if j)
            else:
                merged[key] = value
    return merged


def split_secret_conf(conf: Mapping[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """(settings that may be arguments, settings whose key looks secret). The secret ones' values
    become known secrets of this process's masker, so no log line shows them either."""
    public: dict[str, str] = {}
    secret: dict[str, str] = {}
    for key, value in conf.items():
        (secret if is_secret_key(key) else public)[key] = str(value)
    for value in secret.values():
        masker.add(value)
    return public, secret


@contextlib.contextmanager
def secret_properties(entries: Mapping[str, str]) -> Iterator[list[str]]:
    """spark-submit arguments that load `entries` from a file only this user can read (a fresh 0700
    directory, a 0600 file), deleted when the block ends; no arguments when there is nothing secret.

    `--load-spark-defaults` keeps `spark-defaults.conf` in effect, which `--properties-file` alone
    would replace. spark-submit reads the file at start-up; it must exist until the process exits."""
    if not entries:
        yield []
        return
    folder = tempfile.mkdtemp(prefix="connect-submit-")  # mode 0700
    try:
        path = os.path.join(folder, "secret.properties")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.writelines(f"{_property(key)}={_property(value)}\n" for key, value in entries.items())
        yield ["--properties-file", path, "--load-spark-defaults"]
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _property(text: str) -> str:
    """`text` escaped for a Java properties file, which Spark reads as UTF-8."""
    return text.translate(_PROPERTY_ESCAPES)


_PROPERTY_ESCAPES = str.maketrans(
    {**{c: "\\" + c for c in "\\=:#! "}, "\n": "\\n", "\r": "\\r", "\t": "\\t", "\f": "\\f"}
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
