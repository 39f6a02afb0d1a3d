"""Warm Spark pool (issue 18): PostgreSQL → PostgreSQL, a full sync then incremental rounds, classic vs warm vs dlt.

    .venv/bin/python bench/warm_bench.py [--rows 1000000] [--rounds 3] [--only connect,connect-warm,dlt]
                                         [--skip-airflow] [--server-memory 1g] [--keep]

The source is `bench_source.bench_events` of jdbc_bench (`_jdbc_data.py`), regenerated unless an
untouched table of the same size is there. Side by side, one run each, each into a fresh table of
`bench_target`, timed from the parent as the wall time of the whole command:

* **connect**: the classic runtime, the default `local` pool: `connect run src sink` is one
  spark-submit (JVM + SparkSession start-up each time) running the source task, then the sink task
  (upsert on `id`). Metadata database `bench_connect_meta_pg_classic`.
* **connect-warm**: the same connectors in a metadata database of their own
  (`bench_connect_meta_pg_warm`), all tasks on a warm pool: `connect pools start warm --capacity 4`
  (a Spark Connect server, started and warmed before any timing; its start-up and warm-up seconds
  are reported apart), then `connect pools remove local` and `connect rebalance`. `connect run src
  sink` is then a client of the server (the pool's worker runs it, if the pool has one), no spark-submit.
* **dlt**: as in jdbc_bench (`sql_table`, connectorx, merge on `id`, parquet through ADBC; cursor
  on `updated_at`), in the venv of `_dlt_env.py`.

Phases: the full sync of `--rows` rows, then `--rounds` incremental rounds, each after 10,000 rows
(`--changed`) got a new `label` and an `updated_at` later than any before. After every run the
target's checksum must equal the source's ("verified"). Meanwhile a thread samples the warm server's
RSS (its JVM and every descendant, e.g. Python workers) every 0.2 s.

Then (unless `--skip-airflow`) a live Airflow (`connect airflow up` on the warm tool's metadata
database and home) runs one incremental sync as Airflow does: 10,000 rows change, the source
connector's DAG is triggered over Airflow's REST API v2, its Asset event starts the sink's DAG, and
each task instance's `duration` is read back from the REST API. Once on the warm pool, once on the
classic local pool (re-added, `warm` removed from the assignment, rebalanced).

Finally `connect pools stop warm` (always), the bench's metadata and Airflow databases and its
target schemas are dropped (unless `--keep`). Writes three `## warm Spark pool: …` sections of
bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _connect_jdbc as connect
import _jdbc_data as data
import jdbc_bench
from _dlt_env import dlt_python

from connect_core.runtime.execution.worker_client import worker_files

KIND = "pg"
TOOLS = ("connect", "connect-warm", "dlt", "copy")
VARIANT = {"connect": "_classic", "connect-warm": "_warm"}
POOL = "warm"
AIRFLOW_DB = "bench_warm_airflow"
# Round k's rows get updated_at = ROUND_EPOCH + k hours + id µs: later than every earlier value
# (generated ones end in 2020, jdbc_bench's touches in 2024) and in the past.
ROUND_EPOCH = "2025-01-01 00:00:00"
SAMPLE_S = 0.2
THIS = Path(__file__).resolve()


def target_table(tool: str) -> str:
    if tool in ("dlt", "copy"):
        return jdbc_bench.target_table(tool, KIND)  # the dlt job's dataset name, the COPY pipe's table
    return f"warm_bench_{tool.replace('-', '_')}.{data.TABLE}"


def connector_names(tool: str) -> tuple[str, str]:
    return connect.names(KIND, VARIANT[tool], own_names=True)


def cli(tool: str, *args: str) -> str:
    return connect._cli(KIND, *args, variant=VARIANT[tool])


def median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


# --- source changes ------------------------------------------------------------------------------


def change_rows(round_no: int, rows: int, changed: int) -> int:
    """Round `round_no`: `changed` rows (id % every = round_no % every) get a new label and a new
    updated_at, later than any before; deterministic, so every tool sees the same change."""
    every = max(1, rows // changed)
    with data.pg(data.SOURCE_DB) as conn, conn.cursor() as cur:
        cur.execute(
            f"UPDATE {data.TABLE} SET label = 'r{round_no} ' || id, updated_at = timestamp '{ROUND_EPOCH}'"
            f" + {round_no} * interval '1 hour' + id * interval '1 microsecond' WHERE id % {every} = {round_no % every}"
        )
        count = int(cur.rowcount)
        cur.execute(f"VACUUM ANALYZE {data.TABLE}")  # as jdbc_bench's touch: no tool pays for hint bits
    return count


def prepare_source(rows: int) -> data.Checksum:
    data.ensure_pg_database(data.TARGET_DB)
    if data.source_state(KIND) == (rows, False):
        print(f"source {KIND}: reusing {rows:,} untouched rows", flush=True)
    else:
        print(f"source {KIND}: generated {rows:,} rows in {data.create_source(KIND, rows):.1f} s", flush=True)
    return data.source_checksum(KIND)


def reset_target(tool: str) -> None:
    schema = target_table(tool).split(".")[0]
    with data.pg(data.TARGET_DB) as conn, conn.cursor() as cur:
        cur.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        cur.execute(f"DROP SCHEMA IF EXISTS {schema}_staging CASCADE")
        cur.execute(f"CREATE SCHEMA {schema}")
        if tool != "dlt":  # the sink table as a user defines it (dlt creates its own)
            cur.execute(data.pg_create_table_sql(target_table(tool)))


def drop_bench_databases(tools: list[str]) -> None:
    with data.pg(data.TARGET_DB) as conn, conn.cursor() as cur:
        for tool in tools:
            schema = target_table(tool).split(".")[0]
            cur.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
            cur.execute(f"DROP SCHEMA IF EXISTS {schema}_staging CASCADE")
        names = [connector_names(t)[1] for t in tools if t in VARIANT]
        cur.execute("DELETE FROM connect_sink_offsets WHERE connector = ANY(%s)", (names,))
    with data.pg("postgres") as conn, conn.cursor() as cur:
        for tool in tools:
            if tool in VARIANT:
                cur.execute(f"DROP DATABASE IF EXISTS {connect._meta_db(KIND, VARIANT[tool])} WITH (FORCE)")
        cur.execute(f"DROP DATABASE IF EXISTS {AIRFLOW_DB} WITH (FORCE)")
    for tool in tools:
        if tool in VARIANT:
            shutil.rmtree(connect._home(KIND, VARIANT[tool]), ignore_errors=True)


# --- the warm pool's server: start, memory -------------------------------------------------------


@dataclass
class PoolStart:
    pid: int
    wall_s: float
    started_s: float | None
    warmed_s: float | None
    xmx: str
    memory_option: str | None
    worker_pid: int | None  # the pool's worker process, if `connect pools start` starts one
    worker_found: bool  # whether `connect run` with the bench's environment finds it (same store)


def pools_start_has_memory_option() -> bool:
    proc = subprocess.run(
        [sys.executable, "-m", "connect_core.cli", "pools", "start", "--help"],
        env={**os.environ, "COLUMNS": "200"},
        capture_output=True,
        text=True,
        check=False,
    )
    return "--memory" in proc.stdout


def start_pool(server_memory: str) -> PoolStart:
    """`connect pools start warm --capacity 4` (+ `--memory` if the CLI has it), then all tasks onto it."""
    args = ["pools", "start", POOL, "--capacity", "4"]
    memory = server_memory if pools_start_has_memory_option() else None
    if memory:
        args += ["--memory", memory]
    print(f"connect-warm: connect {' '.join(args)}", flush=True)
    started = time.perf_counter()
    out = " ".join(cli("connect-warm", *args).split())
    wall = time.perf_counter() - started
    print(f"  {out}", flush=True)
    found = re.search(r"up in ([\d.]+) s, warmed in ([\d.]+) s", out)
    print("  " + " ".join(cli("connect-warm", "pools", "remove", "local", "--missing-ok").split()), flush=True)
    print("  " + " ".join(cli("connect-warm", "rebalance").split()), flush=True)
    files = connect._home(KIND, VARIANT["connect-warm"]) / "pools"
    pid = int(json.loads((files / f"{POOL}.json").read_text())["pid"])
    worker = worker_files(files.parent, POOL)[1]
    worker_pid = int(json.loads(worker.read_text())["pid"]) if worker.exists() else None
    return PoolStart(
        pid,
        wall,
        float(found.group(1)) if found else None,
        float(found.group(2)) if found else None,
        jvm_xmx(pid),
        memory,
        worker_pid,
        worker_pid is not None and cli_finds_worker(),
    )


def cli_finds_worker() -> bool:
    """Whether `connect run` in the warm tool's environment hands its runs to the pool's worker
    (what its `_run_on_worker` asks: a live worker socket for the same metadata store)."""
    from connect_core.runtime.execution.worker_client import find_worker, fingerprint
    from connect_core.runtime.settings import Settings

    env = connect._env(KIND, VARIANT["connect-warm"])
    settings = Settings(database_url=env["CONNECT_DATABASE_URL"], home=env["CONNECT_HOME"])
    return find_worker(settings.home, fingerprint(settings)) is not None


def _children() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat.rpartition(")")[2].split()[1])  # the comm may hold spaces and parens
        children.setdefault(ppid, []).append(int(entry.name))
    return children


def process_tree(pid: int) -> list[int]:
    children, tree, todo = _children(), [], [pid]
    while todo:
        p = todo.pop()
        tree.append(p)
        todo += children.get(p, [])
    return tree


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def rss_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def jvm_pid(pid: int) -> int | None:
    """The server's JVM: the pid itself (spark-submit execs java) or its first java descendant."""
    return next((p for p in process_tree(pid) if _comm(p) == "java"), None)


