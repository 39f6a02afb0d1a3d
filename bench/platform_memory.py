"""The local platform's memory at rest (issue 36): `connect airflow up`, no connectors, one minute idle.

    .venv/bin/python bench/platform_memory.py [--rest 60] [--no-write]

Three setups, one after the other: the default (warm pool, the LocalExecutor sized to the machine);
`CONNECT_WARM_POOL=false`; and `CONNECT_WARM_POOL=false` with `AIRFLOW__CORE__PARALLELISM=32`
(Airflow's default, the platform's old behaviour). Each starts `connect airflow up` on a free port of
127.0.0.1 with a CONNECT_HOME of its own (a temporary directory) and a metadata store and an Airflow
database of its own on the bench's PostgreSQL (CONNECT_BENCH_PG_URL, default
postgresql://postgres@127.0.0.1:5432/postgres; both dropped afterwards), waits for "Airflow UI",
then `--rest` seconds more. Then it reads, over the platform's whole process tree, VmRSS
(`/proc/<pid>/status`) and PSS (`/proc/<pid>/smaps_rollup`: a page shared by N processes counts
1/N in each, the honest sum for forked processes), by component: the api-server, the scheduler
(with its LocalExecutor's processes), the dag-processor, the triggerer, the warm pool's server
(spark-submit's JVM and its Python), its worker, and `connect airflow up` itself. Five samples 2 s
apart; each figure is their median. Writes bench/PLATFORM_MEMORY.md (docs/airflow.md includes it).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _jdbc_data as data
from warm_bench import _children, _free_port, process_tree, rss_kib, wait_for

from connect_core.platform import AIRFLOW_COMPONENTS, local_parallelism

OUT = Path(__file__).with_name("PLATFORM_MEMORY.md")
WARM_SERVER, WARM_WORKER, SUPERVISOR, OTHER = "warm pool server", "warm pool worker", "connect airflow up", "other"
COMPONENTS = (*AIRFLOW_COMPONENTS, WARM_SERVER, WARM_WORKER, SUPERVISOR, OTHER)
SAMPLES, EVERY_S = 5, 2.0


@dataclass(frozen=True)
class Setup:
    key: str
    label: str
    env: dict[str, str]


SETUPS = (
    Setup("default", f"default: warm pool, parallelism {local_parallelism()}", {}),
    Setup("no-warm", f"`CONNECT_WARM_POOL=false`, parallelism {local_parallelism()}", {"CONNECT_WARM_POOL": "false"}),
    Setup(
        "no-warm-32",
        "`CONNECT_WARM_POOL=false`, `AIRFLOW__CORE__PARALLELISM=32` (the old default)",
        {"CONNECT_WARM_POOL": "false", "AIRFLOW__CORE__PARALLELISM": "32"},
    ),
)


@dataclass
class Part:
    processes: int = 0
    rss_kib: int = 0
    pss_kib: int = 0


@dataclass
class Measured:
    setup: Setup
    up_s: float
    load: float
    parts: dict[str, Part] = field(default_factory=dict)
    note: str = ""


def pss_kib(pid: int) -> int | None:
    """The process's PSS; 0 if it is gone, None if smaps_rollup cannot be read (another user's process)."""
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1])
    except (FileNotFoundError, ProcessLookupError):
        return 0
    except (OSError, ValueError):
        pass
    return None


def _cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


def _pool_pid(home: Path, name: str) -> int | None:
    with suppress(OSError, ValueError, KeyError):
        return int(json.loads((home / "pools" / f"{name}.json").read_text())["pid"])
    return None


def components(root: int, home: Path) -> dict[str, list[int]]:
    """The platform's processes by component: each direct child of `connect airflow up` with its tree."""
    warm = {_pool_pid(home, "warm"): WARM_SERVER, _pool_pid(home, "warm+worker"): WARM_WORKER}
    found: dict[str, list[int]] = {c: [] for c in COMPONENTS}
    found[SUPERVISOR].append(root)
    for child in _children().get(root, []):
        # `python …/airflow scheduler`, or as setproctitle rewrote it: `airflow api_server -- host:…`
        words = " ".join(_cmdline(child)).replace("_", "-").split()[:4]
        name = warm.get(child) or next((c for c in AIRFLOW_COMPONENTS if c in words), OTHER)
        found[name] += process_tree(child)
    return found


