"""Full sync of a generated table, PostgreSQL → PostgreSQL and MariaDB → PostgreSQL, then an incremental run.

    .venv/bin/python bench/jdbc_bench.py [--rows 10000000] [--only dlt,spark,copy,connect] [--sources pg,mariadb]

Side by side, each on a fresh table in the database `bench_target` of the local PostgreSQL, each run
as its own process and timed end to end from the parent (interpreter / JVM start-up included):

* **connect**: this product, JdbcSourceConnector (timestamp+incrementing) → topic → JdbcSinkConnector
  (upsert on `id`, COPY fast path), one `connect run src sink`: both tasks in one spark-submit
  (`_connect_jdbc.py`).
* **dlt**: `sql_table` with the connectorx backend (Arrow, streamed in batches), incremental cursor
  on `updated_at`, merge (upsert) on `id`, loaded as parquet through ADBC's binary COPY. Its CSV
  loader would be the other fast path, but it loads '' as NULL (`--dlt-format csv` shows it fail).
  dlt runs under the python of a venv of its own (`_dlt_env.py`: created on first use, never in .venv).
* **spark**: a plain PySpark job (`spark-submit` of this file's `spark-job`, jars from
  /usr/share/java): JDBC read split on `id` into `--spark-partitions` ranges, JDBC write in batches
  into a pre-created table (same DDL as the source, primary key included; copy uses it too).
* **copy**: the physical reference, `psql \\copy … TO STDOUT | psql \\copy … FROM STDIN`; from MariaDB
  `mariadb --batch --raw --quick -e "SELECT <values already escaped for COPY's text format>"`.

The source (`bench_source.bench_events`, ~190 bytes a row in PostgreSQL, see `_jdbc_data.py`) is
created first. Every tool syncs it in full; then 1% of the rows get a new `label` and `updated_at`,
and every tool runs again: dlt (and connect) incrementally, copy and spark have no incremental mode
and resync everything (reported as "full resync"). After each run the target's checksum (row count +
exact sum of row hashes over canonical value texts) must equal the source's: "verified".
Prints a markdown table and writes it to bench/RESULTS.md (section "JDBC full sync").
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _connect_jdbc as connect
import _jdbc_data as data
from _dlt_env import dlt_python

TOOLS = ("connect", "dlt", "spark", "copy")
DLT_FORMATS = ("parquet", "csv", "insert_values")
DLT_REFLECTION = ("minimal", "full", "full_with_precision")
JARS = ("/usr/share/java/postgresql.jar", "/usr/share/java/mariadb-java-client.jar")
PYTHON = sys.executable
THIS = Path(__file__).resolve()
# JDBC URL options, the ones that matter for speed or correctness (docs/research/jdbc-bench-alternatives.md):
# PG: reWriteBatchedInserts folds a batch of INSERTs into multi-row INSERTs; stringtype=unspecified
# sends Spark's strings untyped so PostgreSQL casts them into jsonb. MariaDB: the jdbc:mysql scheme
# makes Spark pick its MySQL dialect (backtick quoting; with jdbc:mariadb it falls back to "double
# quotes", which MariaDB reads as string literals); Connector/J streams a result set when a fetch
# size is set (Spark's `fetchsize`), so no useCursorFetch is needed.
PG_JDBC_OPTIONS = "reWriteBatchedInserts=true&stringtype=unspecified"
MARIADB_JDBC_OPTIONS = "useCompression=false&tinyInt1isBit=true"


def run_connect(source_kind: str, rows: int) -> float:
    """This product: JdbcSourceConnector → topic → JdbcSinkConnector (upsert on id) into
    `target_table("connect", source_kind)`, one `connect run src sink` spark-submit (see _connect_jdbc.py)."""
    connect.setup(source_kind, target_table("connect", source_kind))
    return connect.sync(source_kind)


def run_connect_incremental(source_kind: str, rows: int) -> float:
    """The same connectors again: the source reads only rows whose (updated_at, id) moved past its position."""
    return connect.sync(source_kind)


@dataclass
class Result:
    """One tool on one source: both runs, their times and whether the target matched the source."""

    tool: str
    kind: str
    rows: int
    full_s: float | None = None
    full_ok: bool | None = None
    incremental_s: float | None = None
    incremental_ok: bool | None = None
    incremental_mode: str = "incremental"
    note: str = ""
    load: list[float] = field(default_factory=list)  # 1-minute load average before each run

    @property
    def verified(self) -> str:
        if self.full_ok is None:
            return "—"
        return "yes" if self.full_ok and self.incremental_ok is not False else "**no**"


# --- URLs and tables -----------------------------------------------------------------------------


def target_table(tool: str, kind: str) -> str:
    return f"{tool}_{kind}.{data.TABLE}"


def jdbc_url(kind: str, database: str) -> tuple[str, str]:
    """(JDBC URL, driver class) of `database` on the bench's PostgreSQL or MariaDB server."""
    if kind == "pg":
        server = data.PG_SERVER
        url = f"jdbc:postgresql://{server.host}:{server.port}/{database}?{PG_JDBC_OPTIONS}"
        return url, "org.postgresql.Driver"
    server = data.MARIADB_SERVER
    return f"jdbc:mysql://{server.host}:{server.port}/{database}?{MARIADB_JDBC_OPTIONS}", "org.mariadb.jdbc.Driver"


