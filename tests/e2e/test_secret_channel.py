"""Secrets reach spark-submit neither as arguments nor in a log.

The metadata database URL carries a distinctive password (the trust-auth test server ignores it),
and the local Spark pool a secret-keyed Spark setting. While `connect run` and a real Airflow task
(`airflow dags test`) run, the command line of every process in their tree is read from
/proc/<pid>/cmdline; afterwards their output and Airflow's task logs are read too. Neither secret
may appear anywhere — and the secret setting must still reach Spark.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from connect_core.runtime.settings import Settings
from connect_core.runtime.spark.conf import secret_properties
from connect_core.runtime.spark.install import spark_env, spark_submit_path
from tests.conftest import file_pair
from tests.e2e.secrets_watch import (
    S3_SECRET,
    SECRET_KEY,
    assert_no_secret,
    run_watched,
    secret_runtime,
    spark_processes,
    with_password,
)

pytestmark = pytest.mark.spark_submit


def test_connect_run_keeps_secrets_out_of_argv_and_output(
    settings: Settings, database_url: str, tmp_path: Path
) -> None:
    url = with_password(database_url)
    with secret_runtime(settings, url) as rt:
        source, _ = file_pair(rt, tmp_path)
    source.write_text("one\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONNECT_")}
    env.update(CONNECT_DATABASE_URL=url, CONNECT_HOME=str(tmp_path / "home"), SPARK_LOCAL_IP="127.0.0.1")
    cmd = [sys.executable, "-m", "connect_core.cli", "run", "fileSourceConnector", "--output", "json"]
    done, cmdlines = run_watched(cmd, env, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert '"SUCCEEDED"' in done.stdout
    spark = spark_processes(cmdlines)
    assert spark, f"never saw the spark-submit run: {cmdlines}"
    assert any("--properties-file" in c for c in spark), "the secret Spark setting went by file"
    for cmdline in cmdlines:
        assert_no_secret("a command line", cmdline)
    assert_no_secret("the output", done.stdout + done.stderr)


def test_secret_properties_reach_spark_and_the_file_is_gone(tmp_path: Path) -> None:
    """The 0600 file's settings are in the driver's SparkConf; spark-defaults.conf still loads; the file is
    deleted after the submit."""
    conf_dir = tmp_path / "conf"
    conf_dir.mkdir()
    (conf_dir / "spark-defaults.conf").write_text("spark.connect.test.default from-defaults\n")
    app = tmp_path / "app.py"
    app.write_text(
        "from pyspark.sql import SparkSession\n"
        "conf = SparkSession.builder.getOrCreate().sparkContext.getConf()\n"
        f"print('SECRET', conf.get('{SECRET_KEY}') == {S3_SECRET + ' x=y: #z'!r})\n"
        "print('DEFAULT', conf.get('spark.connect.test.default'))\n"
    )
    settings = Settings(home=tmp_path / "home")
    env = {**os.environ, **spark_env(settings), "SPARK_CONF_DIR": str(conf_dir)}
    with secret_properties({SECRET_KEY: S3_SECRET + " x=y: #z"}) as args:
        path = Path(args[1])
        assert path.stat().st_mode & 0o777 == 0o600 and path.parent.stat().st_mode & 0o777 == 0o700
        cmd = [spark_submit_path(settings), "--master", "local[1]", "--conf", "spark.ui.enabled=false", *args, str(app)]
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "SECRET True" in done.stdout and "DEFAULT from-defaults" in done.stdout
    assert not path.exists() and not path.parent.exists()