def sample(root: int, home: Path) -> dict[str, Part]:
    """One reading of every component; a process that ended meanwhile (a DAG file's parse) is left out."""
    parts = {}
    for name, pids in components(root, home).items():
        part = Part()
        for pid in pids:
            rss, pss = rss_kib(pid), pss_kib(pid)
            if not Path(f"/proc/{pid}").exists():
                continue
            part.processes += 1
            part.rss_kib += rss
            part.pss_kib = -1 if pss is None or part.pss_kib < 0 else part.pss_kib + pss
        parts[name] = part
    return parts


def median_parts(samples: list[dict[str, Part]]) -> dict[str, Part]:
    return {
        name: Part(
            round(statistics.median(s[name].processes for s in samples)),
            round(statistics.median(s[name].rss_kib for s in samples)),
            -1
            if any(s[name].pss_kib < 0 for s in samples)
            else round(statistics.median(s[name].pss_kib for s in samples)),
        )
        for name in COMPONENTS
    }


def _admin(sql: str) -> None:
    with data.pg("postgres") as conn, conn.cursor() as cur:
        cur.execute(sql)


@contextmanager
def platform(setup: Setup, home: Path) -> Iterator[tuple[subprocess.Popen[bytes], float]]:
    """`connect airflow up` for `setup` (its own process group, databases and home) until it prints
    its address; SIGTERM to its group at the end, its databases dropped."""
    meta_db, airflow_db = (
        f"bench_platform_memory_meta_{setup.key.replace('-', '_')}",
        f"bench_platform_memory_af_{setup.key.replace('-', '_')}",
    )
    for db in (meta_db, airflow_db):
        _admin(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")
    _admin(f"CREATE DATABASE {meta_db}")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CONNECT_", "AIRFLOW"))}
    env.update(CONNECT_DATABASE_URL=data.pg_url(meta_db), CONNECT_HOME=str(home), SPARK_LOCAL_IP="127.0.0.1")
    env.update(setup.env)
    port, log_path = _free_port(), home.parent / "platform.log"
    command = [
        sys.executable,
        "-m",
        "connect_core.cli",
        "airflow",
        "up",
        "--port",
        str(port),
        "--airflow-db",
        airflow_db,
    ]
    print(f"{setup.key}: {' '.join(command[2:])} (log {log_path})", flush=True)
    started = time.perf_counter()
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            command, cwd=home.parent, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        wait_for(
            "`connect airflow up` to print its address",
            lambda: proc.poll() is not None or "Airflow UI" in log_path.read_text(errors="replace"),
            360,
        )
        if proc.poll() is not None:
            raise RuntimeError(f"`connect airflow up` exited {proc.returncode}:\n{log_path.read_text()[-3000:]}")
        yield proc, time.perf_counter() - started
    finally:
        try:
            with suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=90)
            except subprocess.TimeoutExpired:
                with suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            print(f"{setup.key}: stopped (exit {proc.returncode})", flush=True)
        finally:
            for db in (meta_db, airflow_db):
                _admin(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")


def measure(setup: Setup, rest_s: float) -> Measured:
    with tempfile.TemporaryDirectory(prefix=f"connect-platform-memory-{setup.key}-") as tmp:
        home = Path(tmp) / "home"
        home.mkdir()
        load = os.getloadavg()[0]
        with platform(setup, home) as (proc, up_s):
            print(f"{setup.key}: up in {up_s:.0f} s; at rest for {rest_s:.0f} s", flush=True)
            time.sleep(rest_s)
            samples = []
            for k in range(SAMPLES):
                if k:
                    time.sleep(EVERY_S)
                samples.append(sample(proc.pid, home))
            log = (home.parent / "platform.log").read_text(errors="replace")
        note = next((line.strip() for line in log.splitlines() if "warm pool" in line.lower()), "")
    result = Measured(setup, up_s, load, median_parts(samples), note)
    for name, part in result.parts.items():
        print(f"  {name}: {part.processes} processes, RSS {_mb(part.rss_kib)} MB, PSS {_mb(part.pss_kib)} MB")
    return result


def _mb(kib: int) -> str:
    return "n/a" if kib < 0 else f"{kib / 1024:,.0f}"


def _total(parts: dict[str, Part]) -> Part:
    pss = [p.pss_kib for p in parts.values()]
    return Part(
        sum(p.processes for p in parts.values()),
        sum(p.rss_kib for p in parts.values()),
        -1 if any(v < 0 for v in pss) else sum(pss),
    )


def _mem_total_mib() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) // 1024
    return 0


