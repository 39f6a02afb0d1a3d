"""The Connect view at 1,000 connectors: its JSON (`data.json`) and the page's load in Chromium.

    .venv/bin/python bench/view_bench.py [--connectors 1000] [--runs 20] [--fetches 30] [--loads 5]

On a throw-away database (the machine's Postgres, CONNECT_BENCH_PG_URL), the store of
bench/metrics_bench.py (half file sources, half file sinks each lagging 1,000 records, `--runs`
finished runs per task, every tenth one FAILED, here with an error text; the sinks' committed runs
name a table and its version, as a lakehouse sink's do), bulk-inserted with SQL.

Then one server process (uvicorn on loopback, this script with `--serve`) serves the REST app
under `/connect` and the view under `/connect-ui`, as Airflow's api-server mounts them. Measured:

* `GET /connect-ui/data.json` (what the page polls), `--fetches` times after 3 warm-ups, by an
  HTTP client in this process, with and without gzip; in-process, the store read alone;
* the page in headless Chromium (/usr/bin/chromium), `--loads` times: from `goto` until every
  connector's row is rendered; then a search typed into the box until the list is filtered.

Writes bench/RESULTS.md (section "Connect view at 1,000 connectors").
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
from sqlalchemy import text

from connect_core.runtime.context import Runtime
from connect_core.runtime.settings import Settings
from connect_core.web._data import connectors_view

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _results import write_sections
from _serve import start_http
from airflow_bench import database
from metrics_bench import populate

SERVER = os.environ.get("CONNECT_BENCH_PG_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"]

#: The failed runs of the metrics bench's store get an error text, so the view reads and masks them.
ERRORS = """
    UPDATE connect.task_runs
    SET error = 'java.sql.SQLException: connection refused to jdbc:postgresql://app:s3cret@db/x (run ' || id || ')'
    WHERE state = 'FAILED'
"""

#: The sinks' committed runs report the table they wrote and its version (`sdk.WRITE_TABLES`), so
#: the view reads and shows them.
TABLES = """
    UPDATE connect.task_runs r
    SET stats = r.stats || jsonb_build_object('target', jsonb_build_object('rows_written', 100, 'tables',
        jsonb_build_array(jsonb_build_object('name', 'lake.' || r.connector, 'version', r.id::text))))
    FROM connect.connectors c
    WHERE c.name = r.connector AND c.type = 'sink' AND r.state = 'SUCCEEDED'
