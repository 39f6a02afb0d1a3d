"""The Python daemon of a warm pool's server (`spark.python.daemon.module`): it imports what a run's
Python workers use, then runs pyspark's own daemon, whose forked workers start with those modules
loaded. Spark stops Python workers idle for a minute; forked from this daemon, the next ones start
warm all the same. Nothing here may write to stdout: the daemon tells Spark its port there.
"""

from __future__ import annotations

import importlib
import sys

#: What a run's Python workers import (pyarrow's Parquet, the topic store, the JDBC connectors).
MODULES = (
    "pyarrow.parquet",
    "psycopg2",
    "connect_core.runtime.topics.segments",
    "connect_core.connectors.jdbc.source",
    "connect_core.connectors.jdbc.sink",
    "connect_core.connectors.jdbc.targets.postgres",
    "connect_core.connectors.jdbc.targets.mariadb",
)


def _preload() -> None:
    for name in MODULES:
        try:
            importlib.import_module(name)
        except Exception as exc:  # a worker imports it again, and fails with the cause, if it needs it
            print(f"connect warm daemon: could not preload {name}: {exc}", file=sys.stderr)


if __name__ == "__main__":
    _preload()
    from pyspark import daemon

    daemon.manager()
