"""Airflow-side costs: the DAG files' parse by connector count and DAG files, live, and a run with nothing new.

    .venv/bin/python bench/airflow_bench.py [--server postgresql://postgres@127.0.0.1:5432/postgres]
        [--counts 1000,5000] [--shards 1,16] [--live 5000] [--local 10] [--only parse,nothing-new]

Creates throw-away databases on the server for the Connect metadata and for Airflow's. "DAG
parse": at each count, the DAG files of each `CONNECT_AIRFLOW_DAG_SHARDS` value parsed one by
one as the dag-processor parses them; then a live `airflow dag-processor` and `airflow scheduler`
at `--live` connectors (one file vs the most files), and at `--local` connectors with the 5 s
interval `connect airflow up` uses. Writes the tables into bench/RESULTS.md (sections "DAG parse"
and "nothing new").
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import psycopg2
from _results import write_sections
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.engine import make_url

from connect_core.airflow.dag_factory import shard_file
from connect_core.runtime.context import Runtime
from connect_core.runtime.execution.submit import submit_task
from connect_core.runtime.settings import Settings

ROOT = Path(__file__).resolve().parents[1]
AIRFLOW = str(Path(sys.executable).with_name("airflow"))
DAGS = ROOT / "dags"
PLUGINS = ROOT / "examples" / "plugins"
TASKS = 4  # the scale issue's connectors: 4 tasks each

EXECUTE = """
import time
from connect_core.airflow.operator import ConnectTaskOperator
from airflow.sdk.exceptions import AirflowSkipException
op = ConnectTaskOperator(task_id="t", connector={name!r}, connect_task_id=0, precheck={precheck!r})
t = time.perf_counter()
try:
    op.execute({{}})
except AirflowSkipException:
    pass
print("RESULT", time.perf_counter() - t)
"""


@contextmanager
def database(server: str, prefix: str) -> Iterator[str]:
    name = f"{prefix}_{uuid.uuid4().hex[:8]}"
    admin = psycopg2.connect(make_url(server).set(drivername="postgresql").render_as_string(hide_password=False))
    admin.autocommit = True
    with admin.cursor() as cur:
        cur.execute(f'CREATE DATABASE "{name}"')
    try:
        yield (
            make_url(server).set(drivername="postgresql+psycopg2", database=name).render_as_string(hide_password=False)
        )
    finally:
        with admin.cursor() as cur:
            cur.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()


def airflow_env(airflow_db: str, connect_db: str, home: Path) -> dict[str, str]:
    return {
        **os.environ,
        "AIRFLOW_HOME": str(home / "airflow"),
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": airflow_db,
        "AIRFLOW__CORE__DAGS_FOLDER": str(ROOT / "dags"),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(ROOT / "plugins"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "CONNECT_DATABASE_URL": connect_db,
        "CONNECT_HOME": str(home / "connect"),
        "SPARK_LOCAL_IP": "127.0.0.1",
    }


PARSE = """
import resource, time
from pathlib import Path
import airflow.sdk  # noqa: F401  (the dag-processor has Airflow imported when it forks a parse)
{preload}
import structlog
from airflow.dag_processing.processor import DagFileParseRequest, _parse_file

