"""What the runtime asks of a SparkSession that a classic and a Spark Connect session answer differently.

A run's session is classic (the runner is the Spark driver: `sparkContext`, the JVM) or a Spark
Connect client of a warm pool (`sc://host:port`: no `sparkContext`, no JVM in this process; see
`connect_core.sdk.is_connect`). The runner prepares a Connect session as spark-submit prepares a
classic one (`BASE_SPARK_CONF`'s session settings) and releases it when the run ends.
"""

from __future__ import annotations

import logging
import os
import re
from typing import TYPE_CHECKING, Any

from connect_core.runtime.spark.install import BASE_SPARK_CONF
from connect_core.sdk import is_connect
from connect_core.sdk.errors import FatalError, RetriableError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "SESSION_CONF",
    "default_parallelism",
    "explain_failure",
    "prepare_session",
    "release_session",
    "where_it_runs",
]

log = logging.getLogger(__name__)

#: The settings of every runner (`BASE_SPARK_CONF`) that a Spark Connect client sets on its own
#: session: the SQL a run sees is confined (no file read by its path) and in UTC as on a classic run,
#: whatever the pool's server defaults to. (Its other settings are the server's, fixed at its start.)
SESSION_CONF = {
    key: BASE_SPARK_CONF[key]
    for key in ("spark.sql.session.timeZone", "spark.sql.runSQLOnFiles", "spark.sql.variable.substitute")
}

#: pyspark's mark of a process that is a Spark Connect client (`pyspark.sql.utils.is_remote`).
_CONNECT_MODE = "SPARK_CONNECT_MODE_ENABLED"

#: How a physical plan prints a `range`: `Range (0, 2, step=1, splits=8)`.
_SPLITS = re.compile(r"\bsplits=(\d+)")


def prepare_session(spark: SparkSession) -> None:
    """Give a run's session the runners' session settings: a classic one has them from spark-submit
    already (set again, whatever a conf slipped in: they are the runtime's safety settings)."""
    if not is_connect(spark):
        for key, value in SESSION_CONF.items():
            spark.conf.set(key, value)
        return
    stopped: Any = spark
    if stopped.is_stopped:
        raise FatalError(
            "the run's Spark Connect session is stopped: a Connect session is one run's own (the runner "
            "stops it when the run ends), so the runner's session factory makes a new one per run "
            "(`SparkSession.builder.remote(url).create()`)"
        )
    # pyspark builds Connect columns (`functions.col`, …) only in a process marked as a Connect client;
    # `SparkSession.builder.remote(url)` marks it, a session made another way may not have.
    os.environ.setdefault(_CONNECT_MODE, "1")
    _fail_fast(spark)
    for key, value in SESSION_CONF.items():
        spark.conf.set(key, value)


#: How long a Connect call retries a server that does not answer: pyspark's default is 10 minutes,
#: so a run on a dead pool would hang; here it fails in seconds (its task retries, or moves).
RETRIES, MAX_BACKOFF_MS = 5, 2_000


def _fail_fast(spark: SparkSession) -> None:
    from pyspark.sql.connect.client.retries import DefaultPolicy

    client: Any = spark.client
    client.set_retry_policies(
        [DefaultPolicy(max_retries=RETRIES, max_backoff=MAX_BACKOFF_MS, max_server_retry_delay=MAX_BACKOFF_MS)]
    )


def explain_failure(exc: Exception, spark: SparkSession | None = None) -> Exception:
    """A Spark Connect client's gRPC failure as what it means for the run: a server that does not
    answer is retriable (it may come back, or the rebalance sensor moves the task), a refused token
    is fatal; anything else as it is. The message names the server's address (of `spark`, the
    run's session), never its token."""
    from pyspark.errors.exceptions.connect import SparkConnectGrpcException

    if not isinstance(exc, SparkConnectGrpcException):
        return exc
    status, text = str(exc.getGrpcStatusCode() or ""), str(exc)[:5000]
    server = "the Spark Connect server"
    if spark is not None and is_connect(spark):
        server += f" at {_endpoint(spark)}"
    if "UNAVAILABLE" in status or "UNAVAILABLE" in text or "failed to connect" in text:
        return RetriableError(f"{server} does not answer (is the pool's server running?)")
    if "UNAUTHENTICATED" in status or "PERMISSION_DENIED" in status or "UNAUTHENTICATED" in text:
        return FatalError(f"{server} refused the pool's token")
    return exc


def _endpoint(spark: SparkSession) -> str:
    """`host:port` of a Spark Connect session's server."""
    client: Any = spark.client
    return str(getattr(getattr(client, "_builder", None), "endpoint", client.host))


def release_session(spark: SparkSession) -> None:
    """End a Spark Connect session: the server drops its temp views, settings and cached data. A
    classic session is the driver's, left as it is. Never raises: the run's result stands."""
    if not is_connect(spark):
        return
    try:
        spark.stop()
    except Exception:  # the server is gone: so is the session
        log.warning("could not release the Spark Connect session", exc_info=True)


def default_parallelism(spark: SparkSession) -> int:
    """The cores Spark spreads work over (`SparkContext.defaultParallelism`); on Spark Connect, the
    splits the server plans for a `range` (the same number, read off the plan, without a job)."""
    if not is_connect(spark):
        return int(spark.sparkContext.defaultParallelism)
    plan: Any = spark.range(2)
    found = _SPLITS.search(plan._explain_string(mode="simple"))
    return int(found.group(1)) if found else 1


def where_it_runs(spark: SparkSession) -> dict[str, str]:
    """For a run's stats: the Spark master, and on Spark Connect the server's address (no token)."""
    if not is_connect(spark):
        return {"spark_master": str(spark.sparkContext.master)}
    return {"spark_master": str(spark.conf.get("spark.master")), "spark_remote": f"sc://{_endpoint(spark)}"}
