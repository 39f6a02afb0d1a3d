"""Where Spark is and what every spark-submit of ours starts with: the launcher's path, the child's
environment and the Spark settings every run shares. Used by `submit` and by `jvm_archive` (whose
training run is a spark-submit too), so neither imports the other for them."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from connect_core.runtime.settings import Settings

__all__ = ["BASE_SPARK_CONF", "REDACTION_REGEX", "spark_env", "spark_submit_path"]

#: Spark's own redaction (UI, event log, `--verbose`) by key: its default pattern, plus our database URL.
REDACTION_REGEX = r"(?i)secret|password|token|access[.]?key|database[._]?url"

#: Every runner: no UI, UTC, and a driver bound to loopback unless a pool's conf overrides it.
BASE_SPARK_CONF: dict[str, str] = {
    "spark.ui.enabled": "false",
    "spark.log.level": "WARN",
    "spark.sql.session.timeZone": "UTC",
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.redaction.regex": REDACTION_REGEX,
    # No SQL reads a file by its path (``SELECT * FROM parquet.`/etc` ``): a SQL transform's query
    # may read the batch, nothing else.
    "spark.sql.runSQLOnFiles": "false",
    # Spark fills `${env:X}`, `${system:X}` and `${conf}` into SQL text before it parses it, strings
    # and quoted names included: a query would read the worker's environment, or shift its quotes.
    "spark.sql.variable.substitute": "false",
}


def spark_submit_path(settings: Settings) -> str:
    if settings.spark_submit:
        return settings.spark_submit
    import pyspark

    return str(Path(pyspark.__file__).parent / "bin" / "spark-submit")


def spark_env(settings: Settings) -> dict[str, str]:
    """What any spark-submit of ours needs: this Python in the driver and the workers, loopback,
    and pyspark's own launchers first on PATH (spark-submit is found on the child's PATH)."""
    return {
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": os.environ.get("SPARK_LOCAL_IP", "127.0.0.1"),
        "PATH": f"{Path(spark_submit_path(settings)).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
