"""A class-data-sharing archive for the Spark driver's JVM: a shorter start-up for every spark-submit.

Starting a Spark driver, the JVM loads, parses and verifies some 10,000 classes, and the first job
loads thousands more. An AppCDS archive (JDK 13+ dynamic archive) holds them pre-parsed, mapped into
memory at start. Measured here (JDK 17, Spark 4, two cores): SparkSession 7.5 → 4.3 s, first job
3.5 → 1.7 s.

`connect spark-archive` (run by `scripts/bootstrap.sh` and the Docker image's build) makes the
archive once per JVM and pyspark install: a short training spark-submit
(`_jvm_training.py`) exits with `-XX:ArchiveClassesAtExit`. Every spark-submit of a runner then
starts its driver with `-XX:SharedArchiveFile` when the archive exists (`spark_conf`). The JVM
checks the archive against its own version and class path and runs without it when they differ
(a warning on stderr: still correct, only slower). A *truncated* archive crashes the JVM instead,
so the training run writes to a temporary name, renamed into place only after it exited cleanly.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import time
from pathlib import Path

from connect_core.runtime.settings import Settings
from connect_core.runtime.spark.install import BASE_SPARK_CONF, spark_env, spark_submit_path

__all__ = ["archive_path", "build_archive", "driver_java_options", "spark_java"]

TRAINING = Path(__file__).with_name("_jvm_training.py")
#: JVM log lines go to stderr (the driver's stdout carries CONNECT_RESULT lines), warnings only.
_LOG = "-Xlog:disable -Xlog:all=warning:stderr"


def spark_java() -> str | None:
    """The java that spark-submit launches: `$JAVA_HOME/bin/java`, else the one on PATH (None: no
    `java` on PATH). The one rule: `connect run`'s Java check asks it too."""
    home = os.environ.get("JAVA_HOME")
    return str(Path(home) / "bin" / "java") if home else shutil.which("java")


def _java() -> str:
    found = spark_java()
    return os.path.realpath(found) if found else "java"


def archive_path(settings: Settings) -> Path:
    """Where the archive of this JVM and this Spark install lives (it is valid for no other)."""
    import pyspark

    spark = os.path.realpath(spark_submit_path(settings))
    key = hashlib.sha256(f"{_java()}\0{spark}".encode()).hexdigest()[:12]
    return settings.jvm_archive_dir / f"spark-{pyspark.__version__}-{key}.jsa"


def driver_java_options(settings: Settings) -> str | None:
    """The driver JVM options that use the archive, None when there is none."""
    path = archive_path(settings)
    return f"-XX:SharedArchiveFile={path} {_LOG}" if path.is_file() else None


def build_archive(settings: Settings, *, force: bool = False, timeout: float = 600) -> tuple[Path, float | None]:
    """Make the archive by a training spark-submit; (path, seconds taken), None seconds when it was
    already there. Raises RuntimeError with the run's output when the training run fails."""
    path = archive_path(settings)
    if path.is_file() and not force:
        return path, None
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    conf = {**BASE_SPARK_CONF, "spark.driver.extraJavaOptions": f"-XX:ArchiveClassesAtExit={temp} {_LOG}"}
    cmd = [spark_submit_path(settings), "--master", "local[2]", "--name", "connect:jvm-archive"]
    for key, value in conf.items():
        cmd += ["--conf", f"{key}={value}"]
    env = {**os.environ, **spark_env(settings)}
    started = time.monotonic()
    try:
        proc = subprocess.run(
            [*cmd, str(TRAINING)], env=env, capture_output=True, text=True, timeout=timeout, check=False
        )
        if proc.returncode != 0 or not temp.is_file():
            tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-20:])
            raise RuntimeError(f"the training spark-submit exited with {proc.returncode}:\n{tail}")
        os.replace(temp, path)
    finally:
        temp.unlink(missing_ok=True)
    return path, time.monotonic() - started