def jdbc_credentials(kind: str) -> tuple[str, str]:
    server = data.PG_SERVER if kind == "pg" else data.MARIADB_SERVER
    return server.user, server.password


def reset_target(tool: str, kind: str, *, create_table: bool) -> None:
    """Drop the tool's schema (and dlt's staging schema) in `bench_target`; optionally create the table."""
    schema = target_table(tool, kind).split(".")[0]
    with data.pg(data.TARGET_DB) as conn, conn.cursor() as cur:
        cur.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        cur.execute(f"DROP SCHEMA IF EXISTS {schema}_staging CASCADE")
        cur.execute(f"CREATE SCHEMA {schema}")
        if create_table:
            # The sink table as a user would define it: same types, primary key on id.
            cur.execute(data.pg_create_table_sql(target_table(tool, kind)))


def drop_targets(tools: list[str], kinds: list[str]) -> None:
    with data.pg(data.TARGET_DB) as conn, conn.cursor() as cur:
        for tool in tools:
            for kind in kinds:
                schema = target_table(tool, kind).split(".")[0]
                cur.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
                cur.execute(f"DROP SCHEMA IF EXISTS {schema}_staging CASCADE")


# --- copy: the physical reference ----------------------------------------------------------------


def _mariadb_copy_text(name: str, logical: str) -> str:
    """MariaDB expression rendering column `name` as one field of PostgreSQL's COPY text format.

    `mariadb --batch` prints NULL as the word NULL (indistinguishable from the string 'NULL') and,
    without --raw, escapes only \\0 \\t \\n \\\\, not \\r; so --raw prints values as they are and this
    expression does COPY's escaping itself, with \\N for NULL. Numbers, dates and timestamps print
    in forms COPY parses (DOUBLE in shortest round-trip digits, booleans as 0/1).
    """
    if logical in ("text", "json"):
        escaped = name
        for raw, esc in (("\\\\", "\\\\\\\\"), ("\\t", "\\\\t"), ("\\n", "\\\\n"), ("\\r", "\\\\r")):
            escaped = f"REPLACE({escaped}, '{raw}', '{esc}')"
        return f"IFNULL({escaped}, '\\\\N')"
    return f"IFNULL({name}, '\\\\N')"


def copy_command(kind: str, table: str, *, truncate: bool) -> str:
    """The shell pipeline copying the source of `kind` into `table` of `bench_target`."""
    load = [*data.pg_cli(data.TARGET_DB), "-1"]
    if truncate:
        load += ["-c", f"TRUNCATE {table}"]
    load += ["-c", f"\\copy {table} FROM STDIN"]
    if kind == "pg":
        dump = [*data.pg_cli(data.SOURCE_DB), "-c", f"\\copy {data.TABLE} TO STDOUT"]
    else:
        select = ", ".join(_mariadb_copy_text(name, logical) for name, _, _, logical in data.COLUMNS)
        dump = [
            *data.mariadb_cli(data.SOURCE_DB),
            "--batch",
            "--raw",
            "--skip-column-names",
            "--quick",  # stream rows; without it the client buffers the whole result first
            "-e",
            f"SELECT {select} FROM {data.TABLE}",
        ]
    return f"{shlex.join(dump)} | {shlex.join(load)}"


def run_copy(kind: str, *, truncate: bool) -> float:
    command = copy_command(kind, target_table("copy", kind), truncate=truncate)
    return _timed(["bash", "-o", "pipefail", "-c", command], data.cli_env())