path = Path({path!r})
started = time.perf_counter()
request = DagFileParseRequest(file=str(path), bundle_path=path.parent, bundle_name="dags-folder")
result = _parse_file(request, structlog.get_logger())
result.model_dump_json()  # what a parse sends back to the dag-processor
elapsed = time.perf_counter() - started
assert not result.import_errors, result.import_errors
print("RESULT", len(result.serialized_dags), elapsed, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
"""
#: What `[core] might_contain_dag_callable = connect_core.airflow.dag_factory.might_contain_dag` does:
#: the dag-processor imports the DAG factory once, and every parse it forks has it.
PRELOAD = "import connect_core.airflow.dag_factory  # noqa: F401"


@dataclass(frozen=True)
class ParseRow:
    connectors: int
    files: int
    dags: int
    total: float  # every file parsed once, one after another
    slowest: float  # the slowest file, best of 2
    preloaded: float | None  # the slowest file with the DAG factory already imported
    rss_mb: float  # the largest parse process's peak RSS


def register(url: str, count: int, home: Path) -> None:
    """`count` CounterSource connectors of TASKS tasks each, stored through the store: a create also
    places the new tasks on Spark pools (a rebalance), which is not what this measures and would
    make 5,000 creates take minutes. So their tasks have no placement (no Airflow pool per task)."""
    runtime = Runtime.open(Settings(database_url=url, home=home, plugin_path=str(PLUGINS)))
    try:
        valid = runtime.validated("c", {"connector.class": "CounterSource", "topic": "t", "tasks.max": TASKS})
        for i in range(count):
            topic = f"t{i:05d}"
            runtime.connectors.create(
                f"c{i:05d}",
                connector_class=valid["connector_class"],
                type=valid["type"],
                config={**valid["config"], "topic": topic},
                task_configs=[{**task, "topic": topic} for task in valid["task_configs"]],
            )
    finally:
        runtime.close()


def parse_env(connect_db: str, home: Path, shards: int, pycache: Path) -> dict[str, str]:
    env = {
        **os.environ,
        "CONNECT_DATABASE_URL": connect_db,
        "CONNECT_PLUGIN_PATH": str(PLUGINS),
        "CONNECT_AIRFLOW_DAG_SHARDS": str(shards),
        "AIRFLOW_HOME": str(home / "airflow"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        # Byte code cached (as in a deployment), outside the repository.
        "PYTHONPYCACHEPREFIX": str(pycache),
    }
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def parse_file(env: dict[str, str], path: Path, *, preload: bool = False) -> tuple[int, float, float]:
    """DAGs, seconds and peak RSS (MB) of the dag-processor's parse of one file, in a fresh process."""
    script = PARSE.format(path=str(path), preload=PRELOAD if preload else "")
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True)
    result = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    if proc.returncode or not result:
        raise RuntimeError(proc.stdout[-3000:] + proc.stderr[-3000:])
    _, dags, seconds, rss = result[-1].split()
    return int(dags), float(seconds), float(rss)


def parse_times(url: str, count: int, layouts: list[int], home: Path, pycache: Path) -> list[ParseRow]:
    """Each layout's files parsed, on `url`'s `count` connectors."""
    rows = []
    most = max(layouts)
    parse_file(parse_env(url, home, most, pycache), DAGS / shard_file(most - 1))  # warm-up: byte code, caches
    for shards in layouts:
        env = parse_env(url, home, shards, pycache)
        files = [DAGS / shard_file(i) for i in range(shards)]
        parses = [parse_file(env, f) for f in files]
        dags = sum(p[0] for p in parses)
        assert dags == count + 1, (dags, count)  # every connector once, and the rebalance DAG
        slowest = max(range(shards), key=lambda i: parses[i][1])
        again = parse_file(env, files[slowest])[1]
        preloaded = parse_file(env, files[slowest], preload=True)[1] if shards > 1 else None
        rows.append(
            ParseRow(
                count,
                shards,
                dags,
                sum(p[1] for p in parses),
                min(parses[slowest][1], again),
                preloaded,
                max(p[2] for p in parses),
            )
        )
        print("parse", rows[-1], flush=True)
    return rows


@dataclass(frozen=True)
class LiveRow:
    connectors: int
    files: int
    interval: int  # [dag_processor] min_file_process_interval
    preloaded: bool  # [core] might_contain_dag_callable set
    first_pass: float | None  # seconds from the dag-processor's start to every DAG in Airflow's database
    outcome: str
    slowest_file: float | None  # the longest parse Airflow recorded for a file (dag.last_parse_duration)
    cores: float  # the dag-processor's CPU seconds per second, once every DAG is in
    rss_mb: float  # the largest dag-processor process's peak RSS
    loop_ms: list[float] = field(default_factory=list)  # the scheduler's loops, once every DAG is in
    dag_runs: int = 0


