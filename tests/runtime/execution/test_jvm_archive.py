"""The Spark driver JVM's class-data archive: built by a real training spark-submit, used by real ones."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from connect_core.runtime.settings import Settings
from connect_core.runtime.spark.conf import spark_conf
from connect_core.runtime.spark.install import spark_submit_path
from connect_core.runtime.spark.jvm_archive import archive_path, build_archive, driver_java_options


def test_a_built_archive_is_the_one_spark_submit_starts_from(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path / "home", jvm_archive_dir=tmp_path / "jvm")
    assert driver_java_options(settings) is None  # none yet: spark-submits start as before
    assert "spark.driver.extraJavaOptions" not in spark_conf({}, settings)

    path, seconds = build_archive(settings)
    assert seconds is not None and path == archive_path(settings)
    assert [p.name for p in (tmp_path / "jvm").iterdir()] == [path.name]  # no temporary file left
    assert build_archive(settings) == (path, None)  # built once

    # The runner's conf starts the driver from it; a user's own JVM options never reach the JVM
    # (`-XX:OnOutOfMemoryError=<cmd>` would run a command): they are dropped, the archive's stay.
    conf = spark_conf({"spark.driver.extraJavaOptions": "-Dmine=1"}, settings)
    assert conf["spark.driver.extraJavaOptions"].startswith(f"-XX:SharedArchiveFile={path} ")
    assert "-Dmine" not in conf["spark.driver.extraJavaOptions"]

    # -Xshare:on makes a JVM that cannot map the archive (another JVM, another class path) fail.
    script = tmp_path / "job.py"
    script.write_text(
        "from pyspark.sql import SparkSession\n"
        "spark = SparkSession.builder.getOrCreate()\n"
        "print('COUNT', spark.range(10).count())\n"
        "spark.stop()\n"
    )
    options = f"-Xshare:on {conf['spark.driver.extraJavaOptions']}"
    cmd = [spark_submit_path(settings), "--master", "local[1]"]
    for key, value in {**spark_conf(), "spark.driver.extraJavaOptions": options}.items():
        cmd += ["--conf", f"{key}={value}"]
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    proc = subprocess.run([*cmd, str(script)], env=env, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "COUNT 10" in proc.stdout


def test_a_failed_training_run_leaves_no_archive(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path / "home", jvm_archive_dir=tmp_path / "jvm", spark_submit="/bin/false")
    with pytest.raises(RuntimeError, match="training spark-submit exited with 1"):
        build_archive(settings)
    assert list((tmp_path / "jvm").iterdir()) == []
    assert driver_java_options(settings) is None
