"""Entry point that `spark-submit` runs: one run of a task, inside the Spark driver — or one run
of each of several tasks (`--connector A --task 0 --connector B --task 0`), one after another in
the same SparkSession. With `CONNECT_SPARK_REMOTE=sc://…` in its environment it runs as a plain
Python process instead, a client of that Spark Connect server (a warm pool), a session per run.

Prints one line `CONNECT_RESULT {json}` per run on stdout. Exit codes: 0 all succeeded or
skipped, 1 any failed, else 3 any fenced.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time

_STARTED = time.monotonic()
# Run as a script, this file's directory comes first on sys.path, and its sibling modules would
# shadow the standard library (`secrets.py` hides the `secrets` numpy imports). Packages only.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="connect-runner")
    parser.add_argument("--connector", required=True, action="append", help="repeated: runs in order")
    parser.add_argument("--task", type=int, required=True, action="append", help="one per --connector")
    parser.add_argument("--pool", default=None, help="the Spark pool this run was placed on")
    args = parser.parse_args(argv)
    if len(args.connector) != len(args.task):
        parser.error("give one --task per --connector")
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from connect_core.runtime.security import install_log_masking

    install_log_masking()  # known secrets never reach the task log, whatever a connector logs
    for noisy in ("py4j", "alembic"):
        logging.getLogger(noisy).setLevel(logging.WARNING)

    from pyspark.sql import SparkSession

    from connect_core.runtime.context import Runtime
    from connect_core.runtime.execution.runner import TaskRunner
    from connect_core.runtime.execution.submit import exit_code
    from connect_core.runtime.spark.connect import REMOTE_ENV

    remote = os.environ.get(REMOTE_ENV)
    runtime = Runtime.open(upgrade=False)
    # a Spark Connect pool: a session of its own per run, on the warm server
    spark = (lambda: SparkSession.builder.remote(remote).create()) if remote else SparkSession.builder.getOrCreate
    runner = TaskRunner.for_runtime(runtime, spark, pool=args.pool)
    results = []
    try:
        for connector, task_id in zip(args.connector, args.task, strict=True):
            results.append(runner.run(connector, task_id))
    finally:
        active = SparkSession.getActiveSession()
        if active is not None:
            active.stop()
        runtime.close()
    for result in results:
        result.timings["python_s"] = round(time.monotonic() - _STARTED, 3)
        print("CONNECT_RESULT " + json.dumps(result.to_dict()), flush=True)
    codes = [exit_code(r.state) for r in results]
    return 1 if 1 in codes else max(codes)


if __name__ == "__main__":
    sys.exit(main())
