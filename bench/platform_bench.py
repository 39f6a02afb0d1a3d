"""Fast by default (issue 31): one scheduled incremental sync on the local platform as a user starts
it, no pool command typed; warm pool (the default) vs `CONNECT_WARM_POOL=false`.

    .venv/bin/python bench/platform_bench.py [--rows 100000] [--changed 10000] [--keep] [--no-write]

PostgreSQL → PostgreSQL with warm_bench's connectors and source table (`bench_source.bench_events`,
`--rows` rows): the JDBC source (`timestamp+incrementing`, trigger-only) and the JDBC sink (upsert
on `id`) are registered with `connect create` in a fresh metadata store, then `connect airflow up`
starts the platform (and, by default, its warm pool; `local` stands by). A first sync copies the
table (not timed); then 10,000 rows change, the source DAG is triggered over Airflow's REST API v2,
its Asset event starts the sink's DAG, and each task instance's `duration` is read back from the
API. Then the platform stops, and starts again with `CONNECT_WARM_POOL=false`: the same round on
the classic `local` pool. Meanwhile the RSS of the warm pool's server (JVM and its descendants)
and of its worker is read: idle after the platform's start, after the full sync, after the
incremental one. Writes two `## warm pool by default: …` sections of bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _connect_jdbc as connect
import _jdbc_data as data
import warm_bench as warm
from warm_bench import AirflowRun, airflow_round, live_airflow, process_tree, rss_kib

VARIANT = warm.VARIANT["connect-warm"]  # airflow_round's connectors, metadata store and target
#: The 1-minute load average as each platform started (the 2 cores may be shared).
LOADS: dict[str, float] = {}


@dataclass
class Memory:
    phase: str
    server_kib: int
    jvm_kib: int
    worker_kib: int


def memory(phase: str, home: Path) -> Memory | None:
    """RSS now of the platform's warm pool: its server's tree (the JVM and its Python workers), its worker."""
    pools = home / "pools"
    try:
        server = int(json.loads((pools / "warm.json").read_text())["pid"])
        worker = int(json.loads((pools / "warm+worker.json").read_text())["pid"])
    except (OSError, ValueError, KeyError):
        return None
    jvm = warm.jvm_pid(server)
    return Memory(
        phase,
        sum(rss_kib(p) for p in process_tree(server)),
        rss_kib(jvm) if jvm else 0,
        sum(rss_kib(p) for p in process_tree(worker)),
    )


def setup(rows: int) -> None:
    warm.prepare_source(rows)
    warm.reset_target("connect-warm")
    connect.setup(
        warm.KIND, warm.target_table("connect-warm"), variant=VARIANT, own_names=True, source_extra={"schedule": "none"}
    )


def platform_round(
    env: dict[str, str], home: Path, pool: str, rounds: list[int], rows: int, changed: int
) -> tuple[list[AirflowRun], float, list[Memory]]:
    """The platform up (as `env` says), one sync per round in `rounds`; the runs, seconds to start, memory."""
    runs, seen = [], []
    LOADS[pool] = os.getloadavg()[0]
    with live_airflow(env, home) as (api, up_s):
        print(f"platform ({pool}): up in {up_s:.0f} s", flush=True)
        time.sleep(5)
        seen.append(memory("idle after the platform's start", home))
        for k in rounds:
            runs.append(airflow_round(api, pool, k, rows, changed))
            seen.append(memory("after the full sync" if k == rounds[0] else "after the incremental sync", home))
    return runs, up_s, [m for m in seen if m is not None]


def _s(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


def _mib(kib: int) -> str:
    return f"{kib / 1024:,.0f}"


def sections(
    args: argparse.Namespace,
    warm_runs: list[AirflowRun],
    classic_runs: list[AirflowRun],
    ups: list[float],
    mem: list[Memory],
) -> list[str]:
    command = ".venv/bin/python bench/platform_bench.py" + (f" --rows {args.rows}" if args.rows != 100_000 else "")
    lines = [
        f"## warm pool by default: one scheduled incremental sync of {args.changed:,} rows on `connect airflow up`",
        "",
        f"Reproduce: `{command}`. PostgreSQL → PostgreSQL (warm_bench's JDBC source, `timestamp+incrementing`, "
        f"and JDBC sink, upsert on `id`; a {args.rows:,}-row table), registered with `connect create`, then "
        "`connect airflow up` as a user starts it, no pool command typed: by default it starts the warm pool "
        f"`warm` (capacity = cores, heap 1g; up in {ups[0]:.0f} s with Airflow), `local` standing by; then the same "
        f"platform with `CONNECT_WARM_POOL=false` (up in {ups[1]:.0f} s), the tasks back on `local`. A first "
        "triggered sync copies the table (not in the table); then 10,000 rows change, the source DAG is triggered "
        "over Airflow's REST API v2 and its Asset event starts the sink's DAG. `task s` is each task instance's "
        "`duration` as Airflow records it (the REST API); `runs` from the task's log. One run, 2 cores; "
        f"1-minute load average {LOADS.get('warm', 0):.1f} as the warm platform started, "
        f"{LOADS.get('local', 0):.1f} as the classic one did.",
        "",
        "| platform | source task s | sink task s | source DAG run s | sink DAG run s | queued → sink done s "
        "| runs | verified |",
        "|---|---:|---:|---:|---:|---:|---|---|",
    ]
    for label, run in (("warm pool (default)", warm_runs[-1:]), ("CONNECT_WARM_POOL=false", classic_runs[-1:])):
        for r in run:
            lines.append(
                f"| {label} | {_s(r.source_task_s)} | {_s(r.sink_task_s)} | {_s(r.source_run_s)} | {_s(r.sink_run_s)} "
                f"| {_s(r.queued_to_sink_end_s)} | {r.states} | {'yes' if r.verified else 'NO ' + r.note} |"
            )
    lines += [
        "",
        "## warm pool by default: the memory it costs",
        "",
        "Same run. RSS (`/proc/<pid>/status` VmRSS) of the platform's warm pool: its server, the JVM of the pid in "
        "`$CONNECT_HOME/pools/warm.json` with its descendants (Python workers), and its worker (pid in "
        "`warm+worker.json`). `CONNECT_WARM_POOL=false` costs none of it.",
        "",
        "| when | server MiB (whole tree) | of which JVM MiB | worker MiB | total MiB |",
        "|---|---:|---:|---:|---:|",
    ]
    for m in mem:
        total = m.server_kib + m.worker_kib
        lines.append(f"| {m.phase} | {_mib(m.server_kib)} | {_mib(m.jvm_kib)} | {_mib(m.worker_kib)} | {_mib(total)} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--changed", type=int, default=10_000)
    parser.add_argument("--keep", action="store_true", help="leave the bench's databases, schemas and homes")
    parser.add_argument("--no-write", action="store_true", help="print only; leave bench/RESULTS.md alone")
    args = parser.parse_args()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    setup(args.rows)
    home = connect._home(warm.KIND, VARIANT)
    env = {k: v for k, v in connect._env(warm.KIND, VARIANT).items() if not k.startswith(("AIRFLOW", "CONNECT_WARM"))}
    try:
        with data.pg("postgres") as conn, conn.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS {warm.AIRFLOW_DB} WITH (FORCE)")
        warm_runs, warm_up, mem = platform_round(env, home, "warm", [1, 2], args.rows, args.changed)
        classic_env = {**env, "CONNECT_WARM_POOL": "false"}
        classic_runs, classic_up, _ = platform_round(classic_env, home, "local", [3], args.rows, args.changed)
    finally:
        if not args.keep:
            warm.drop_bench_databases(["connect-warm"])
    lines = sections(args, warm_runs, classic_runs, [warm_up, classic_up], mem)
    if args.no_write:
        print("\n".join(lines))
    else:
        from _results import write_sections

        write_sections(lines)


if __name__ == "__main__":
    main()
