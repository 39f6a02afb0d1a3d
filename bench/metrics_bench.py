"""One Prometheus scrape of `GET /metrics` at 1,000 connectors: goal under 200 ms.

    .venv/bin/python bench/metrics_bench.py [--connectors 1000] [--runs 10] [--scrapes 50]

On a throw-away database (the machine's Postgres, CONNECT_BENCH_PG_URL), half the connectors
are file sources writing a topic each and half file sinks reading one, each with one task,
`--runs` finished runs per task (stats with rows, times and, on every tenth run, error counts),
the topics' partitions and the sinks' committed offsets (so every sink has a lag), assigned over
4 pools. All of it is bulk-inserted with set-based SQL (`generate_series`), as the store would
hold it after those runs: the scrape, not the setup, is what is measured.

Then one `connect serve` process (uvicorn, a real HTTP server on loopback, the app as served
in production: auth, security edge) is scraped `--scrapes` times in a row by an HTTP client in
this process, after 3 unrecorded warm-up scrapes. Writes bench/RESULTS.md (section
"metrics scrape").
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import text

from connect_core.rest.metrics import encode_text, read_collector
from connect_core.runtime.context import Runtime
from connect_core.runtime.settings import Settings

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _results import write_sections
from _serve import start_http
from airflow_bench import database

SERVER = os.environ.get("CONNECT_BENCH_PG_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
POOLS = 4

#: Connector i (0-based, zero-padded name c0000…): even i a source writing topic t{i}, odd i a
#: sink reading topic t{i-1}. Each statement covers every connector at once.
SETUP = [
    """
    INSERT INTO connect.spark_pools (name, master, capacity)
    SELECT 'pool' || p, 'yarn', 1000 FROM generate_series(1, :pools) p
    ON CONFLICT (name) DO NOTHING
    """,
    """
    INSERT INTO connect.connectors (name, connector_class, type, config)
    SELECT 'c' || lpad(i::text, 4, '0'),
           CASE WHEN i % 2 = 0 THEN 'FileSourceConnector' ELSE 'FileSinkConnector' END,
           CASE WHEN i % 2 = 0 THEN 'source' ELSE 'sink' END,
           CASE WHEN i % 2 = 0
                THEN jsonb_build_object('connector.class', 'FileSourceConnector', 'filename',
                                        '/data/in' || i || '.txt', 'topic', 't' || i)
                ELSE jsonb_build_object('connector.class', 'FileSinkConnector', 'filename',
                                        '/data/out' || i || '.txt', 'topics', 't' || (i - 1))
           END
    FROM generate_series(0, :connectors - 1) i
    """,
    """
    INSERT INTO connect.connector_status (connector, state)
    SELECT name, 'RUNNING' FROM connect.connectors
    """,
    """
    INSERT INTO connect.task_configs (connector, task_id, config, config_version, generation)
    SELECT name, 0, config, 1, :runs FROM connect.connectors
    """,
    """
    INSERT INTO connect.task_runs (connector, task_id, generation, state, worker_id, started_at, heartbeat_at,
                                   lease_expires_at, finished_at, stats, pool)
    SELECT c.name, 0, r, CASE WHEN r % 10 = 5 THEN 'FAILED' ELSE 'SUCCEEDED' END, 'bench:1',
           now() - make_interval(mins => :runs - r + 1), now() - make_interval(mins => :runs - r),
           now() - make_interval(mins => :runs - r), now() - make_interval(mins => :runs - r),
           jsonb_build_object('rows', 100 + r, 'segments', 1, 'work_s', 1.5 + r / 10.0, 'commit_s', 0.02,
                              'spark_session_s', 0.1)
             || CASE WHEN r % 10 = 0 THEN '{"errors": {"failed": 2, "skipped": 2, "dead_lettered": 2}}'::jsonb
                     ELSE '{}'::jsonb END,
           'pool' || (1 + abs(hashtext(c.name)) % :pools)
    FROM connect.connectors c, generate_series(1, :runs) r
    """,
    """
    INSERT INTO connect.task_status (connector, task_id, state, worker_id, last_run_id, errors)
    SELECT connector, 0, 'RUNNING', 'bench:1', max(id), '{"failed": 2, "skipped": 2, "dead_lettered": 2}'::jsonb
    FROM connect.task_runs GROUP BY connector
    """,
    """
    INSERT INTO connect.task_run_totals (connector, task_id, succeeded, failed, records, errored, last_error_at)
    SELECT name, 0, 90, 10, 9000, 20, now() - interval '8 days' FROM connect.connectors
    """,
    """
    INSERT INTO connect.topics (name, partitions)
    SELECT config->>'topic', 1 FROM connect.connectors WHERE type = 'source'
    """,
    """
    INSERT INTO connect.topic_partitions (topic, partition, next_offset)
    SELECT name, 0, 10000 FROM connect.topics
    """,
    """
    INSERT INTO connect.sink_offsets (connector, topic, partition, "offset")
    SELECT name, config->>'topics', 0, 9000 FROM connect.connectors WHERE type = 'sink'
    """,
    """
    INSERT INTO connect.assignments (connector, task_id, pool, generation)
    SELECT c.name, t.task_id, 'pool' || (1 + abs(hashtext(c.name)) % :pools), 1
    FROM connect.connectors c, (VALUES (-1), (0)) t(task_id)
    ON CONFLICT DO NOTHING
    """,
    "UPDATE connect.rebalance_state SET generation = 1 WHERE id = 1",
    "ANALYZE",
]


def populate(runtime: Runtime, connectors: int, runs: int) -> float:
    started = time.monotonic()
    with runtime.engine.begin() as conn:
        for statement in SETUP:
            conn.execute(text(statement), {"connectors": connectors, "runs": runs, "pools": POOLS})
    return time.monotonic() - started


def serve(url: str, home: Path) -> tuple[subprocess.Popen[bytes], str]:
    env = {**os.environ, "CONNECT_DATABASE_URL": url, "CONNECT_HOME": str(home)}
    return start_http(lambda port: [sys.executable, "-m", "connect_core.cli", "serve", "--port", str(port)], env=env)


def scrape(client: httpx.Client) -> tuple[float, httpx.Response]:
    started = time.perf_counter()
    response = client.get("/metrics")
    took = (time.perf_counter() - started) * 1000
    response.raise_for_status()
    return took, response


def breakdown(url: str, home: Path, scrapes: int) -> tuple[float, float]:
    """Medians, in this process without HTTP: the store read and the encoding (the server's
    `encode_text`, prometheus_client's bytes)."""
    runtime = Runtime.open(Settings(database_url=url, home=home))
    reads, encodes = [], []
    try:
        for _ in range(scrapes):
            started = time.perf_counter()
            collector = read_collector(runtime)
            read = time.perf_counter()
            encode_text(collector)
            reads.append((read - started) * 1000)
            encodes.append((time.perf_counter() - read) * 1000)
    finally:
        runtime.close()
    return statistics.median(reads), statistics.median(encodes)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--server", default=SERVER)
    parser.add_argument("--connectors", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=10, help="finished runs per task")
    parser.add_argument("--scrapes", type=int, default=50)
    args = parser.parse_args()
    with database(args.server, "bench_metrics") as url, tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        runtime = Runtime.open(Settings(database_url=url, home=home))
        try:
            setup_s = populate(runtime, args.connectors, args.runs)
        finally:
            runtime.close()
        server, base = serve(url, home)
        try:
            with httpx.Client(base_url=base, timeout=30) as client:
                for _ in range(3):
                    _took, response = scrape(client)
                load = os.getloadavg()[0]
                times = [scrape(client)[0] for _ in range(args.scrapes)]
        finally:
            server.terminate()
            server.wait(timeout=30)
        read_ms, encode_ms = breakdown(url, home, args.scrapes)
    families = list(text_string_to_metric_families(response.text))
    series = sum(len(f.samples) for f in families)
    lag_max = [s for f in families if f.name.endswith("sink_record_lag_max") for s in f.samples]
    assert len(lag_max) == args.connectors // 2 and all(s.value == 1000 for s in lag_max), "unexpected lag values"
    times.sort()
    p95 = times[max(0, round(0.95 * len(times)) - 1)]
    row = (
        f"| {args.connectors:,} | {args.connectors * args.runs:,} | {series:,} | {len(response.content) / 1024:,.0f} "
        f"| {times[0]:.1f} | {statistics.median(times):.1f} | {p95:.1f} | {times[-1]:.1f} |"
    )
    print(f"setup {setup_s:.1f} s", row, flush=True)
    write_sections(
        [
            "## metrics scrape: GET /metrics at 1,000 connectors",
            "",
            "Reproduce: `.venv/bin/python bench/metrics_bench.py`. 500 file sources + 500 file sinks (one",
            f"task each), {args.runs} finished runs per task in `task_runs` and a row of pruned runs' totals",
            "(`task_run_totals`), a topic per source, every sink",
            f"lagging 1,000 records, {POOLS} pools; bulk-inserted with SQL. One `connect serve` process",
            "(uvicorn, real HTTP on loopback, auth and security edge on) scraped one request at a time by",
            f"an HTTP client in the bench process, {args.scrapes} scrapes after 3 warm-up ones, on the same",
            "machine as Postgres (2 cores, shared with other work; 1-minute load average before the",
            f"scrapes: {load:.1f}). Every scrape reads the store afresh (5 queries, no cache). Of a scrape,",
            f"in-process medians: reading the store {read_ms:.0f} ms, encoding (`encode_text`)",
            f"{encode_ms:.0f} ms (about {encode_ms * 1000 / series:.1f} µs a series). Goal: one scrape under 200 ms.",
            "",
            "| connectors | task runs | series | body KiB | min ms | p50 ms | p95 ms | max ms |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|",
            row,
            "",
        ]
    )


if __name__ == "__main__":
    main()
