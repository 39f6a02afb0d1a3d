"""This product in the JDBC benchmark: JdbcSourceConnector → topic → JdbcSinkConnector.

Registering the two connectors is set-up (not timed, like creating the other tools' target
table). A sync is one `connect run src sink`: the source task, then the sink task, in one real
spark-submit on `local[*]` (tasks on one pool share a Spark application, as a Kafka Connect
worker hosts many tasks); its wall time, CLI and JVM start-up included, is the result.
The metadata store is a database `bench_connect_meta` on the bench's PostgreSQL; topics live
in a temporary directory.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import _jdbc_data as data


def _meta_db(kind: str, variant: str = "") -> str:
    return f"bench_connect_meta_{kind}{variant}"


def _home(kind: str, variant: str = "") -> Path:
    return Path(tempfile.gettempdir()) / f"connect-jdbc-bench-{kind}{variant}"


def _env(kind: str, variant: str = "") -> dict[str, str]:
    return {
        **os.environ,
        "CONNECT_DATABASE_URL": data.pg_url(_meta_db(kind, variant)),
        "CONNECT_HOME": str(_home(kind, variant)),
        "SPARK_LOCAL_IP": "127.0.0.1",
    }


def _cli(kind: str, *args: str, variant: str = "") -> str:
    proc = subprocess.run(
        [sys.executable, "-m", "connect_core.cli", *args],
        env=_env(kind, variant),
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"connect {' '.join(args)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc.stdout


def names(kind: str, variant: str = "", *, own_names: bool = False) -> tuple[str, str]:
    """(source, sink) connector names. Sinks of different metadata stores that share a name also
    share their offsets in the target's `connect_sink_offsets`: benches that sync variants side by
    side (not one after the other) give each variant names of its own."""
    suffix = variant if own_names else ""
    return f"src_{kind}{suffix}", f"sink_{kind}{suffix}"


def _jdbc_url(kind: str) -> str:
    server = data.PG_SERVER if kind == "pg" else data.MARIADB_SERVER
    scheme = "postgresql" if kind == "pg" else "mariadb"
    return f"jdbc:{scheme}://{server.host}:{server.port}/{data.SOURCE_DB}"


def setup(
    kind: str,
    target_table: str,
    *,
    variant: str = "",
    source_extra: dict[str, object] | None = None,
    sink_extra: dict[str, object] | None = None,
    own_names: bool = False,
) -> None:
    """A fresh metadata store and topic directory; the source and sink connectors of `kind` (with
    `*_extra` settings, e.g. transforms, in a metadata store of their own per `variant`; with
    `own_names`, named after the variant too, see `names`)."""
    source_name, sink_name = names(kind, variant, own_names=own_names)
    with data.pg("postgres") as conn, conn.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS {_meta_db(kind, variant)} WITH (FORCE)")
        cur.execute(f"CREATE DATABASE {_meta_db(kind, variant)}")
    with data.pg(data.TARGET_DB) as conn, conn.cursor() as cur:  # the sink's offsets kept in the target
        cur.execute(
            "CREATE TABLE IF NOT EXISTS connect_sink_offsets (connector text, topic text, partition int, "
            "next_offset bigint NOT NULL, PRIMARY KEY (connector, topic, partition))"
        )
        cur.execute("DELETE FROM connect_sink_offsets WHERE connector = %s", (sink_name,))
    home = _home(kind, variant)
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    server = data.PG_SERVER if kind == "pg" else data.MARIADB_SERVER
    source = {
        "connector.class": "JdbcSourceConnector",
        "connection.url": _jdbc_url(kind),
        "connection.user": server.user,
        "connection.password": server.password,
        "mode": "timestamp+incrementing",
        "incrementing.column.name": "id",
        "timestamp.column.name": "updated_at",
        "table.whitelist": data.TABLE,
        "topic.prefix": f"{kind}_",
        "snapshot.partitions": 4,
        **(source_extra or {}),
    }
    sink = {
        "connector.class": "JdbcSinkConnector",
        "connection.url": f"jdbc:postgresql://{data.PG_SERVER.host}:{data.PG_SERVER.port}/{data.TARGET_DB}",
        "connection.user": data.PG_SERVER.user,
        "connection.password": data.PG_SERVER.password,
        "topics": f"{kind}_{data.TABLE}",
        "table.name.format": target_table,
        "insert.mode": "upsert",
        "pk.mode": "record_value",
        "pk.fields": "id",
        **(sink_extra or {}),
    }
    for name, config in ((source_name, source), (sink_name, sink)):
        path = home / f"{name}.json"
        path.write_text(json.dumps(config))
        _cli(kind, "create", name, "--config", str(path), variant=variant)


def sync(kind: str, variant: str = "", *, own_names: bool = False) -> float:
    """`connect run src sink`: one source run, then one sink run, in one spark-submit (both tasks
    are on the local pool, so they share a Spark application); wall seconds of the command."""
    return sync_runs(kind, variant, own_names=own_names)[0]


def sync_runs(kind: str, variant: str = "", *, own_names: bool = False) -> tuple[float, list[dict[str, Any]]]:
    """`sync`, also returning the runs `connect run --output json` printed (timings, rows, pool, wall_s)."""
    started = time.perf_counter()
    out = _cli(kind, "run", *names(kind, variant, own_names=own_names), "--output", "json", variant=variant)
    wall = time.perf_counter() - started
    runs = json.loads(out)
    for run in runs:
        timings = " ".join(f"{k}={v}" for k, v in run.get("timings", {}).items())
        counts = f" errors={run['counts']}" if run.get("counts") else ""
        where = f" pool={run['pool']} wall_s={run.get('wall_s', 0):.2f}," if run.get("pool") else ""
        print(f"    {run['connector']}:{where} {run.get('rows')} rows, {timings}{counts}", flush=True)
        if run.get("state") != "SUCCEEDED":
            raise RuntimeError(f"{run['connector']} {run.get('state')}: {run.get('message')}")
    return wall, runs