# --- spark: plain JDBC read + JDBC write ---------------------------------------------------------


def spark_submit_command(kind: str, rows: int, partitions: int) -> list[str]:
    import pyspark  # only to find spark-submit

    source_url, source_driver = jdbc_url(kind, data.SOURCE_DB)
    target_url, _ = jdbc_url("pg", data.TARGET_DB)
    conf = {
        "spark.ui.enabled": "false",
        "spark.log.level": "WARN",
        "spark.sql.session.timeZone": "UTC",
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        # JDBC timestamps go through java.sql.Timestamp in the JVM's zone: pin it to UTC so no
        # local-time gap (DST) can shift a naive timestamp.
        "spark.driver.extraJavaOptions": "-Duser.timezone=UTC",
    }
    cmd = [str(Path(pyspark.__file__).parent / "bin" / "spark-submit"), "--master", "local[*]"]
    cmd += ["--driver-memory", "2g", "--jars", ",".join(JARS), "--name", f"jdbc-bench-{kind}"]
    for key, value in conf.items():
        cmd += ["--conf", f"{key}={value}"]
    return [
        *cmd,
        str(THIS),
        "spark-job",
        f"--source-url={source_url}",
        f"--source-driver={source_driver}",
        f"--source-kind={kind}",
        f"--target-url={target_url}",
        f"--target-table={target_table('spark', kind)}",
        f"--rows={rows}",
        f"--partitions={partitions}",
    ]


def run_spark(kind: str, rows: int, partitions: int) -> float:
    env = dict(
        data.cli_env(),
        PYSPARK_PYTHON=PYTHON,
        PYSPARK_DRIVER_PYTHON=PYTHON,
        SPARK_LOCAL_IP=os.environ.get("SPARK_LOCAL_IP", "127.0.0.1"),
    )
    return _timed(spark_submit_command(kind, rows, partitions), env)


def spark_job(argv: list[str]) -> None:
    """Inside spark-submit: read the source table over JDBC in `--partitions` id ranges, write it to the target."""
    parser = argparse.ArgumentParser(prog="jdbc_bench.py spark-job")
    for name in ("source-url", "source-driver", "source-kind", "target-url", "target-table"):
        parser.add_argument(f"--{name}", required=True)
    parser.add_argument("--rows", type=int, required=True)
    parser.add_argument("--partitions", type=int, required=True)
    parser.add_argument("--fetchsize", type=int, default=10_000)
    parser.add_argument("--batchsize", type=int, default=10_000)
    args = parser.parse_args(argv)
    from pyspark.sql import SparkSession

    source_user, source_password = jdbc_credentials(args.source_kind)
    target_user, target_password = jdbc_credentials("pg")
    spark = SparkSession.builder.getOrCreate()
    frame = (
        spark.read.format("jdbc")
        .option("url", args.source_url)
        .option("driver", args.source_driver)
        .option("user", source_user)
        .option("password", source_password)
        .option("dbtable", data.TABLE)
        # numPartitions queries `WHERE id >= lo AND id < hi`, one per task, strides (upper-lower)/n;
        # the bounds only set the strides, rows outside them land in the first/last partition.
        .option("partitionColumn", "id")
        .option("lowerBound", "1")
        .option("upperBound", str(args.rows + 1))
        .option("numPartitions", str(args.partitions))
        .option("fetchsize", str(args.fetchsize))
        .load()
    )
    (
        frame.write.format("jdbc")
        .option("url", args.target_url)
        .option("driver", "org.postgresql.Driver")
        .option("user", target_user)
        .option("password", target_password)
        .option("dbtable", args.target_table)
        .option("batchsize", str(args.batchsize))
        # overwrite + truncate keeps the pre-created table (types, primary key) and empties it.
        .option("truncate", "true")
        .mode("overwrite")
        .save()
    )
    spark.stop()


# --- dlt -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DltSetup:
    """How the dlt pipeline reads and loads (defaults: the fastest exact combination measured)."""

    backend: str = "connectorx"
    file_format: str = "parquet"
    reflection_level: str = "minimal"
    # The first run's write disposition: "merge" (the pipeline as it runs every time) or "append"
    # (straight into the table, no staging + MERGE; same result on an empty target).
    full_disposition: str = "merge"

    def args(self, incremental: bool) -> list[str]:
        return [
            f"--backend={self.backend}",
            f"--loader-file-format={self.file_format}",
            f"--reflection-level={self.reflection_level}",
            f"--write-disposition={'merge' if incremental else self.full_disposition}",
        ]