def jvm_xmx(pid: int) -> str:
    jvm = jvm_pid(pid)
    if jvm is None:
        return "no JVM found"
    try:
        args = Path(f"/proc/{jvm}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return "unreadable"
    xmx = [a.decode() for a in args if a.startswith(b"-Xmx")]
    return xmx[-1].removeprefix("-Xmx") if xmx else "not set (JVM default: 1/4 of RAM)"


@dataclass(frozen=True)
class Sample:
    phase: str
    tree_kib: int  # the server's JVM and all its descendants
    jvm_kib: int  # the JVM alone
    processes: int  # in the server's tree
    worker_kib: int  # the pool's worker process and its descendants (0 if it has none)


class RssSampler(threading.Thread):
    """Every 0.2 s: the RSS of the server's process tree (all of it, and its JVM alone) and of the
    pool's worker process tree, tagged with the phase the bench is in."""

    def __init__(self, pid: int, worker_pid: int | None) -> None:
        super().__init__(daemon=True, name="rss-sampler")
        self.pid, self.worker_pid = pid, worker_pid
        self.phase = "idle after start"
        self.samples: list[Sample] = []
        self._stop_event = threading.Event()

    def run(self) -> None:
        while not self._stop_event.is_set():
            tree = process_tree(self.pid)
            sizes = {p: rss_kib(p) for p in tree}
            jvm = next((p for p in tree if _comm(p) == "java"), None)
            worker = sum(rss_kib(p) for p in process_tree(self.worker_pid)) if self.worker_pid else 0
            self.samples.append(
                Sample(self.phase, sum(sizes.values()), sizes.get(jvm, 0) if jvm else 0, len(tree), worker)
            )
            self._stop_event.wait(SAMPLE_S)

    def stop(self) -> None:
        self._stop_event.set()
        self.join(timeout=5)

    def of(self, phase: str) -> list[Sample]:
        return [s for s in self.samples if s.phase == phase]


# --- the syncs -----------------------------------------------------------------------------------


@dataclass
class ToolResult:
    tool: str
    full_s: float | None = None
    rounds_s: list[float | None] = field(default_factory=list)
    verified: list[bool] = field(default_factory=list)
    runs: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # phase → connect's JSON runs
    note: str = ""

    @property
    def median_s(self) -> float | None:
        return median([s for s in self.rounds_s if s is not None])

    @property
    def ok(self) -> str:
        if not self.verified:
            return "—"
        return "yes" if all(self.verified) else "**no**"


def run_tool(tool: str, pipelines: Path, *, incremental: bool) -> tuple[float, list[dict[str, Any]]]:
    if tool == "dlt":
        return jdbc_bench.run_dlt(KIND, jdbc_bench.DltSetup(), pipelines, incremental=incremental), []
    if tool == "copy":  # no incremental mode: a round resyncs everything
        return jdbc_bench.run_copy(KIND, truncate=incremental), []
    return connect.sync_runs(KIND, VARIANT[tool], own_names=True)


def attempt(
    result: ToolResult, phase: str, run: Callable[[], tuple[float, list[dict[str, Any]]]], expected: data.Checksum
) -> float | None:
    """One timed run and its verification; a failure is noted, not fatal."""
    loads.append(os.getloadavg()[0])
    try:
        seconds, runs = run()
    except RuntimeError as exc:
        print(exc, file=sys.stderr)
        result.note += f"{phase} failed: {str(exc).strip().splitlines()[-1][:200]}; "
        result.verified.append(False)
        return None
    got = data.target_checksum(target_table(result.tool))
    ok = got == expected
    if not ok:
        result.note += f"{phase}: target {got} ≠ source {expected}; "
    result.verified.append(ok)
    result.runs[phase] = runs
    pools = sorted({r.get("pool", "") for r in runs})
    where = f" on pool {','.join(pools)}" if pools else ""
    print(f"  {result.tool:13} {phase:9} {seconds:7.1f} s{where}  verified={ok}", flush=True)
    return seconds


loads: list[float] = []


# --- live Airflow --------------------------------------------------------------------------------


def url_spelling_splits_fingerprint() -> bool:
    """Whether the worker's fingerprint of the warm tool's URL differs from that of the same URL as
    `connect airflow up` hands it to Airflow (normalized to `postgresql+psycopg2://`)."""
    from connect_core.runtime.execution.worker_client import fingerprint
    from connect_core.runtime.settings import Settings
    from connect_core.runtime.store.db import normalize_url

    env = connect._env(KIND, VARIANT["connect-warm"])
    url, home = env["CONNECT_DATABASE_URL"], env["CONNECT_HOME"]
    as_configured = fingerprint(Settings(database_url=url, home=home))
    return as_configured != fingerprint(Settings(database_url=normalize_url(url), home=home))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Api:
    """Airflow's REST API v2 with a token of the platform's admin (as tests/airflow/test_platform.py)."""

    def __init__(self, base: str, password: str) -> None:
        import httpx

        self.httpx = httpx
        resp = httpx.post(f"{base}/auth/token", json={"username": "admin", "password": password}, timeout=30)
        resp.raise_for_status()
        self.base, self.headers = base, {"Authorization": f"Bearer {resp.json()['access_token']}"}

    def get(self, path: str) -> Any:
        resp = self.httpx.get(f"{self.base}/api/v2{path}", headers=self.headers, timeout=30)
        resp.raise_for_status()
        return resp.json()

    def post(self, path: str, body: dict[str, Any]) -> Any:
        resp = self.httpx.post(f"{self.base}/api/v2{path}", headers=self.headers, json=body, timeout=30)
        if resp.status_code != 200:
            raise RuntimeError(f"POST {path}: {resp.status_code} {resp.text[:500]}")
        return resp.json()

    def dag_ids(self) -> set[str]:
        return {d["dag_id"] for d in self.get("/dags?limit=100")["dags"]}

    def runs(self, dag_id: str) -> list[dict[str, Any]]:
        return list(self.get(f"/dags/{dag_id}/dagRuns?limit=100")["dag_runs"])

    def task_pools(self, dag_id: str) -> set[str]:
        return {t.get("pool") for t in self.get(f"/dags/{dag_id}/tasks")["tasks"]}

    def task_instances(self, dag_id: str, run_id: str) -> list[dict[str, Any]]:
        return list(self.get(f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances")["task_instances"])

    def how_it_ran(self, dag_id: str, run_id: str, ti: dict[str, Any]) -> str:
        """From the task's log: handed to the pool's worker, a spark-submit, or a plain client process."""
        try:
            log = json.dumps(
                self.get(
                    f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{ti['task_id']}/logs/{ti['try_number']}"
                    "?full_content=true"
                )
            )
        except Exception as exc:
            return f"log unreadable ({type(exc).__name__})"
        if "goes to the worker" in log:
            return "pool's worker"
        if "Spark-Submit cmd" in log:
            return "spark-submit"
        if "runs on Spark pool" in log:
            return "client process"
        return "?"


def wait_for(what: str, check: Callable[[], Any], timeout: float, every: float = 1.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with suppress(Exception):  # the API may answer 5xx while a component restarts
            value = check()
            if value:
                return value
        time.sleep(every)
    raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")


@contextmanager
def live_airflow(env: dict[str, str], home: Path) -> Iterator[tuple[Api, float]]:
    """`connect airflow up` as a subprocess (its own process group); yields the API client and the
    seconds until it printed its address; SIGTERM to its group at the end."""
    port = _free_port()
    log_path = home / "airflow-up.log"
    command = [
        sys.executable,
        "-m",
        "connect_core.cli",
        "airflow",
        "up",
        "--port",
        str(port),
        "--airflow-db",
        AIRFLOW_DB,
    ]
    print(f"airflow: {' '.join(command[1:])} (log {log_path})", flush=True)
    started = time.perf_counter()
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            command, cwd=home, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        wait_for(
            "`connect airflow up` to print its address",
            lambda: proc.poll() is not None or "Airflow UI" in log_path.read_text(errors="replace"),
            360,
        )
        if proc.poll() is not None:
            raise RuntimeError(f"`connect airflow up` exited {proc.returncode}:\n{log_path.read_text()[-3000:]}")
        up_s = time.perf_counter() - started
        password = (home / "airflow" / "admin-password").read_text().strip()
        yield Api(f"http://127.0.0.1:{port}", password), up_s
    finally:
        with suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=90)
        except subprocess.TimeoutExpired:
            with suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        print(f"airflow: stopped (exit {proc.returncode})", flush=True)


@dataclass
class AirflowRun:
    pool: str
    changed: int
    source_task_s: float | None = None
    sink_task_s: float | None = None
    source_run_s: float | None = None  # the DAG run's end - start
    sink_run_s: float | None = None
    queued_to_sink_end_s: float | None = None  # source run queued → sink run ended (Airflow's clock)
    trigger_to_sink_seen_s: float | None = None  # this bench's clock: POST → sink run seen finished
    states: str = ""
    verified: bool | None = None
    note: str = ""


def _ts(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value.replace("Z", "+00:00")) if value else None


def _span(start: str | None, end: str | None) -> float | None:
    a, b = _ts(start), _ts(end)
    return (b - a).total_seconds() if a and b else None


def airflow_round(api: Api, pool: str, round_no: int, rows: int, changed: int) -> AirflowRun:
    """Change rows, trigger the source DAG, wait for it and the sink DAG its Asset event starts;
    the task instances' durations as Airflow's REST API reports them."""
    source, sink = (f"connect__{n}" for n in connector_names("connect-warm"))
    wanted_pool = f"connect_{pool}"
    wait_for(f"the DAGs {source}, {sink}", lambda: {source, sink} <= api.dag_ids(), 180)
    wait_for(
        f"the DAGs' tasks on Airflow pool {wanted_pool} (DAG file re-parsed after the rebalance)",
        lambda: api.task_pools(source) == {wanted_pool} and api.task_pools(sink) == {wanted_pool},
        180,
    )
    for dag in (source, sink):
        if api.get(f"/dags/{dag}")["is_paused"]:
            raise RuntimeError(f"{dag} is paused")
        wait_for(
            f"no active run of {dag}",
            lambda dag=dag: not [r for r in api.runs(dag) if r["state"] in ("queued", "running")],
            600,
        )
    sink_before = {r["dag_run_id"] for r in api.runs(sink)}
    result = AirflowRun(pool, change_rows(round_no, rows, changed))
    expected = data.source_checksum(KIND)
    print(f"airflow/{pool}: changed {result.changed} rows; triggering {source}", flush=True)
    posted = time.perf_counter()
    run = api.post(f"/dags/{source}/dagRuns", {"logical_date": None})
    done = ("success", "failed", "upstream_failed")
    src_run = wait_for(
        f"the triggered run of {source}",
        lambda: next(
            (r for r in api.runs(source) if r["dag_run_id"] == run["dag_run_id"] and r["state"] in done), None
        ),
        900,
    )
    sink_run = None
    if src_run["state"] == "success":
        sink_run = wait_for(
            f"the Asset-triggered run of {sink}",
            lambda: next(
                (r for r in api.runs(sink) if r["dag_run_id"] not in sink_before and r["state"] in done), None
            ),
            900,
        )
    result.trigger_to_sink_seen_s = time.perf_counter() - posted
    states = []
    for dag, dag_run, kind in ((source, src_run, "source"), (sink, sink_run, "sink")):
        if dag_run is None:
            states.append(f"{kind} run: none")
            continue
        tis = api.task_instances(dag, dag_run["dag_run_id"])
        durations = [ti.get("duration") for ti in tis if ti.get("duration") is not None]
        hows = sorted({api.how_it_ran(dag, dag_run["dag_run_id"], ti) for ti in tis})
        for ti in tis:
            print(
                f"  {dag} {ti['task_id']}: state={ti['state']} duration={ti.get('duration')} pool={ti.get('pool')}"
                f" try={ti.get('try_number')} run_type={dag_run.get('run_type')}",
                flush=True,
            )
        states.append(f"{kind} {dag_run['state']} ({dag_run.get('run_type')}; {', '.join(hows)})")
        seconds = sum(durations) if durations else None
        run_s = _span(dag_run.get("start_date"), dag_run.get("end_date"))
        if kind == "source":
            result.source_task_s, result.source_run_s = seconds, run_s
        else:
            result.sink_task_s, result.sink_run_s = seconds, run_s
    if sink_run is not None:
        result.queued_to_sink_end_s = _span(src_run.get("queued_at"), sink_run.get("end_date"))
    result.states = ", ".join(states)
    got = data.target_checksum(target_table("connect-warm"))
    result.verified = got == expected
    if not result.verified:
        result.note = f"target {got} ≠ source {expected}"
    print(f"airflow/{pool}: {result}", flush=True)
    return result


def airflow_phase(
    rows: int, changed: int, first_round: int, sampler: RssSampler | None
) -> tuple[list[AirflowRun], float | None, str]:
    """Both pools' Airflow rounds on one live platform; (runs, seconds to start it, note)."""
    variant = VARIANT["connect-warm"]
    env = {k: v for k, v in connect._env(KIND, variant).items() if not k.startswith("AIRFLOW")}
    home = connect._home(KIND, variant)
    runs: list[AirflowRun] = []
    with data.pg("postgres") as conn, conn.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS {AIRFLOW_DB} WITH (FORCE)")
    try:
        with live_airflow(env, home) as (api, up_s):
            print(f"airflow: up in {up_s:.0f} s", flush=True)
            if sampler:
                sampler.phase = "airflow"
            try:
                runs.append(airflow_round(api, POOL, first_round, rows, changed))
            finally:
                if sampler:
                    sampler.phase = "between"
            # The classic pool in the same metadata store: `local` back, `warm` out of the assignment.
            for args in (
                ("pools", "add", "local", "--master", "local[*]", "--capacity", "2"),
                ("pools", "remove", POOL),
                ("rebalance",),
            ):
                print("  " + " ".join(cli("connect-warm", *args).split()), flush=True)
            runs.append(airflow_round(api, "local", first_round + 1, rows, changed))
        return runs, up_s, ""
    except Exception as exc:  # a broken platform leaves the sync results standing
        traceback.print_exc()
        return runs, None, f"{type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}"


# --- report --------------------------------------------------------------------------------------


def _s(value: float | None, digits: int = 1) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def _ratio(slow: float | None, fast: float | None) -> str:
    return f"{slow / fast:.1f}x" if slow and fast else "—"


def _mib(kib: float | None) -> str:
    return "—" if kib is None else f"{kib / 1024:,.0f}"


@dataclass
class Report:
    rows: int
    rounds: int
    changed: int
    load_before: float
    results: dict[str, ToolResult]
    pool: PoolStart | None
    sampler: RssSampler | None
    airflow: list[AirflowRun]
    airflow_up_s: float | None
    airflow_note: str
    skip_airflow: bool
    command: str

    @property
    def warm_how(self) -> str:
        if self.pool and self.pool.worker_found:
            return (
                "the command hands both runs to the pool's worker, a warm Python process beside the server"
                " (`connect pools start` starts it) that runs them as the server's clients: no spark-submit,"
                " no JVM or Python start-up per run"
            )
        return "the command is a plain Python client of the server, no spark-submit"

    @property
    def tool_descriptions(self) -> dict[str, str]:
        return {
            "connect": "connect: the classic runtime, `connect run src sink` as one spark-submit on the default"
            " `local` pool (`local[*]`)",
            "connect-warm": "connect-warm: the same command with both tasks on a warm pool, `connect pools start"
            " warm --capacity 4` (a Spark Connect server, started and warmed before the timing, see below),"
            f" `local` removed, rebalanced: {self.warm_how}",
            "dlt": "dlt: `sql_table` with connectorx, merge on `id`, parquet loaded through ADBC, incremental on"
            " `updated_at` (in a venv of its own, `bench/_dlt_env.py`)",
            "copy": "copy: `psql \\copy … TO STDOUT | psql \\copy … FROM STDIN` into the table with its primary key"
            " (no incremental mode: each round resyncs everything)",
        }

    def sync_section(self) -> list[str]:
        r = self.results
        lines = [
            f"## warm Spark pool: PostgreSQL → PostgreSQL, {self.rows:,} rows, full sync + {self.rounds} incremental"
            f" round{'s' if self.rounds != 1 else ''} of {self.changed:,} rows",
            "",
            f"Reproduce: `{self.command}`. One run of each tool on this 2-core machine (1-minute load average"
            f" {self.load_before:.1f} before the runs"
            + (f", {min(loads):.1f} to {max(loads):.1f} before each run" if loads else "")
            + "), each into a fresh table of `bench_target`, timed from the parent as the wall time of the"
            " whole command (interpreter, JVM / client start-up included). "
            + "; ".join(self.tool_descriptions[t] for t in r)
            + f". Each round first changes {self.changed:,} rows (`label`, and an `updated_at` later than any"
            " before), then every tool syncs incrementally. Verified: the target's row count and exact"
            " checksum equal the source's after every run.",
        ]
        if self.pool:
            lines.append("")
            lines.append(
                f"Warm pool set-up, not in the times below: `connect pools start` took {_s(self.pool.wall_s)} s"
                f" (server up {_s(self.pool.started_s)} s + warm-up {_s(self.pool.warmed_s)} s, as it reports)."
            )
        head = " | ".join(f"round {i + 1} s" for i in range(self.rounds))
        lines += [
            "",
            f"| tool | full sync s | rows/s | {head} | median incremental s | verified |",
            "|---|---:|---:|" + "---:|" * self.rounds + "---:|---|",
        ]
        for t in r.values():
            rate = f"{self.rows / t.full_s:,.0f}" if t.full_s else "—"
            rounds = " | ".join(_s(t.rounds_s[i] if i < len(t.rounds_s) else None) for i in range(self.rounds))
            note = t.note.rstrip("; ")
            lines.append(
                f"| {t.tool} | {_s(t.full_s)} | {rate} | {rounds} | {_s(t.median_s)} | {t.ok}"
                + (f" ({note})" if note else "")
                + " |"
            )
        warm, classic, dlt = r.get("connect-warm"), r.get("connect"), r.get("dlt")
        ratios = []
        if warm and classic:
            ratios.append(
                f"classic ÷ warm: full sync {_ratio(classic.full_s, warm.full_s)}, median incremental"
                f" {_ratio(classic.median_s, warm.median_s)}"
            )
        if warm and dlt:
            ratios.append(
                f"warm ÷ dlt: full sync {_ratio(warm.full_s, dlt.full_s)}, median incremental"
                f" {_ratio(warm.median_s, dlt.median_s)}"
            )
        copy = r.get("copy")
        if warm and copy:
            ratios.append(f"warm ÷ copy: full sync {_ratio(warm.full_s, copy.full_s)}")
        if ratios:
            lines += ["", "From this one run: " + "; ".join(ratios) + " (above 1x = the first is slower)."]
        runs_table = self._runs_table()
        if runs_table:
            lines += [
                "",
                "Inside connect's command (`connect run --output json`): each task run's `run_s` (its own work"
                " and commit, in the Spark application or session) and the `wall_s` the command reports for it;"
                " the rest of the command's wall time is its start-up (interpreter, imports, metadata,"
                " spark-submit + JVM + SparkSession, or the Spark Connect session).",
                "",
                "| tool | phase | source run_s | sink run_s | source wall_s | sink wall_s | command s |",
                "|---|---|---:|---:|---:|---:|---:|",
                *runs_table,
            ]
        return lines

    def _runs_table(self) -> list[str]:
        rows = []
        for t in self.results.values():
            for phase, runs in t.runs.items():
                if not runs:
                    continue
                by = {run["connector"].split("_")[0]: run for run in runs}
                src, snk = by.get("src", {}), by.get("sink", {})
                seconds = t.full_s if phase == "full" else t.rounds_s[int(phase[1:]) - 1]
                rows.append(
                    f"| {t.tool} | {phase} | {_s(src.get('timings', {}).get('run_s'), 2)}"
                    f" | {_s(snk.get('timings', {}).get('run_s'), 2)} | {_s(src.get('wall_s'), 2)}"
                    f" | {_s(snk.get('wall_s'), 2)} | {_s(seconds)} |"
                )
        return rows

    def memory_section(self) -> list[str]:
        if not (self.pool and self.sampler):
            return []
        lines = [
            f"## warm Spark pool: memory of the server during the {self.rows:,}-row sync",
            "",
            f"Same run (`{self.command}`). RSS of the warm pool's server: the JVM of the pid in"
            " `$CONNECT_HOME/pools/warm.json` and all its descendants (the Python workers), summed from"
            f" `/proc/<pid>/status` VmRSS every {SAMPLE_S} s by a thread of the bench. JVM heap limit in"
            f" effect: `-Xmx{self.pool.xmx}` (from the JVM's command line)"
            + (
                f", started with `--memory {self.pool.memory_option}`."
                if self.pool.memory_option
                else "; `connect pools start` has no `--memory` option (Spark's default driver memory)."
            ),
        ]
        if self.pool.worker_pid:
            lines[-1] += (
                " `connect pools start` also starts the pool's worker (a Python process beside the server that"
                " runs `connect run`'s and Airflow's tasks as the server's clients, pid in"
                " `$CONNECT_HOME/pools/warm+worker.json`): its RSS (with any descendants) is the `worker` column,"
                " not part of the server's tree."
            )
        lines += [
            "",
            "| phase | server RSS MiB (whole tree) | of which JVM MiB | processes in the tree | worker RSS MiB"
            " | server + worker MiB | samples |",
            "|---|---:|---:|---:|---:|---:|---:|",
        ]
        phases = [
            ("idle after start", "idle after start (median)", statistics.median),
            ("full", "peak during the full sync", max),
            ("incremental", f"peak during the {self.rounds} incremental rounds", max),
            ("idle at end", "idle at the end (median)", statistics.median),
            ("airflow", "peak during the Airflow task on the warm pool", max),
        ]
        for phase, label, pick in phases:
            samples = self.sampler.of(phase)
            if not samples:
                continue
            worker = _mib(pick([s.worker_kib for s in samples])) if self.pool.worker_pid else "—"
            lines.append(
                f"| {label} | {_mib(pick([s.tree_kib for s in samples]))} | {_mib(pick([s.jvm_kib for s in samples]))}"
                f" | {max(s.processes for s in samples)} | {worker}"
                f" | {_mib(pick([s.tree_kib + s.worker_kib for s in samples]))} | {len(samples)} |"
            )
        return lines

    def airflow_section(self) -> list[str]:
        if self.skip_airflow or "connect-warm" not in self.results:
            return []
        lines = [
            f"## warm Spark pool: one Airflow task of the incremental sync ({self.rows:,}-row table, live Airflow)",
            "",
            f"Same run (`{self.command}`). A live local platform as `connect airflow up` starts it"
            " (api-server, scheduler, dag-processor, triggerer; LocalExecutor) on connect-warm's metadata"
            f" database and home"
            + (f", up in {self.airflow_up_s:.0f} s" if self.airflow_up_s else "")
            + f". Each row: {self.changed:,} rows change, the source connector's DAG is triggered over"
            " Airflow's REST API v2 (`POST /api/v2/dags/<dag>/dagRuns`), its Asset event starts the sink"
            " connector's DAG; `task s` is the task instance's `duration` as the REST API returns it"
            " (Airflow's task start-up and the operator's own work: precheck, then the run — on the warm pool"
            " handed to the pool's worker if the operator finds it, else a plain Python client process of"
            " the server; on the classic pool a spark-submit; the `runs` column says which, from the task's"
            " log); `queued → sink done` runs"
            " from the source run's `queued_at` to the sink run's `end_date`. First on the warm pool, then on"
            " the classic `local` pool (re-added, `warm` removed, rebalanced) of the same metadata store."
            " The source connector's schedule is `none` (trigger-only) so no scheduled run interferes.",
        ]
        if self.airflow_note:
            lines += ["", f"**Not complete:** {self.airflow_note}"]
        warm_runs = [a for a in self.airflow if a.pool == POOL]
        if self.pool and self.pool.worker_pid and warm_runs and "pool's worker" not in warm_runs[0].states:
            why = " (see the task logs)"
            if url_spelling_splits_fingerprint():
                why = (
                    ": the operator looks the worker up by a fingerprint of the metadata store's URL as"
                    " configured (`worker_client.fingerprint`); the worker was started with"
                    " `CONNECT_DATABASE_URL=postgresql://…`, while `connect airflow up` gives Airflow's processes"
                    " the normalized `postgresql+psycopg2://…` (`rt.database_url`): the fingerprints differ, so"
                    " each task ran the runner as a client process of its own"
                )
            lines += ["", f"The warm pool's Airflow tasks did **not** reach the pool's worker{why}."]
        lines += [
            "",
            "| pool | source task s | sink task s | source DAG run s | sink DAG run s | queued → sink done s"
            " | runs (how the task ran, from its log) | verified |",
            "|---|---:|---:|---:|---:|---:|---|---|",
        ]
        for a in self.airflow:
            verified = "—" if a.verified is None else ("yes" if a.verified else f"**no** ({a.note})")
            kind = "warm (Spark Connect)" if a.pool == POOL else "classic local (spark-submit)"
            lines.append(
                f"| {kind} | {_s(a.source_task_s, 2)} | {_s(a.sink_task_s, 2)} | {_s(a.source_run_s)}"
                f" | {_s(a.sink_run_s)} | {_s(a.queued_to_sink_end_s)} | {a.states} | {verified} |"
            )
        by = {a.pool: a for a in self.airflow}
        if POOL in by and "local" in by:
            warm, local = by[POOL], by["local"]
            lines += [
                "",
                f"From this one run: classic ÷ warm, source task {_ratio(local.source_task_s, warm.source_task_s)},"
                f" sink task {_ratio(local.sink_task_s, warm.sink_task_s)}, queued → sink done"
                f" {_ratio(local.queued_to_sink_end_s, warm.queued_to_sink_end_s)}.",
            ]
        return lines


# --- main ----------------------------------------------------------------------------------------


def reproduce_command(args: argparse.Namespace, parser: argparse.ArgumentParser) -> str:
    cmd = ".venv/bin/python bench/warm_bench.py"
    for name in ("rows", "rounds", "changed", "only", "server_memory"):
        value = getattr(args, name)
        if value != parser.get_default(name):
            cmd += f" --{name.replace('_', '-')} {value}"
    if args.skip_airflow:
        cmd += " --skip-airflow"
    return cmd


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3, help="incremental rounds after the full sync")
    parser.add_argument("--changed", type=int, default=10_000, help="rows changed before each round")
    parser.add_argument("--only", default=",".join(TOOLS), help="comma-separated subset of " + ",".join(TOOLS))
    parser.add_argument("--skip-airflow", action="store_true", help="no live Airflow phase")
    parser.add_argument("--server-memory", default="1g", help="`connect pools start --memory`, if it has it")
    parser.add_argument("--keep", action="store_true", help="leave the bench's databases, schemas and homes")
    parser.add_argument("--no-write", action="store_true", help="print only; leave bench/RESULTS.md alone")
    args = parser.parse_args()
    tools = [t for t in TOOLS if t in args.only.split(",")]
    unknown = set(args.only.split(",")) - set(TOOLS)
    if unknown or not tools:
        parser.error(f"unknown tools {sorted(unknown)}: use a subset of {','.join(TOOLS)}")
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    load_before = os.getloadavg()[0]
    print(f"1-minute load average before the runs: {load_before:.2f}", flush=True)

    expected = prepare_source(args.rows)
    if "dlt" in tools:
        dlt_python()  # created before any timing
    results = {t: ToolResult(t) for t in tools}
    pipelines = Path(tempfile.mkdtemp(prefix="warm-bench-dlt-"))
    pool: PoolStart | None = None
    sampler: RssSampler | None = None
    airflow: list[AirflowRun] = []
    airflow_up_s, airflow_note = None, ""
    warm = "connect-warm" in tools
    try:
        for tool in tools:
            reset_target(tool)
            if tool in VARIANT:
                # trigger-only source: no scheduled run when a live Airflow picks the DAG up
                source_extra = {"schedule": "none"} if tool == "connect-warm" else None
                connect.setup(
                    KIND, target_table(tool), variant=VARIANT[tool], own_names=True, source_extra=source_extra
                )
        if warm:
            pool = start_pool(args.server_memory)
            print(
                f"  server pid {pool.pid}, -Xmx {pool.xmx}, worker pid {pool.worker_pid}"
                f" (connect run finds it: {pool.worker_found})",
                flush=True,
            )
            sampler = RssSampler(pool.pid, pool.worker_pid)
            sampler.start()
            time.sleep(3)  # idle after start
        print(f"full sync of {args.rows:,} rows", flush=True)
        for tool in tools:
            if sampler and tool == "connect-warm":
                sampler.phase = "full"
            results[tool].full_s = attempt(
                results[tool], "full", lambda t=tool: run_tool(t, pipelines, incremental=False), expected
            )
            if sampler:
                sampler.phase = "between"
        for k in range(1, args.rounds + 1):
            changed = change_rows(k, args.rows, args.changed)
            expected = data.source_checksum(KIND)
            print(f"round {k}: changed {changed:,} rows", flush=True)
            for tool in tools:
                if results[tool].full_s is None:
                    results[tool].rounds_s.append(None)
                    continue
                if sampler and tool == "connect-warm":
                    sampler.phase = "incremental"
                seconds = attempt(
                    results[tool], f"r{k}", lambda t=tool: run_tool(t, pipelines, incremental=True), expected
                )
                results[tool].rounds_s.append(seconds)
                if sampler:
                    sampler.phase = "between"
        if sampler:
            time.sleep(2)
            sampler.phase = "idle at end"
            time.sleep(5)
        if warm and not args.skip_airflow and results["connect-warm"].full_s is not None:
            airflow, airflow_up_s, airflow_note = airflow_phase(args.rows, args.changed, args.rounds + 1, sampler)
    finally:
        if sampler:
            sampler.stop()
        if warm:
            try:
                print("  " + " ".join(cli("connect-warm", "pools", "stop", POOL).split()), flush=True)
            except RuntimeError as exc:
                print(f"connect pools stop {POOL} failed: {exc}", file=sys.stderr)
        shutil.rmtree(pipelines, ignore_errors=True)
        if not args.keep:
            drop_bench_databases(tools)
    report = Report(
        args.rows,
        args.rounds,
        args.changed,
        load_before,
        results,
        pool,
        sampler,
        airflow,
        airflow_up_s,
        airflow_note,
        args.skip_airflow,
        reproduce_command(args, parser),
    )
    sections = [report.sync_section(), report.memory_section(), report.airflow_section()]
    lines = [line for section in sections if section for line in [*section, ""]]
    if args.no_write:
        print("\n".join(lines))
    else:
        from _results import write_sections

        write_sections(lines)


if __name__ == "__main__":
    started = time.monotonic()
    main()
    print(f"total {time.monotonic() - started:.0f} s")