def _start(command: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


class _Sampler(threading.Thread):
    """CPU seconds of a process and its children, and the peak RSS of any one of them."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.root = psutil.Process(pid)
        self.rss = 0.0
        self.done = threading.Event()

    def cpu(self) -> float:
        times = self.root.cpu_times()  # children: the parses it has waited for
        total = times.user + times.system + times.children_user + times.children_system
        for child in self.root.children(recursive=True):
            with contextlib.suppress(psutil.Error):
                total += sum(child.cpu_times()[:2])
        return total

    def run(self) -> None:
        while not self.done.wait(0.2):
            with contextlib.suppress(psutil.Error):
                for proc in [self.root, *self.root.children(recursive=True)]:
                    with contextlib.suppress(psutil.Error):
                        self.rss = max(self.rss, proc.memory_info().rss / 2**20)


def live(
    server: str,
    connect_db: str,
    connectors: int,
    shards: int,
    interval: int,
    *,
    preload: bool,
    window: float,
    pycache: Path,
) -> LiveRow:
    """A live dag-processor (and then scheduler) on `connect_db`'s connectors; no task ever runs
    (the default pool has no slot)."""
    with database(server, "bench_airflow") as airflow_db, tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        env = airflow_env(airflow_db, connect_db, home)
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env.update(
            PYTHONPYCACHEPREFIX=str(pycache),
            CONNECT_AIRFLOW_DAG_SHARDS=str(shards),
            CONNECT_PLUGIN_PATH=str(PLUGINS),
            AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL=str(interval),
            AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL="300",
            AIRFLOW__LOGGING__NAMESPACE_LEVELS="airflow.jobs.scheduler_job_runner=DEBUG",
        )
        if preload:
            env["AIRFLOW__CORE__MIGHT_CONTAIN_DAG_CALLABLE"] = "connect_core.airflow.dag_factory.might_contain_dag"
        subprocess.run([AIRFLOW, "db", "migrate"], env=env, check=True, capture_output=True)
        engine = create_engine(airflow_db)
        with engine.begin() as conn:
            conn.execute(text("UPDATE slot_pool SET slots = 0 WHERE pool = 'default_pool'"))
        started = time.monotonic()
        processor = _start([AIRFLOW, "dag-processor"], env, home / "dag-processor.log")
        sampler = _Sampler(processor.pid)
        sampler.start()
        scheduler = None
        try:
            first_pass, outcome = _wait_for_dags(engine, connectors + 1, started, deadline=started + 240)
            if first_pass is None:
                return LiveRow(connectors, shards, interval, preload, None, outcome, None, 0.0, sampler.rss)
            with engine.connect() as conn:
                slowest = conn.execute(text("SELECT max(last_parse_duration) FROM dag WHERE NOT is_stale")).scalar()
            cpu = sampler.cpu()
            scheduler = _start([AIRFLOW, "scheduler"], env, home / "scheduler.log")
            time.sleep(window)
            cores = (sampler.cpu() - cpu) / window
            with engine.connect() as conn:
                runs = conn.execute(text("SELECT count(*) FROM dag_run")).scalar() or 0
            loops = [float(m) for m in LOOP.findall((home / "scheduler.log").read_text(errors="replace"))]
            return LiveRow(
                connectors,
                shards,
                interval,
                preload,
                first_pass,
                "all DAGs in",
                slowest,
                cores,
                sampler.rss,
                loops,
                runs,
            )
        finally:
            sampler.done.set()
            if scheduler is not None:
                _stop(scheduler)
            _stop(processor)
            engine.dispose()


LOOP = re.compile(r"Ran scheduling loop in ([0-9.]+) ms")


def _wait_for_dags(engine: Engine, expected: int, started: float, deadline: float) -> tuple[float | None, str]:
    """Seconds until `expected` DAGs are active in Airflow's database, or why they are not."""
    while time.monotonic() < deadline:
        with engine.connect() as conn:
            active = conn.execute(text("SELECT count(*) FROM dag WHERE NOT is_stale")).scalar()
            error = conn.execute(text("SELECT stacktrace FROM import_error LIMIT 1")).scalar()
        if active == expected:
            return time.monotonic() - started, "all DAGs in"
        if error:
            last = [line for line in error.strip().splitlines() if line.strip()][-1]
            return None, f"import error after {time.monotonic() - started:.0f} s: {last.strip()[:120]}"
        time.sleep(0.5)
    return None, f"{active} of {expected} DAGs after {deadline - started:.0f} s"


def nothing_new(server: str) -> list[tuple[str, float, float]]:
    rows = []
    with (
        database(server, "bench_connect") as connect_db,
        database(server, "bench_airflow") as airflow_db,
        tempfile.TemporaryDirectory() as tmp,
    ):
        home = Path(tmp)
        env = airflow_env(airflow_db, connect_db, home)
        subprocess.run([AIRFLOW, "db", "migrate"], env=env, check=True, capture_output=True)
        settings = Settings(database_url=connect_db, home=home / "connect")
        rt = Runtime.open(settings)
        (home / "in.txt").write_text("a\nb\n")
        for name, precheck in (("with_precheck", True), ("without_precheck", False)):
            rt.create_connector(
                name,
                {
                    "connector.class": "FileSourceConnector",
                    "file": str(home / "in.txt"),
                    "topic": name,
                    "precheck": precheck,
                },
            )
            assert submit_task(settings, rt.database_url, name, 0).state == "SUCCEEDED"  # now nothing is new
            subprocess.run([AIRFLOW, "dags", "test", f"connect__{name}"], env=env, check=True, capture_output=True)
            with create_engine(airflow_db).connect() as conn:
                duration, state = conn.execute(
                    text(
                        "SELECT EXTRACT(EPOCH FROM end_date - start_date), state FROM task_instance WHERE dag_id = :d"
                    ),
                    {"d": f"connect__{name}"},
                ).one()
            script = EXECUTE.format(name=name, precheck=precheck)
            out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
            execute = float(out.stdout.strip().splitlines()[-1].split()[1])
            rows.append((f"{name.replace('_', ' ')} ({state})", execute, float(duration)))
            print("nothing new", rows[-1], flush=True)
        rt.close()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--server", default="postgresql://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--counts", default="1000,5000", help="connectors of the parse runs")
    parser.add_argument("--shards", default="1,16", help="DAG files (CONNECT_AIRFLOW_DAG_SHARDS) to compare")
    parser.add_argument("--live", type=int, default=5000, help="connectors of the live runs (one of --counts; 0: none)")
    parser.add_argument("--local", type=int, default=10, help="connectors of the live runs at a 5 s interval (0: none)")
    parser.add_argument("--window", type=float, default=60.0, help="seconds each live run is watched")
    parser.add_argument("--only", default="parse,nothing-new", help="sections to run")
    args = parser.parse_args()
    only = set(args.only.split(","))
    section: list[str] = []
    if "parse" in only:
        counts = [int(c) for c in args.counts.split(",")]
        layouts = [int(s) for s in args.shards.split(",")]
        parse, live_rows = dag_parse(args.server, counts, layouts, args.live, args.local, args.window)
        section += parse_section(parse, live_rows, args.window)
    if "nothing-new" in only:
        section += nothing_new_section(nothing_new(args.server))
    write_sections(section)


def dag_parse(
    server: str, counts: list[int], layouts: list[int], live_count: int, local_count: int, window: float
) -> tuple[list[ParseRow], list[LiveRow]]:
    """Parse times at each count and layout; live runs at `live_count` (one file vs the most files,
    Airflow's default interval) and at `local_count` (`connect airflow up`'s 5 s interval)."""
    parse: list[ParseRow] = []
    live_rows: list[LiveRow] = []
    with tempfile.TemporaryDirectory() as pycache:
        for count in counts:
            with database(server, "bench_parse") as url, tempfile.TemporaryDirectory() as tmp:
                register(url, count, Path(tmp))
                parse += parse_times(url, count, layouts, Path(tmp), Path(pycache))
                if count == live_count:
                    for shards in (1, max(layouts)):
                        live_rows.append(
                            live(server, url, count, shards, 30, preload=True, window=window, pycache=Path(pycache))
                        )
                        print("live", live_rows[-1], flush=True)
        if local_count:
            with database(server, "bench_parse") as url, tempfile.TemporaryDirectory() as tmp:
                register(url, local_count, Path(tmp))
                for shards, preload in ((1, False), (max(layouts), False), (max(layouts), True)):
                    live_rows.append(
                        live(server, url, local_count, shards, 5, preload=preload, window=window, pycache=Path(pycache))
                    )
                    print("live", live_rows[-1], flush=True)
    return parse, live_rows


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def parse_section(parse: list[ParseRow], live_rows: list[LiveRow], window: float) -> list[str]:
    def live_line(r: LiveRow) -> str:
        loops = f"{_p(r.loop_ms, 0.5):.0f} / {_p(r.loop_ms, 0.95):.0f} / {max(r.loop_ms):.0f}" if r.loop_ms else "-"
        first = f"{r.first_pass:.0f}" if r.first_pass is not None else r.outcome
        slowest = f"{r.slowest_file:.2f}" if r.slowest_file is not None else "-"
        return (
            f"| {r.connectors:,} | {r.files} | {r.interval} | {'set' if r.preloaded else '-'} | {first} | "
            f"{slowest} | {r.cores:.2f} | {r.rss_mb:.0f} | {loops} | {r.dag_runs:,} |"
        )

    return [
        "## DAG parse: the DAG files by registered connectors",
        "",
        "Reproduce: `.venv/bin/python bench/airflow_bench.py --only parse`. Connectors: "
        f"`CounterSource` (examples/plugins) with {TASKS} tasks each, stored through the store (no per-create "
        "rebalance, so tasks have no Airflow pool). A file is parsed as the dag-processor parses it "
        "(`_parse_file`: DagBag + serialization, in a fresh process with Airflow imported), files one after "
        "another. `DAG files`: `CONNECT_AIRFLOW_DAG_SHARDS`. `all files s`: every file once, what a pass costs "
        "the dag-processor before its database writes; `slowest file s`: best of 2; `pre-imported s`: that file "
        "with the DAG factory already imported, as when `[core] might_contain_dag_callable` is "
        "`connect_core.airflow.dag_factory.might_contain_dag`; `peak RSS`: the largest parse process. Goal: a "
        "file < 3 s at 5,000 connectors. Airflow's limits per file: 30 s for its import "
        "(`dagbag_import_timeout`: the DAG factory's work, not the serialization) and 50 s for the whole parse "
        "(`dag_file_processor_timeout`).",
        "",
        "| connectors | DAG files | DAGs | all files s | slowest file s | pre-imported s | peak RSS MB |",
        "|---:|---:|---:|---:|---:|---:|---:|",
        *[
            f"| {r.connectors:,} | {r.files} | {r.dags:,} | {r.total:.1f} | {r.slowest:.2f} | "
            f"{'-' if r.preloaded is None else f'{r.preloaded:.2f}'} | {r.rss_mb:.0f} |"
            for r in parse
        ],
        "",
        "Live, same command: `airflow dag-processor` (2 parsing processes) on a fresh Airflow database, then "
        f"`airflow scheduler` beside it for {window:.0f} s (the default pool has no slot: no task runs). `all "
        "DAGs in s`: from the dag-processor's start until every DAG is active in Airflow's database; `slowest "
        "file s`: the longest parse Airflow recorded (`dag.last_parse_duration`); `dag-processor cores`: its "
        "CPU seconds per second (parses included) while the scheduler runs; `peak RSS`: its largest process; "
        '`scheduler loop ms`: p50 / p95 / max of "Ran scheduling loop" while watched. `interval`: '
        "`min_file_process_interval` (Airflow's default 30 s; `connect airflow up` sets 5 s). `DAG runs`: those "
        "the scheduler created meanwhile, at most `max_dagruns_to_create_per_loop` (10) a loop.",
        "",
        "| connectors | DAG files | interval s | might_contain_dag | all DAGs in s | slowest file s | "
        "dag-processor cores | peak RSS MB | scheduler loop ms | DAG runs |",
        "|---:|---:|---:|---|---|---:|---:|---:|---|---:|",
        *[live_line(r) for r in live_rows],
        "",
    ]


def nothing_new_section(idle: list[tuple[str, float, float]]) -> list[str]:
    return [
        "## nothing new: one Airflow task of a file source whose file has not grown",
        "",
        "Same command. `execute s`: the operator's own work (in a fresh process, modules imported), with the",
        "pre-check answering without Spark vs a full spark-submit that reads nothing. `task instance s`: the",
        "duration Airflow records for the task in `airflow dags test`, which adds Airflow's per-task start-up",
        "(task process, DAG file parse) on top.",
        "",
        "| task | execute s | task instance s |",
        "|---|---:|---:|",
        *[f"| {label} | {e:.2f} | {s:.2f} |" for label, e, s in idle],
        "",
    ]


if __name__ == "__main__":
    started = time.monotonic()
    main()
    print(f"total {time.monotonic() - started:.0f} s")