def dlt_command(kind: str, setup: DltSetup, pipelines_dir: Path, *, incremental: bool) -> list[str]:
    """This file's `dlt-job` under the python of the dlt venv (`_dlt_env.py`; created on first use)."""
    args = setup.args(incremental)
    python = dlt_python()
    return [python, str(THIS), "dlt-job", f"--source-kind={kind}", *args, f"--pipelines-dir={pipelines_dir}"]


def dlt_env() -> dict[str, str]:
    """The dlt job's environment: no telemetry, and this folder first on its path (for `_jdbc_data`;
    the script's own folder is on sys.path anyway, this keeps it so from any cwd or -I)."""
    path = os.pathsep.join(p for p in (str(THIS.parent), os.environ.get("PYTHONPATH", "")) if p)
    return dict(data.cli_env(), RUNTIME__DLTHUB_TELEMETRY="false", PYTHONPATH=path)


def run_dlt(kind: str, setup: DltSetup, pipelines_dir: Path, *, incremental: bool) -> float:
    command = dlt_command(kind, setup, pipelines_dir, incremental=incremental)  # the venv first, untimed
    return _timed(command, dlt_env(), cwd=THIS.parent)


def dlt_job(argv: list[str]) -> None:
    """In its own interpreter: one run of the dlt pipeline (the first loads everything)."""
    parser = argparse.ArgumentParser(prog="jdbc_bench.py dlt-job")
    parser.add_argument("--source-kind", required=True, choices=data.KINDS)
    parser.add_argument("--backend", default="connectorx", choices=("connectorx", "pyarrow", "sqlalchemy"))
    parser.add_argument("--pipelines-dir", required=True)
    parser.add_argument("--chunk-size", type=int, default=100_000)
    parser.add_argument("--loader-file-format", default="parquet", choices=DLT_FORMATS)
    parser.add_argument("--reflection-level", default="minimal", choices=DLT_REFLECTION)
    parser.add_argument("--write-disposition", default="merge", choices=("merge", "append"))
    args = parser.parse_args(argv)
    import dlt
    from dlt.sources.sql_database import sql_table

    kind = args.source_kind
    if kind == "pg":
        # SQLAlchemy 2.1's default PostgreSQL driver is psycopg 3; the venv has psycopg2.
        credentials = data.pg_url(data.SOURCE_DB).replace("postgresql://", "postgresql+psycopg2://")
    else:
        credentials = data.mariadb_url(data.SOURCE_DB, "mysql+pymysql") + "?charset=utf8mb4"
    backend_kwargs = {}
    if args.backend == "connectorx":
        conn = data.pg_url(data.SOURCE_DB) if kind == "pg" else data.mariadb_url(data.SOURCE_DB)
        # arrow_stream: batches of chunk_size instead of one Arrow table of the whole result.
        backend_kwargs = {"conn": conn, "return_type": "arrow_stream", "batch_size": args.chunk_size}
    table = sql_table(
        credentials=credentials,
        table=data.TABLE,
        backend=args.backend,
        chunk_size=args.chunk_size,
        reflection_level=args.reflection_level,
        incremental=dlt.sources.incremental("updated_at"),
        backend_kwargs=backend_kwargs,
    )
    if args.write_disposition == "merge":
        table.apply_hints(primary_key="id", write_disposition={"disposition": "merge", "strategy": "upsert"})
    else:
        table.apply_hints(primary_key="id", write_disposition="append")
    pipeline = dlt.pipeline(
        pipeline_name=f"jdbc_bench_{kind}",
        destination=dlt.destinations.postgres(_dlt_target_credentials()),
        dataset_name=target_table("dlt", kind).split(".")[0],
        pipelines_dir=args.pipelines_dir,
    )
    info = pipeline.run(table, loader_file_format=args.loader_file_format)
    info.raise_on_failed_jobs()


def _dlt_target_credentials() -> dict[str, object]:
    server = data.PG_SERVER
    return {
        "host": server.host,
        "port": server.port,
        "username": server.user,
        # dlt requires a password; trust authentication (the bench's server) never asks for it.
        "password": server.password or "unused-with-trust-auth",
        "database": data.TARGET_DB,
        "session_timezone": "UTC",
    }


