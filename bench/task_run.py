"""Wall time of one task run through spark-submit, split into start-up and work.

    .venv/bin/python bench/task_run.py [--lines 100000]

Uses CONNECT_DATABASE_URL if set, else the embedded Postgres (in a temp dir).
Writes the table to bench/RESULTS.md (section "task run").
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from connect_core.runtime.context import Runtime
from connect_core.runtime.execution.submit import submit_task
from connect_core.runtime.settings import Settings

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _results import write_sections


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lines", type=int, default=100_000)
    args = parser.parse_args()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        settings = Settings(home=home / "home")
        rt = Runtime.open(settings)
        source, sink = home / "in.txt", home / "out.txt"
        rt.create_connector("src", {"connector.class": "FileSourceConnector", "file": str(source), "topic": "t"})
        rt.create_connector("snk", {"connector.class": "FileSinkConnector", "file": str(sink), "topics": "t"})
        rows = []

        def run(label: str, name: str) -> None:
            r = submit_task(settings, rt.database_url, name, 0)
            t = r.result["timings"]
            startup = r.wall_s - t["run_s"] + t["spark_session_s"]
            rows.append((label, r.result["rows"], r.wall_s, startup, t.get("work_s", 0.0), t.get("commit_s", 0.0)))
            print(rows[-1], flush=True)

        source.write_text("".join(f"line {i} of the benchmark file\n" for i in range(args.lines)))
        run(f"source, {args.lines:,} new lines", "src")
        run(f"sink, {args.lines:,} new rows", "snk")
        with source.open("a") as f:
            f.write("".join(f"extra {i}\n" for i in range(1000)))
        run("source, 1,000 new lines", "src")
        run("sink, 1,000 new rows", "snk")
        run("source, nothing new", "src")
        run("sink, nothing new", "snk")
        assert sink.read_text().count("\n") == args.lines + 1000
        rt.close()

    table = [
        "## task run: one spark-submit of the runner (local[*], 2 cores)",
        "",
        "Reproduce: `.venv/bin/python bench/task_run.py`. Start-up = JVM + Python + SparkSession;",
        "work = the task's read/write; commit = the metadata transaction.",
        "",
        "| run | rows | wall s | start-up s | work s | commit s |",
        "|---|---:|---:|---:|---:|---:|",
        *[f"| {label} | {n:,} | {w:.1f} | {s:.1f} | {k:.1f} | {c:.3f} |" for label, n, w, s, k, c in rows],
        "",
    ]
    write_sections(table)


if __name__ == "__main__":
    main()