LABELS = {
    "scheduler": "scheduler (with its executor's processes)",
    WARM_SERVER: "warm pool server (JVM and its Python)",
    SUPERVISOR: "`connect airflow up` itself",
}


def report(results: list[Measured], rest_s: float) -> list[str]:
    cores = os.cpu_count() or 1
    letters = "abcdefgh"
    lines = [
        "<!-- Written by bench/platform_memory.py; docs/airflow.md includes it. -->",
        "",
        f"Reproduce: `.venv/bin/python bench/platform_memory.py`. Measured {date.today().isoformat()} on a "
        f"machine with {cores} cores and {_mem_total_mib() / 1024:.0f} GiB of RAM, shared with other work. "
        "`connect airflow up` with no connectors, on PostgreSQL, "
        f"{rest_s:.0f} s after it printed its address; each figure is the median of {SAMPLES} samples "
        f"{EVERY_S:.0f} s apart. RSS sums each process's VmRSS, so a page shared by forked processes counts "
        "once in each; PSS (`/proc/<pid>/smaps_rollup`) splits a shared page between the processes that "
        "share it: the memory the platform actually takes. MB = MiB.",
        "",
        "| setup | processes | RSS MB | PSS MB | up in s | load |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for letter, r in zip(letters, results, strict=False):
        t = _total(r.parts)
        lines.append(
            f"| ({letter}) {r.setup.label} | {t.processes} | {_mb(t.rss_kib)} | {_mb(t.pss_kib)} "
            f"| {r.up_s:.0f} | {r.load:.1f} |"
        )
    lines += [
        "",
        '`up in s`: until `connect airflow up` printed "Airflow UI"; `load`: the 1-minute load average as '
        "the setup started. By component (processes / RSS MB / PSS MB):",
        "",
        "| component | " + " | ".join(f"({letters[i]})" for i in range(len(results))) + " |",
        "|---|" + "---:|" * len(results),
    ]
    shown = [c for c in COMPONENTS if any(r.parts[c].processes for r in results)]
    for name in shown:
        cells = [
            "—" if not (p := r.parts[name]).processes else f"{p.processes} / {_mb(p.rss_kib)} / {_mb(p.pss_kib)}"
            for r in results
        ]
        lines.append(f"| {LABELS.get(name, name)} | " + " | ".join(cells) + " |")
    notes = [f"({letters[i]}) {r.note}" for i, r in enumerate(results) if r.note]
    if notes:
        lines += ["", "From `connect airflow up`'s output: " + "; ".join(notes) + "."]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rest", type=float, default=60.0, help="seconds at rest after the platform is up")
    parser.add_argument("--no-write", action="store_true", help=f"print only; leave {OUT.name} alone")
    args = parser.parse_args()
    results = [measure(setup, args.rest) for setup in SETUPS]  # one after the other: the cores are shared
    lines = report(results, args.rest)
    if not args.no_write:
        OUT.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