# --- running and timing --------------------------------------------------------------------------


def _timed(cmd: list[str], env: dict[str, str], cwd: Path | None = None) -> float:
    started = time.perf_counter()
    proc = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - started
    if proc.returncode != 0:
        tail = "\n".join((proc.stderr or proc.stdout).splitlines()[-25:])
        raise RuntimeError(f"`{shlex.join(cmd)[:300]}` exited {proc.returncode}:\n{tail}")
    return seconds


def _attempt(result: Result, run: Callable[[], float], expected: data.Checksum, *, incremental: bool) -> None:
    """Run one timed sync and verify the target; failures become the result's note, not an abort."""
    phase = "incremental" if incremental else "full"
    result.load.append(os.getloadavg()[0])
    try:
        seconds = run()
    except NotImplementedError as exc:
        result.note = f"not run: {exc}"
        return
    except RuntimeError as exc:
        result.note += f"{phase} failed: {str(exc).splitlines()[-1][:200]}; "
        print(exc, file=sys.stderr)
        return
    got = data.target_checksum(target_table(result.tool, result.kind))
    ok = got == expected
    if not ok:
        result.note += f"{phase}: target {got} ≠ source {expected}; "
    if incremental:
        result.incremental_s, result.incremental_ok = seconds, ok
    else:
        result.full_s, result.full_ok = seconds, ok
    print(f"  {result.tool:8} {result.kind:8} {phase:12} {seconds:8.1f} s  verified={ok}", flush=True)


def prepare_sources(kinds: list[str], rows: int, reuse: bool) -> dict[str, data.Checksum]:
    checksums = {}
    for kind in kinds:
        state = data.source_state(kind)
        if reuse and state == (rows, False):
            print(f"source {kind}: reusing {rows} rows", flush=True)
        else:
            print(f"source {kind}: generated {rows} rows in {data.create_source(kind, rows):.1f} s", flush=True)
        checksums[kind] = data.source_checksum(kind)
    if len(set(checksums.values())) > 1:
        raise RuntimeError(f"the sources differ: {checksums}")
    return checksums


def run_all(args: argparse.Namespace) -> list[Result]:
    tools = [t for t in TOOLS if t in args.only.split(",")]
    kinds = args.sources.split(",")
    data.ensure_pg_database(data.TARGET_DB)
    before = prepare_sources(kinds, args.rows, args.reuse_source)
    results = {(t, k): Result(t, k, args.rows) for k in kinds for t in tools}
    pipelines = Path(tempfile.mkdtemp(prefix="jdbc-bench-dlt-"))
    dlt_setup = DltSetup(args.dlt_backend, args.dlt_format, args.dlt_reflection, args.dlt_full_disposition)
    runners: dict[str, Callable[[str, bool], float]] = {
        "connect": lambda k, inc: (run_connect_incremental if inc else run_connect)(k, args.rows),
        "dlt": lambda k, inc: run_dlt(k, dlt_setup, pipelines / k, incremental=inc),
        "spark": lambda k, inc: run_spark(k, args.rows, args.spark_partitions),
        "copy": lambda k, inc: run_copy(k, truncate=inc),
    }
    for kind in kinds:
        for tool in tools:
            reset_target(tool, kind, create_table=tool in ("spark", "copy", "connect"))
            _attempt(results[tool, kind], partial(runners[tool], kind, False), before[kind], incremental=False)
    for kind in kinds:
        changed = data.touch_percent(kind, args.touch_pct)
        after = data.source_checksum(kind)
        print(f"source {kind}: touched {changed} rows ({args.touch_pct}%)", flush=True)
        for tool in tools:
            result = results[tool, kind]
            if result.full_ok is None:
                continue
            if tool in ("spark", "copy"):
                result.incremental_mode = "full resync"
            _attempt(result, partial(runners[tool], kind, True), after, incremental=True)
    if not args.keep_targets:
        drop_targets(tools, kinds)
    # dlt keeps every loaded package (its parquet files: 1.7 GB at 10M rows) in the pipelines dir.
    shutil.rmtree(pipelines, ignore_errors=True)
    return list(results.values())


# --- report --------------------------------------------------------------------------------------


def _seconds(value: float | None) -> str:
    return "—" if value is None else f"{value:.1f}"


def reproduce_command(rows: int, only: str | None = None, sources: str | None = None) -> str:
    cmd = f".venv/bin/python bench/jdbc_bench.py --rows {rows}"
    if only:
        cmd += f" --only {only}"
    if sources:
        cmd += f" --sources {sources}"
    return cmd


