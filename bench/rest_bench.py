"""REST latency and throughput under load from a second process on loopback.

    .venv/bin/python bench/rest_bench.py [--server postgresql://postgres@127.0.0.1:5432/postgres]

Starts `connect serve` (one uvicorn process) on a throw-away database with 100
connectors, then a separate load process keeps 100 concurrent clients busy on
each endpoint for a fixed time. Writes the table into bench/RESULTS.md
(section "REST"). Goal: p99 under 50 ms.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _results import write_sections
from airflow_bench import database

CONNECTORS = 100


def wrk(url: str, clients: int, seconds: float) -> dict[str, float]:
    """Load `url` with wrk (C, one thread: the server keeps a core) and read its latency distribution."""
    out = subprocess.run(
        ["wrk", "-t2", f"-c{clients}", f"-d{seconds:.0f}s", "--latency", url],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    result: dict[str, float] = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] in ("50%", "99%"):
            result["p" + parts[0][:-1]] = _ms(parts[1])
        elif line.startswith("Requests/sec:"):
            result["rps"] = float(parts[1])
        elif "requests in" in line:
            result["requests"] = float(parts[0])
        elif line.strip().startswith("Non-2xx"):
            result["errors"] = float(parts[-1])
    result.setdefault("errors", 0)
    return result


def _ms(value: str) -> float:
    for unit, factor in (("us", 0.001), ("ms", 1.0), ("s", 1000.0)):
        if value.endswith(unit):
            return float(value[: -len(unit)]) * factor
    return float(value)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--server", default="postgresql://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--clients", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=15)
    args = parser.parse_args()
    with database(args.server, "bench_rest") as url, tempfile.TemporaryDirectory() as tmp:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        env = {**os.environ, "CONNECT_DATABASE_URL": url, "CONNECT_HOME": tmp}
        server = subprocess.Popen(
            [sys.executable, "-m", "connect_core.cli", "serve", "--port", str(port)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        base = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    httpx.get(f"{base}/", timeout=1)
                    break
                except httpx.HTTPError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.2)
            names = [f"c{i:03d}" for i in range(CONNECTORS)]
            for name in names:
                httpx.post(
                    f"{base}/connectors",
                    json={
                        "name": name,
                        "config": {
                            "connector.class": "FileSourceConnector",
                            "file": f"{tmp}/{name}.txt",
                            "topic": name,
                        },
                    },
                ).raise_for_status()
            rows = []
            for label, path in (
                ("GET /connectors/c042/status (Kafka)", "/connectors/c042/status"),
                ("GET /connectors (Kafka)", "/connectors"),
                ("GET /connectors?expand=status (Kafka, 100 connectors)", "/connectors?expand=status"),
                ("GET /connectors/list (RocketMQ, 100 connectors)", "/connectors/list"),
            ):
                wrk(base + path, args.clients, 3)  # warm-up, not recorded: connections, first snapshot
                result = wrk(base + path, args.clients, args.seconds)
                rows.append((label, result))
                print(label, result, flush=True)
        finally:
            server.terminate()
            server.wait(timeout=30)
    section = [
        f"## REST: {args.clients} concurrent clients from a second process, {CONNECTORS} connectors",
        "",
        "Reproduce: `.venv/bin/python bench/rest_bench.py` (needs `wrk`: `apt-get install wrk`). One",
        f"`connect serve` process (uvicorn); wrk (1 thread) loads each endpoint for {args.seconds:.0f} s after a 3 s",
        "warm-up, on the same 2 cores.",
        "Goal: p99 under 50 ms.",
        "",
        "| endpoint | requests | req/s | p50 ms | p99 ms | errors |",
        "|---|---:|---:|---:|---:|---:|",
        *[
            f"| {label} | {r['requests']:,.0f} | {r['rps']:.0f} | {r['p50']:.1f} | {r['p99']:.1f} | {r['errors']:.0f} |"
            for label, r in rows
        ],
        "",
    ]
    write_sections(section)


if __name__ == "__main__":
    main()