"""


def serve_forever(url: str, home: str, port: int) -> None:
    """The `--serve` mode: both apps in one uvicorn server, loopback only (the REST app's default auth)."""
    import uvicorn
    from fastapi import FastAPI

    from connect_core.rest.app import create_app
    from connect_core.rest.auth import bearer_or_loopback
    from connect_core.web.view import create_view_app

    settings = Settings(database_url=url, home=Path(home))
    runtime = Runtime.open(settings)
    app = FastAPI()
    app.mount("/connect", create_app(lambda: runtime, auth=[bearer_or_loopback(None)]))
    app.mount("/connect-ui", create_view_app(lambda: runtime, auth=[bearer_or_loopback(None)]))
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


def start_server(url: str, home: Path) -> tuple[subprocess.Popen[bytes], str]:
    return start_http(lambda port: [sys.executable, __file__, "--serve", url, str(home), str(port)], "/connect/")


def fetch_times(base: str, fetches: int, *, gzipped: bool) -> tuple[list[float], int]:
    headers = {"Accept-Encoding": "gzip" if gzipped else "identity"}
    with httpx.Client(base_url=base, timeout=60, headers=headers) as client:
        for _ in range(3):
            client.get("/connect-ui/data.json").raise_for_status()
        times, wire = [], 0
        for _ in range(fetches):
            started = time.perf_counter()
            with client.stream("GET", "/connect-ui/data.json") as response:
                raw = b"".join(response.iter_raw())
            times.append((time.perf_counter() - started) * 1000)
            response.raise_for_status()
            wire = len(raw)
    return times, wire


def store_read_ms(url: str, home: Path, reads: int) -> tuple[float, int, int]:
    """The median time of the view's store read, the connectors it listed, and the SQL statements
    one read sends (counted, so the text cannot fall behind the code)."""
    from sqlalchemy import event

    runtime = Runtime.open(Settings(database_url=url, home=home))
    statements = [0]

    def count(*_: object) -> None:
        statements[0] += 1

    try:
        times = []
        for _ in range(reads):
            statements[0] = 0
            event.listen(runtime.engine, "before_cursor_execute", count)
            started = time.perf_counter()
            rows = connectors_view(runtime)
            times.append((time.perf_counter() - started) * 1000)
            event.remove(runtime.engine, "before_cursor_execute", count)
    finally:
        runtime.close()
    return statistics.median(times), len(rows), statements[0]


def browser_times(base: str, connectors: int, loads: int) -> tuple[list[float], float]:
    from playwright.sync_api import sync_playwright

    rendered = f"#connectors tbody[data-rendered='{connectors}']"
    times = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        for i in range(loads + 1):  # the first load warms the server and the browser's caches
            page = browser.new_page(viewport={"width": 1600, "height": 900})
            started = time.perf_counter()
            page.goto(f"{base}/connect-ui/", wait_until="commit")
            page.locator(rendered).wait_for(timeout=120_000)
            times.append((time.perf_counter() - started) * 1000)
            if i < loads:
                page.close()
        started = time.perf_counter()
        page.fill("#search", "c099")
        page.locator("#shown", has_text="showing 10 of").wait_for(timeout=60_000)
        search_ms = (time.perf_counter() - started) * 1000
        browser.close()
    return times[1:], search_ms


def _p(times: list[float], q: float) -> float:
    ordered = sorted(times)
    return ordered[max(0, round(q * len(ordered)) - 1)]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--server", default=SERVER)
    parser.add_argument("--connectors", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=20, help="finished runs per task")
    parser.add_argument("--fetches", type=int, default=30)
    parser.add_argument("--loads", type=int, default=5)
    args = parser.parse_args()
    with database(args.server, "bench_view") as url, tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        runtime = Runtime.open(Settings(database_url=url, home=home))
        try:
            setup_s = populate(runtime, args.connectors, args.runs)
            with runtime.engine.begin() as conn:
                conn.execute(text(ERRORS))
                conn.execute(text(TABLES))
        finally:
            runtime.close()
        server, base = start_server(url, home)
        try:
            load = os.getloadavg()[0]
            plain, plain_bytes = fetch_times(base, args.fetches, gzipped=False)
            zipped, zipped_bytes = fetch_times(base, args.fetches, gzipped=True)
            body = httpx.get(f"{base}/connect-ui/data.json", timeout=60).content
            assert b"s3cret" not in body, "a secret reached the view"
            assert b'"name":"lake.c0001"' in body, "a sink's table is missing from the view"
            loads, search_ms = browser_times(base, args.connectors, args.loads)
        finally:
            server.terminate()
            server.wait(timeout=30)
        read_ms, listed, queries = store_read_ms(url, home, 10)
    assert listed == args.connectors
    rows = [
        f"| `data.json` (identity) | {plain_bytes / 1024:,.0f} | {min(plain):.0f} | {statistics.median(plain):.0f} "
        f"| {_p(plain, 0.95):.0f} | {max(plain):.0f} |",
        f"| `data.json` (gzip) | {zipped_bytes / 1024:,.0f} | {min(zipped):.0f} | {statistics.median(zipped):.0f} "
        f"| {_p(zipped, 0.95):.0f} | {max(zipped):.0f} |",
        f"| page load until {args.connectors:,} rows rendered (Chromium) | | {min(loads):.0f} "
        f"| {statistics.median(loads):.0f} | {_p(loads, 0.95):.0f} | {max(loads):.0f} |",
    ]
    print(f"setup {setup_s:.1f} s; store read {read_ms:.0f} ms; search {search_ms:.0f} ms", *rows, sep="\n", flush=True)
    write_sections(
        [
            "## Connect view at 1,000 connectors",
            "",
            "Reproduce: `.venv/bin/python bench/view_bench.py`. The store of `bench/metrics_bench.py`",
            f"({args.connectors:,} connectors: file sources and file sinks each lagging 1,000 records,",
            f"{args.runs} finished runs per task, every tenth FAILED with an error text, the sinks'",
            f"committed runs naming a table and its version), bulk-inserted with SQL in {setup_s:.1f} s.",
            "One uvicorn process serves the REST app (`/connect`) and the view",
            "(`/connect-ui`) on loopback; the bench process fetches `data.json` (what the page polls every",
            f"5 s) one request at a time, {args.fetches} times after 3 warm-ups, without and with gzip; then",
            f"headless Chromium loads the page {args.loads} times (after one warm-up load), timed from",
            "`goto` until every connector's row is in the table (the HTML carries the first data, the",
            "script builds the rows). Same 2-core machine as Postgres, shared with other work (1-minute",
            f"load average before: {load:.1f}). In-process, building the JSON's data from the store",
            f"(`connectors_view`: {queries} queries, whatever the number of connectors) takes {read_ms:.0f} ms median;",
            f"typing a search that leaves 10 of the rows shown takes {search_ms:.0f} ms to the filtered list",
            "(80 ms of it the typing debounce).",
            "",
            "| what | KiB | min ms | p50 ms | p95 ms | max ms |",
            "|---|---:|---:|---:|---:|---:|",
            *rows,
            "",
        ]
    )


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--serve":
        serve_forever(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    else:
        main()
