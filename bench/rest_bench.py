"""REST latency and throughput under load from a second process on loopback.

    .venv/bin/python bench/rest_bench.py [--server postgresql://postgres@127.0.0.1:5432/postgres]

Starts `connect serve` (one uvicorn process, with its security edge on: Host and
cross-site checks, body and JSON limits, masking) on a throw-away database with 100
connectors, then a separate load process keeps 100 concurrent clients busy on
each endpoint for a fixed time, and on a mixed load: 90% reads (status, list) and
10% writes (PATCH of a connector's config). Writes the table into bench/RESULTS.md
(section "REST"). Goal: p99 under 50 ms for reads.
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


#: 9 reads, then 1 PATCH adding a key to one of the connectors' configs (every write validates,
#: locks the connector's row, bumps its config version and re-places its tasks).
MIXED_LUA = """
local n = 0
request = function()
  n = n + 1
  local c = string.format("c%03d", n % 100)
  if n % 10 == 0 then
    return wrk.format("PATCH", "/connectors/" .. c .. "/config", {["Content-Type"] = "application/json"},
      '{"note": "patched ' .. n .. '"}')
  elseif n % 2 == 0 then
    return wrk.format("GET", "/connectors/" .. c .. "/status")
  end
  return wrk.format("GET", "/connectors?expand=status")
end
"""


def wrk(url: str, clients: int, seconds: float, script: str | None = None) -> dict[str, float]:
    """Load `url` with wrk (C, one thread: the server keeps a core) and read its latency distribution."""
    out = subprocess.run(
        ["wrk", "-t2", f"-c{clients}", f"-d{seconds:.0f}s", "--latency", *(["-s", script] if script else []), url],
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
        # the connectors' files apart from the runtime's own data (which file connectors may not use)
        files = Path(tmp) / "files"
        files.mkdir()
        env = {
            **os.environ,
            "CONNECT_DATABASE_URL": url,
            "CONNECT_HOME": str(Path(tmp) / "home"),
            "CONNECT_FILE_ALLOWED_PATHS": str(files),
        }
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
                created = httpx.post(
                    f"{base}/connectors",
                    json={
                        "name": name,
                        "config": {
                            "connector.class": "FileSourceConnector",
                            "file": str(files / f"{name}.txt"),
                            "topic": name,
                        },
                    },
                )
                if created.status_code != 201:
                    raise RuntimeError(f"create {name}: {created.status_code} {created.text[:500]}")
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
            script = Path(tmp) / "mixed.lua"
            script.write_text(MIXED_LUA)
            label = "mixed: 90% GET status/list, 10% PATCH config"
            wrk(base + "/", args.clients, 3, str(script))
            result = wrk(base + "/", args.clients, args.seconds, str(script))
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
        "warm-up, on the same 2 cores. The security edge is on (Host and cross-site checks, body and",
        "JSON limits); the mixed row's writes each validate, lock and update one connector.",
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