def results_section(rows: list[Result], command: str | None = None) -> list[str]:
    """The markdown section for bench/RESULTS.md from the bench's results."""
    count = rows[0].rows if rows else 0
    command = command or reproduce_command(count)
    loads = [load for r in rows for load in r.load]
    lines = [
        f"## JDBC full sync of {count:,} rows: mixed types, PostgreSQL / MariaDB → PostgreSQL, end to end",
        "",
        f"Reproduce: `{command}`. Each tool runs as its own process(es), timed from the parent",
        "including interpreter/JVM start-up, into a fresh table of the database `bench_target` on the same",
        "2-core machine as both sources. connect: `connect run src sink` (the source task, then the sink",
        "task — upsert on `id` — in one spark-submit, local[*], its driver JVM started from the class-data",
        "archive `scripts/bootstrap.sh` builds); spark: one plain `spark-submit` of a JDBC read split on `id` +",
        "JDBC write; dlt: `sql_table`, connectorx backend, merge on `id`, parquet loaded through ADBC (dlt in",
        "a venv of its own, `bench/_dlt_env.py`); copy:",
        "`psql \\copy … TO STDOUT | psql \\copy … FROM STDIN` (from MariaDB: `mariadb --batch --raw --quick`).",
        "Incremental: after 1% of the rows got a new `updated_at` and `label`; copy and plain Spark have no",
        "incremental mode and resync everything. Verified: row count and an exact checksum over canonical",
        "value texts equal the source's after both runs. Details: `docs/research/jdbc-bench-alternatives.md`.",
    ]
    if loads:
        lines.append(f"1-minute load average before the runs: {min(loads):.1f} to {max(loads):.1f}.")
    lines += [
        "",
        "| tool | source | full sync s | rows/s | incremental s | verified |",
        "|---|---|---:|---:|---:|---|",
    ]
    for r in rows:
        rate = f"{r.rows / r.full_s:,.0f}" if r.full_s else "—"
        incremental = _seconds(r.incremental_s)
        if r.incremental_s is not None and r.incremental_mode != "incremental":
            incremental += f" ({r.incremental_mode})"
        note = r.note.rstrip("; ")
        verified = f"{r.verified} ({note})" if note else r.verified
        source = "PostgreSQL" if r.kind == "pg" else "MariaDB"
        lines.append(f"| {r.tool} | {source} | {_seconds(r.full_s)} | {rate} | {incremental} | {verified} |")
    return lines


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] in ("spark-job", "dlt-job"):
        (spark_job if sys.argv[1] == "spark-job" else dlt_job)(sys.argv[2:])
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--only", default="dlt,spark,copy,connect", help="comma-separated subset of " + ",".join(TOOLS))
    parser.add_argument("--sources", default=",".join(data.KINDS), help="comma-separated subset of pg,mariadb")
    parser.add_argument(
        "--touch-pct", type=float, default=1.0, help="percent of rows changed before the incremental run"
    )
    parser.add_argument("--dlt-backend", default="connectorx", choices=("connectorx", "pyarrow", "sqlalchemy"))
    parser.add_argument("--dlt-format", default="parquet", choices=DLT_FORMATS, help="dlt's loader file format")
    parser.add_argument("--dlt-reflection", default="minimal", choices=DLT_REFLECTION)
    parser.add_argument("--dlt-full-disposition", default="merge", choices=("merge", "append"))
    parser.add_argument("--spark-partitions", type=int, default=4)
    parser.add_argument("--reuse-source", action="store_true", help="keep an untouched source of the same size")
    parser.add_argument("--keep-targets", action="store_true", help="leave the target tables in bench_target")
    parser.add_argument("--no-write", action="store_true", help="print only; leave bench/RESULTS.md alone")
    args = parser.parse_args()
    unknown = set(args.only.split(",")) - set(TOOLS)
    if unknown:
        parser.error(f"unknown tools {sorted(unknown)}: use a subset of {','.join(TOOLS)}")
    results = run_all(args)
    command = reproduce_command(args.rows, args.only if args.only != parser.get_default("only") else None)
    lines = results_section(results, command)
    if args.no_write:
        print("\n".join(lines))
    else:
        from _results import write_sections

        write_sections(lines)


if __name__ == "__main__":
    main()
