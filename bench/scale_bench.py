"""Scale: 5,000 connectors x 4 tasks on one metadata database, over 20 Spark pools.

    .venv/bin/python bench/scale_bench.py [--connectors 5000] [--server postgresql://postgres@127.0.0.1:5432/postgres]

Starts `connect serve` (one uvicorn process) on a throw-away database with 20 pools, then creates
connectors one after another over REST (real HTTP, keep-alive), each a 4-task `CounterSource`
(examples/plugins), and records every create's latency. Measured on the way: the metadata
database's size (the `connect` schema's tables with their indexes and TOAST) at 0, 1,000 and
5,000 connectors. At the end (20,000 tasks): REST reads (list, expanded list, one status, a page),
the sensor's check, and the full rebalance transaction after a pool dies and after one joins.
Writes its tables into bench/RESULTS.md (sections "scale: …").
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import text

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _results import write_sections
from airflow_bench import database

ROOT = Path(__file__).resolve().parents[1]
POOLS = 20
TASKS = 4
WINDOW = 100  # creates timed at each mark


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]


def _schema_bytes(engine: Any) -> int:
    with engine.connect() as conn:
        return int(
            conn.execute(
                text(
                    "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
                    "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'connect' AND c.relkind = 'r'"
                )
            ).scalar()
        )


def _timed(fn: Callable[[], Any], times: int) -> list[float]:
    out = []
    for _ in range(times):
        started = time.perf_counter()
        fn()
        out.append((time.perf_counter() - started) * 1000)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--server", default="postgresql://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--connectors", type=int, default=5000)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    marks = [m for m in (0, 1000, args.connectors) if m <= args.connectors]
    total = args.connectors + WINDOW

    from connect_core.runtime.cluster.pools import PoolStore
    from connect_core.runtime.store.db import make_engine

    with database(args.server, "bench_scale") as url, tempfile.TemporaryDirectory() as tmp:
        port = _free_port()
        env = {
            **os.environ,
            "CONNECT_DATABASE_URL": url,
            "CONNECT_HOME": str(Path(tmp) / "home"),
            "CONNECT_PLUGIN_PATH": str(ROOT / "examples" / "plugins"),
            "CONNECT_HEARTBEAT_TIMEOUT": "86400",  # the pools stay alive until the bench kills one
        }
        server = subprocess.Popen(
            [sys.executable, "-m", "connect_core.cli", "serve", "--port", str(port)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        base = f"http://127.0.0.1:{port}"
        engine = make_engine(url)
        client = httpx.Client(base_url=base, timeout=60)
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    client.get("/")
                    break
                except httpx.HTTPError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.2)
            for i in range(POOLS):
                client.put(f"/pools/p{i:02d}", json={"master": f"spark://127.0.0.1:{17000 + i}", "capacity": 1000})
            client.delete("/pools/local")
            client.post("/rebalance", json={"strategy": "sticky"})
            sizes = {}
            latencies: list[float] = []
            started_all = time.monotonic()
            for n in range(total):
                if n in marks:
                    sizes[n] = _schema_bytes(engine)
                body = {
                    "name": f"c{n:05d}",
                    "config": {"connector.class": "CounterSource", "topic": f"t{n:05d}", "tasks.max": TASKS},
                }
                started = time.perf_counter()
                created = client.post("/connectors", json=body)
                latencies.append((time.perf_counter() - started) * 1000)
                if created.status_code != 201:
                    raise RuntimeError(f"create {n}: {created.status_code} {created.text[:500]}")
                if n % 500 == 0:
                    print(f"{n:,} connectors, last create {latencies[-1]:.1f} ms", flush=True)
            fill_s = time.monotonic() - started_all
            creates = {m: latencies[m : m + WINDOW] for m in marks}

            name = f"c{args.connectors // 2:05d}"
            reads = {}
            for label, path in (
                ("GET /connectors/{name}/status (Kafka)", f"/connectors/{name}/status"),
                ("GET /connectors/{name} (Kafka)", f"/connectors/{name}"),
                ("GET /connectors (Kafka, all names)", "/connectors"),
                ("GET /connectors?expand=status (Kafka, all)", "/connectors?expand=status"),
                ("GET /connectors?expand=status&limit=100 (a page)", "/connectors?expand=status&limit=100"),
                ("GET /connectors/list (RocketMQ, all)", "/connectors/list"),
            ):
                path = path.format(name=name)
                first = client.get(path)
                if first.status_code != 200:
                    print(f"{label}: {first.status_code}, skipped", flush=True)
                    continue
                client.post("/connectors/c00000/restart")  # a write first: no snapshot left from before
                reads[label.format(name=name)] = _timed(lambda p=path: client.get(p).raise_for_status(), 30)  # type: ignore[misc]
                print(label, f"{statistics.mean(reads[label.format(name=name)]):.1f} ms", flush=True)

            pools = PoolStore(engine)
            check_ms = _timed(lambda: pools.pending("sticky", 86400.0), 20)
            with engine.begin() as conn:
                conn.execute(
                    text("UPDATE connect.spark_pools SET heartbeat_at = now() - interval '2 days' WHERE name = 'p07'")
                )
            started = time.perf_counter()
            died = pools.rebalance("sticky", 86400.0)
            died_ms = (time.perf_counter() - started) * 1000
            pools.add("p20", "spark://127.0.0.1:17020", capacity=1000)
            started = time.perf_counter()
            joined = pools.rebalance("sticky", 86400.0)
            joined_ms = (time.perf_counter() - started) * 1000
            items = len(pools.assignment())
            with engine.connect() as conn:
                log_bytes = conn.execute(
                    text("SELECT pg_total_relation_size('connect.rebalance_log'), count(*) FROM connect.rebalance_log")
                ).one()
        finally:
            client.close()
            server.terminate()
            server.wait(timeout=30)
            engine.dispose()

    base_p99 = _p99(creates[0])
    rows_create = [
        f"| {m:,} | {statistics.mean(v):.1f} | {statistics.median(v):.1f} | {_p99(v):.1f} | {_p99(v) / base_p99:.2f} |"
        for m, v in creates.items()
    ]
    per_connector = [f"| {m:,} | {sizes[m] / 1e6:.1f} | {(sizes[m] - sizes[0]) / m / 1024:.1f} |" for m in marks if m]
    load = os.getloadavg()[0]
    sections = [
        f"## scale: creating {args.connectors:,} connectors x {TASKS} tasks over REST, {POOLS} pools",
        "",
        f"Reproduce: `.venv/bin/python bench/scale_bench.py --connectors {args.connectors}`. One `connect serve`"
        f" (uvicorn) on a throw-away database with {POOLS} pools (capacity 1,000 each); {total:,} connectors"
        f" (`CounterSource` of examples/plugins, `tasks.max` {TASKS}) created one after another by one"
        f" keep-alive HTTP client, each create validated, stored and its 5 items placed (the incremental"
        f" rebalance) before the 201. Each row: the {WINDOW} creates made when that many connectors existed."
        f" Filling took {fill_s:.0f} s; 1-minute load average at the end {load:.1f}. Goals: p99 < 50 ms at"
        " 5,000 and at most 1.5x the p99 at 0.",
        "",
        "| connectors before | create mean ms | median ms | p99 ms | p99 ÷ p99 at 0 |",
        "|---:|---:|---:|---:|---:|",
        *rows_create,
        "",
        "Metadata: the `connect` schema's tables with indexes and TOAST (`pg_total_relation_size`), and what"
        " each connector added since 0 connectors (its config, 4 task configs, statuses, 5 assignments, its"
        " share of the rebalance log). Goal: the same per connector at 1,000 and 5,000 (±20%).",
        "",
        "| connectors | schema MB | KiB per connector |",
        "|---:|---:|---:|",
        *per_connector,
        "",
        f"## scale: REST reads and rebalances at {total:,} connectors, {items:,} items ({POOLS} pools)",
        "",
        "Same run. Reads: 30 sequential requests each on one keep-alive connection, each series after a"
        " write (a restart), so no cached snapshot from before is served. Rebalances: the transaction of"
        " `PoolStore.rebalance` (sticky) in the bench's process, on the same database. Goal: the full"
        " rebalance < 2 s at 20,000 tasks.",
        "",
        "| operation | mean ms | p99 ms | note |",
        "|---|---:|---:|---|",
        *[f"| {label} | {statistics.mean(v):.1f} | {_p99(v):.1f} | |" for label, v in reads.items()],
        f"| the sensor's check (`pending`) | {statistics.mean(check_ms):.1f} | {_p99(check_ms):.1f} | nothing due |",
        f"| full rebalance: pool p07 dies | {died_ms:.0f} | | {died.moved:,} items moved, reason `{died.reason}` |",
        f"| full rebalance: pool p20 joins | {joined_ms:.0f} | | {joined.moved:,} items moved, reason `{joined.reason}` |",
        "",
        f"The rebalance log after all of it: {log_bytes[1]:,} rows, {log_bytes[0] / 1e6:.1f} MB (each row lists"
        " what it placed or moved, not the whole assignment).",
        "",
    ]
    if args.no_write:
        print("\n".join(sections))
    else:
        write_sections(sections)


if __name__ == "__main__":
    main()
