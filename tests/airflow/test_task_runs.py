"""A real Airflow task (`airflow dags test`) of a connector: secrets, errors and retries.

* Secrets: the metadata database URL's password and a secret Spark setting appear in no command line
  of the task's process tree (polled while it runs) and in no task log, although no `connect_spark`
  connection exists (the Spark provider then defaults to YARN and used to turn the environment
  into `spark.yarn.appMasterEnv.*` arguments).
* Errors: a failed run fails the task with the run's root cause (class and message), logged at ERROR.
* Retries: a `config` error is not retried; an `unexpected` one is.
* A cause the pre-check finds that no run can get past (a refused login) fails the task at once,
  before Spark, recorded as the task's failed run.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from sqlalchemy import text

from connect_core.runtime.context import Runtime
from connect_core.runtime.settings import Settings
from tests.airflow.conftest import AirflowCli
from tests.conftest import file_pair
from tests.connectors.jdbc_helpers import Database, mariadb  # noqa: F401  (fixture)
from tests.e2e.secrets_watch import (
    assert_no_secret,
    run_watched,
    secret_runtime,
    spark_processes,
    with_password,
)

pytestmark = pytest.mark.spark_submit


def test_an_airflow_task_keeps_secrets_out_of_argv_and_its_log(
    airflow: AirflowCli, settings: Settings, database_url: str, tmp_path: Path
) -> None:
    """No `connect_spark` connection: the provider's YARN default must not turn env into arguments."""
    url = with_password(database_url)
    with secret_runtime(settings, url) as rt:
        source, _ = file_pair(rt, tmp_path)
        source.write_text("one\ntwo\n")
        env = {**airflow.env, "CONNECT_DATABASE_URL": url}
        airflow_bin = str(Path(sys.executable).with_name("airflow"))
        done, cmdlines = run_watched([airflow_bin, "dags", "test", "connect__fileSourceConnector"], env, tmp_path)
        output = done.stdout + done.stderr
        assert done.returncode == 0, output[-4000:]
        assert "Spark-Submit cmd" in output and "appMasterEnv" not in output
        assert "defaulting to yarn" not in output  # the provider's line, wrong: the master is the pool's
        (took,) = [line for line in output.splitlines() if "task `fileSourceConnector-0` took" in line]
        assert "before the launch" in took and "spark-submit and the JVM" in took and "work" in took
        assert spark_processes(cmdlines), f"never saw the spark-submit run: {cmdlines}"
        for cmdline in cmdlines:
            assert_no_secret("a command line", cmdline)
        assert_no_secret("the task's output", output)
        logs = Path(env["AIRFLOW_HOME"]) / "logs"
        for log_file in logs.rglob("*") if logs.exists() else []:
            if log_file.is_file():
                assert_no_secret(str(log_file), log_file.read_text(errors="replace"))
        assert rt.connectors.last_runs("fileSourceConnector")[0]["state"] == "SUCCEEDED"


def _break_task_config(runtime: Runtime, name: str, **changes: object) -> None:
    """Change what the task will run with, behind validation's back (as a broken deployment would)."""
    with runtime.engine.begin() as conn:
        conn.execute(
            text("UPDATE connect.task_configs SET config = config || CAST(:changes AS jsonb) WHERE connector = :name"),
            {"changes": json.dumps(changes), "name": name},
        )


def _source(runtime: Runtime, tmp_path: Path, name: str, **broken: object) -> None:
    (tmp_path / "in.txt").write_text("a line\n")
    runtime.create_connector(
        name,
        {
            "connector.class": "FileSourceConnector",
            "filename": str(tmp_path / "in.txt"),
            "topic": "t",
            "retries": 2,
            "retry.delay.seconds": 0,
            "precheck": False,  # let the runner meet the error, not the pre-check
        },
    )
    _break_task_config(runtime, name, **broken)


def test_a_config_error_fails_the_task_with_its_cause_and_is_not_retried(
    airflow: AirflowCli, runtime: Runtime, tmp_path: Path
) -> None:
    _source(runtime, tmp_path, "bad-config", filename="${env:CONNECT_TEST_NEVER_SET}")
    done = airflow("dags", "test", "connect__bad-config", check=False)
    output = done.stdout + done.stderr
    runs = runtime.connectors.last_runs("bad-config")
    assert [(r["state"], r["stats"]["error_kind"]) for r in runs] == [("FAILED", "config")]  # one try only
    (heading,) = [line for line in output.splitlines() if "failed (config error)" in line and "[error" in line]
    assert "ConfigError: config `filename`" in heading and "spark-submit" not in heading
    assert "AirflowFailException: run" in output and "up_for_retry" not in output.lower()
    (task,) = runtime.connectors.status("bad-config").tasks
    assert task.state == "FAILED" and "Traceback" in (task.trace or "") and "ConfigError" in (task.trace or "")


def test_an_unexpected_error_is_retried(airflow: AirflowCli, runtime: Runtime, tmp_path: Path) -> None:
    _source(runtime, tmp_path, "bad-file", **{"batch.max.bytes": "lots"})  # int("lots") in the task
    done = airflow("dags", "test", "connect__bad-file", check=False)
    runs = runtime.connectors.last_runs("bad-file")
    assert [(r["state"], r["stats"]["error_kind"]) for r in runs] == [("FAILED", "unexpected")] * 3  # 1 + 2 retries
    assert "failed (unexpected error): ValueError: invalid literal for int()" in done.stdout + done.stderr


def test_a_refused_login_found_by_the_precheck_fails_the_task_before_spark(
    airflow: AirflowCli,
    runtime: Runtime,
    mariadb: Database,  # noqa: F811
) -> None:
    mariadb.execute("CREATE TABLE orders (id INT PRIMARY KEY, note TEXT)", "INSERT INTO orders VALUES (1, 'a')")
    name = "wrong-user"
    runtime.create_connector(
        name,
        mariadb.source_config(
            **{"table.whitelist": "orders", "mode": "incrementing", "incrementing.column.name": "id"},
            **{"topic.prefix": "shop-", "retries": 2, "retry.delay.seconds": 0},
        ),
    )
    # The user is changed behind validation's back (as a rotated password would break it).
    (task_config,) = runtime.connectors.get(name).tasks
    url = task_config["connection.url"].replace("user=root", "user=nobody_here")
    _break_task_config(runtime, name, **{"connection.url": url})
    done = airflow("dags", "test", f"connect__{name}", check=False)
    output = done.stdout + done.stderr
    assert done.returncode != 0
    assert "Spark-Submit cmd" not in output and "SparkSession" not in output  # Spark never started
    assert "refused the login" in output and "AirflowFailException" in output
    assert "up_for_retry" not in output.lower()  # no retry can fix a login
    runs = runtime.connectors.last_runs(name)
    assert [(r["state"], r["stats"]["error_kind"]) for r in runs] == [("FAILED", "fatal")]
    (task,) = runtime.connectors.status(name).tasks
    assert task.state == "FAILED" and "refused the login" in (task.trace or "")
