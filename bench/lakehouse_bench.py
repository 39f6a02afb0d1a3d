"""Lakehouse sinks (issue 33): PostgreSQL → Iceberg / Delta full load, and 10,000 CDC changes into Iceberg.

    .venv/bin/python bench/lakehouse_bench.py [--rows 10000000] [--changes 10000] [--only ...] [--no-write] [--keep]

One run, side by side, on one generated table `events` (a bigint key and 6 columns of mixed types:
text with NULLs, integer, numeric(12,2), double, boolean, timestamptz) in the throwaway database
`bench_lake_source` of the local PostgreSQL. Every time is the wall time of a whole command, timed
from this process (interpreter / client start-up included), unless said otherwise:

* **connect** (`--only connect`): this runtime on a warm pool (`connect pools start warm`, started
  and warmed before any timing, `local` removed, rebalanced): `connect run src` (JdbcSourceConnector
  → topic `lake_events`), then `connect run ice` (IcebergSinkConnector, SQL catalog in the database
  `bench_lake_catalog`, warehouse in a temporary directory) and `connect run dl` (DeltaSinkConnector,
  a local path), both reading the same topic. The sink's time is its command; the pipeline's is the
  source's command plus the sink's.
* **dlt**: `sql_table(backend="pyarrow")` → `filesystem` destination (local path) with
  `table_format="iceberg"` and `"delta"`, each a fresh pipeline, in the separate venv `--dlt-python`
  (default /tmp/dltvenv: dlt never enters the project's `.venv`), as a subprocess of this file.
* **limit**: `psql \\copy (SELECT …) TO STDOUT (FORMAT csv)` streamed into `pyarrow.csv.open_csv`
  and written by one `pyarrow.parquet.ParquetWriter` (pyarrow's defaults) — no table format at all.
* **cdc**: `--changes` changes of random keys (70% updates, 25% deletes, 5% new keys, one change per
  key, in random order) as rows of a table `changes` with an `op` column, read by a second JDBC
  source into topic `lake_changes` (not timed as the sink's). Before the sink runs, the Iceberg table
  is registered a second time from the same metadata file (`bench.events_pyiceberg`, the same
  snapshot). Then `connect run ice_cdc` (the Iceberg sink, `cdc-field=op`, id column `id`, `seq`
  dropped by ReplaceField, `op` added to the table by schema evolution) on the warm pool, against
  pyiceberg alone on the copy: one transaction of `delete(In("id", deleted keys))` and
  `upsert(rows, join_cols=["id"])` (a subprocess; its own time measured around the transaction).
  Both tables must then hold the same rows for every changed key and the same row count.

An append's data files are written by the Spark workers that read the topic (the driver gets only
the files' descriptions and commits them), so the default warm pool (1 GiB heap) takes the 10M
rows. Until that change both sinks took the whole batch into the driver (1.08 GiB through Spark
Connect) and needed `--server-memory 4g --pool-conf spark.driver.maxResultSize=3g`.

Writes the sections `## lakehouse sinks: …` of bench/RESULTS.md (docs/benchmarks/results.md
includes that file whole). Drops its databases and directories at the end unless `--keep`.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

THIS = Path(__file__).resolve()
PG = os.environ.get("CONNECT_BENCH_PG_NETLOC", "postgres@127.0.0.1:5432")
SOURCE_DB = "bench_lake_source"
META_DB = "bench_lake_meta"
CATALOG_DB = "bench_lake_catalog"
WORK = Path(tempfile.gettempdir()) / "connect-lake-bench"
TABLE = "bench.events"
COPY_TABLE = "bench.events_pyiceberg"
COLUMNS = ("id", "label", "qty", "price", "score", "active", "updated_at")
TOOLS = ("connect", "dlt", "limit", "cdc")
SOURCE_DDL = (
    "CREATE TABLE {t} (id bigint NOT NULL, label text, qty integer, price numeric(12,2), score double precision,"
    " active boolean, updated_at timestamptz{extra})"
)
GENERATOR = """
SELECT n, CASE WHEN n % 17 = 0 THEN NULL ELSE 'item ' || n || ' ' || left(md5(n::text), 8) END,
  CASE WHEN n % 13 = 0 THEN NULL ELSE (n % 1000)::int END, (n % 10000000) / 100.0,
  (n * 0.6180339887) % 1, n % 3 = 0, timestamptz '2024-01-01 00:00:00+00' + n * interval '1 second'
FROM generate_series(1, {rows}::bigint) AS n
"""


def pg_url(database: str, driver: str = "postgresql") -> str:
    return f"{driver}://{PG}/{database}"


def _pg(database: str) -> Any:
    import psycopg2

    conn = psycopg2.connect(pg_url(database), options="-c timezone=UTC")
    conn.autocommit = True
    return conn


def _sql(database: str, *statements: str) -> list[Any]:
    conn = _pg(database)
    try:
        with conn.cursor() as cur:
            for statement in statements:
                cur.execute(statement)
            return list(cur.fetchall()) if cur.description else []
    finally:
        conn.close()


def recreate_database(name: str) -> None:
    _sql("postgres", f"DROP DATABASE IF EXISTS {name} WITH (FORCE)", f"CREATE DATABASE {name}")


# --- the source and the change set ---------------------------------------------------------------


def create_source(rows: int) -> float:
    started = time.perf_counter()
    recreate_database(SOURCE_DB)
    _sql(
        SOURCE_DB,
        SOURCE_DDL.format(t="events", extra=""),
        "INSERT INTO events " + GENERATOR.format(rows=rows),  # load first, key after: one sort
        "ALTER TABLE events ADD PRIMARY KEY (id)",
        "VACUUM ANALYZE events",
    )
    return time.perf_counter() - started


@dataclass
class ChangeSet:
    updates: int
    deletes: int
    inserts: int

    @property
    def total(self) -> int:
        return self.updates + self.deletes + self.inserts


def create_changes(rows: int, changes: int) -> ChangeSet:
    """`changes` (seq, the columns, op): updates and deletes of distinct random existing keys, and new
    keys past `rows`, in a random order (`seq`)."""
    deletes, inserts = changes // 4, changes // 20
    updates = changes - deletes - inserts
    keys = random.Random(33).sample(range(1, rows + 1), updates + deletes)
    upd, dele = keys[:updates], keys[updates:]
    _sql(
        SOURCE_DB,
        "DROP TABLE IF EXISTS changes",
        SOURCE_DDL.format(t="changes", extra=", op text NOT NULL, seq bigint"),
        f"""INSERT INTO changes
        SELECT e.id, 'changed ' || e.id, coalesce(e.qty, 0) + 1, e.price + 1, e.score / 2, NOT e.active,
               timestamptz '2025-01-01 00:00:00+00' + e.id * interval '1 second', 'u', NULL::bigint
          FROM events e WHERE e.id = ANY(ARRAY[{",".join(map(str, upd))}]::bigint[])
        UNION ALL
        SELECT k, NULL, NULL, NULL, NULL, NULL, NULL, 'd', NULL FROM unnest(ARRAY[{",".join(map(str, dele))}]::bigint[]) k
        UNION ALL
        SELECT n, 'new ' || n, 7, 7.77, 0.5, true, timestamptz '2025-06-01 00:00:00+00', 'c', NULL
          FROM generate_series({rows + 1}::bigint, {rows + inserts}::bigint) n""",
        "UPDATE changes c SET seq = o.seq FROM (SELECT id, row_number() OVER (ORDER BY md5(id::text)) AS seq"
        " FROM changes) o WHERE o.id = c.id",
        "ALTER TABLE changes ADD PRIMARY KEY (seq)",
        "ANALYZE changes",
    )
    return ChangeSet(updates, deletes, inserts)


# --- this runtime --------------------------------------------------------------------------------


def connect_env() -> dict[str, str]:
    return {
        **os.environ,
        "CONNECT_DATABASE_URL": pg_url(META_DB),
        "CONNECT_HOME": str(WORK / "home"),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "CONNECT_FILE_ALLOWED_PATHS": str(WORK),  # the warehouse and the Delta table live there
    }


def cli(*args: str) -> str:
    proc = subprocess.run(
        [sys.executable, "-m", "connect_core.cli", *args], env=connect_env(), capture_output=True, text=True
    )
    if proc.returncode != 0:
        raise RuntimeError(f"connect {' '.join(args)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc.stdout


@dataclass
class Run:
    """One `connect run <name> --output json`: the command's wall seconds and what it printed."""

    name: str
    command_s: float
    wall_s: float
    rows: int | None
    timings: dict[str, Any]


def connect_run(name: str) -> Run:
    started = time.perf_counter()
    out = cli("run", name, "--output", "json")
    command_s = time.perf_counter() - started
    [run] = json.loads(out)
    if run.get("state") != "SUCCEEDED":
        raise RuntimeError(f"{name} {run.get('state')}: {run.get('message')}")
    result = Run(name, command_s, float(run.get("wall_s") or command_s), run.get("rows"), run.get("timings", {}))
    print(f"  connect run {name}: {command_s:.2f} s (run wall_s {result.wall_s:.2f}, {result.rows} rows)", flush=True)
    return result


def iceberg_catalog_keys() -> dict[str, str]:
    return {
        "iceberg.catalog.type": "sql",
        "iceberg.catalog.uri": pg_url(CATALOG_DB, "postgresql+psycopg2"),
        "iceberg.catalog.warehouse": str(WORK / "warehouse"),
    }


def connector_configs() -> dict[str, dict[str, Any]]:
    jdbc = {
        "connector.class": "JdbcSourceConnector",
        "connection.url": f"jdbc:postgresql://{PG.split('@')[-1]}/{SOURCE_DB}",
        "connection.user": PG.split("@")[0],
        "mode": "incrementing",
        "topic.prefix": "lake_",
    }
    return {
        "src": {**jdbc, "incrementing.column.name": "id", "table.whitelist": "events", "snapshot.partitions": 4},
        "chg": {**jdbc, "incrementing.column.name": "seq", "table.whitelist": "changes", "snapshot.partitions": 1},
        "ice": {
            "connector.class": "org.apache.iceberg.connect.IcebergSinkConnector",
            "topics": "lake_events",
            "iceberg.tables": TABLE,
            "iceberg.tables.auto-create-enabled": "true",
            **iceberg_catalog_keys(),
        },
        "dl": {
            "connector.class": "DeltaSinkConnector",
            "topics": "lake_events",
            "delta.table.path": str(WORK / "delta" / "events"),
            "delta.tables.auto-create-enabled": "true",
        },
        "ice_cdc": {
            "connector.class": "org.apache.iceberg.connect.IcebergSinkConnector",
            "topics": "lake_changes",
            "iceberg.tables": TABLE,
            "iceberg.tables.cdc-field": "op",
            "iceberg.tables.default-id-columns": "id",
            "iceberg.tables.evolve-schema-enabled": "true",
            "transforms": "drop",
            "transforms.drop.type": "org.apache.kafka.connect.transforms.ReplaceField$Value",
            "transforms.drop.exclude": "seq",
            **iceberg_catalog_keys(),
        },
    }


def setup_connect() -> None:
    recreate_database(META_DB)
    recreate_database(CATALOG_DB)
    for sub in ("home", "warehouse", "delta"):
        shutil.rmtree(WORK / sub, ignore_errors=True)
        (WORK / sub).mkdir(parents=True)
    for name, config in connector_configs().items():
        path = WORK / "home" / f"{name}.json"
        path.write_text(json.dumps(config))
        cli("create", name, "--config", str(path))


def start_pool(memory: str, conf: list[str]) -> str:
    extra = [arg for kv in conf for arg in ("--conf", kv)]
    out = " ".join(cli("pools", "start", "warm", "--capacity", "4", "--memory", memory, *extra).split())
    cli("pools", "remove", "local", "--missing-ok")
    cli("rebalance")
    print(f"  {out}", flush=True)
    found = re.search(r"up in [\d.]+ s, warmed in [\d.]+ s", out)
    return found.group(0) if found else out


def stop_pool() -> None:
    try:
        print("  " + " ".join(cli("pools", "stop", "warm").split()), flush=True)
    except RuntimeError as exc:
        print(f"  stopping the warm pool failed: {exc}", flush=True)


def catalog() -> Any:
    from pyiceberg.catalog.sql import SqlCatalog

    return SqlCatalog("iceberg", uri=pg_url(CATALOG_DB, "postgresql+psycopg2"), warehouse=str(WORK / "warehouse"))


def iceberg_records(table: Any) -> int:
    snapshot = table.current_snapshot()
    return int(snapshot.summary["total-records"]) if snapshot is not None else 0


def iceberg_files(table: Any) -> int:
    snapshot = table.current_snapshot()
    return int(snapshot.summary["total-data-files"]) if snapshot is not None else 0


def delta_counts(path: Path) -> tuple[int, int]:
    from deltalake import DeltaTable

    table = DeltaTable(str(path))
    return table.to_pyarrow_dataset().count_rows(), len(table.file_uris())


# --- dlt (in its own venv) -----------------------------------------------------------------------


def dlt_job(argv: list[str]) -> None:
    """Run under the dlt venv's python: one pipeline, PostgreSQL `events` → filesystem in `table_format`."""
    import dlt
    from dlt.sources.sql_database import sql_table

    parser = argparse.ArgumentParser()
    parser.add_argument("--table-format", required=True)
    parser.add_argument("--bucket", required=True)
    parser.add_argument("--pipelines-dir", required=True)
    parser.add_argument("--backend", default="pyarrow")
    parser.add_argument("--chunk-size", type=int, default=100_000)
    args = parser.parse_args(argv)
    source = sql_table(
        credentials=pg_url(SOURCE_DB, "postgresql+psycopg2"),
        table="events",
        backend=args.backend,
        chunk_size=args.chunk_size,
    )
    pipeline = dlt.pipeline(
        pipeline_name=f"lake_{args.table_format}",
        destination=dlt.destinations.filesystem(bucket_url=Path(args.bucket).as_uri()),
        dataset_name="bench",
        pipelines_dir=args.pipelines_dir,
    )
    pipeline.run(source, table_format=args.table_format, loader_file_format="parquet")
    steps = {s.step: (s.finished_at - s.started_at).total_seconds() for s in pipeline.last_trace.steps}
    print("DLT_RESULT " + json.dumps({"version": dlt.__version__, "steps": steps}), flush=True)


@dataclass
class DltRun:
    table_format: str
    wall_s: float
    steps: dict[str, float]
    version: str
    rows: int | None = None
    files: int | None = None


def run_dlt(python: str, table_format: str, backend: str) -> DltRun:
    root = WORK / f"dlt_{table_format}"
    shutil.rmtree(root, ignore_errors=True)
    (root / "bucket").mkdir(parents=True)
    cmd = [python, str(THIS), "dlt-job", "--table-format", table_format, "--backend", backend]
    cmd += ["--bucket", str(root / "bucket"), "--pipelines-dir", str(root / "pipelines")]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHONPATH"))}
    started = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=root)
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        raise RuntimeError(f"dlt {table_format} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
    line = next(x for x in proc.stdout.splitlines() if x.startswith("DLT_RESULT "))
    found = json.loads(line.removeprefix("DLT_RESULT "))
    result = DltRun(table_format, wall, found["steps"], found["version"])
    if table_format == "delta":
        result.rows, result.files = delta_counts(root / "bucket" / "bench" / "events")
    else:
        result.rows, result.files = _dlt_iceberg_counts(root / "bucket" / "bench" / "events")
    print(f"  dlt {table_format}: {wall:.2f} s {found['steps']} ({result.rows} rows, {result.files} files)", flush=True)
    return result


def _dlt_iceberg_counts(table_dir: Path) -> tuple[int, int]:
    """Rows and data files of the Iceberg table dlt wrote (its newest metadata file, read by pyiceberg)."""
    from pyiceberg.table import StaticTable

    newest = max((table_dir / "metadata").glob("*.metadata.json"), key=lambda p: p.stat().st_mtime)
    table = StaticTable.from_metadata(str(newest))
    return iceberg_records(table), iceberg_files(table)


# --- the limit: COPY → pyarrow → Parquet ---------------------------------------------------------


def run_limit(rows: int) -> tuple[float, int, int]:
    import pyarrow as pa
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    out = WORK / "limit"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    types = {
        "id": pa.int64(),
        "label": pa.string(),
        "qty": pa.int32(),
        "price": pa.decimal128(12, 2),
        "score": pa.float64(),
        "active": pa.bool_(),
        "updated_at": pa.timestamp("us", tz="UTC"),
    }
    user, hostport = PG.split("@")
    host, port = hostport.split(":")
    select = f"SELECT {', '.join(COLUMNS)} FROM events"
    psql = ["psql", "-X", "-h", host, "-p", port, "-U", user, "-d", SOURCE_DB]
    started = time.perf_counter()
    proc = subprocess.Popen(
        [*psql, "-c", f"\\copy ({select}) TO STDOUT (FORMAT csv)"],
        stdout=subprocess.PIPE,
        env={**os.environ, "PGTZ": "UTC"},
    )
    assert proc.stdout is not None
    reader = pacsv.open_csv(
        proc.stdout,
        read_options=pacsv.ReadOptions(column_names=list(COLUMNS), block_size=8 << 20),
        convert_options=pacsv.ConvertOptions(
            column_types=types,
            true_values=["t"],
            false_values=["f"],
            null_values=[""],
            quoted_strings_can_be_null=False,
            timestamp_parsers=["%Y-%m-%d %H:%M:%S%z", pacsv.ISO8601],
        ),
    )
    written = 0
    with pq.ParquetWriter(out / "events.parquet", reader.schema) as writer:
        for batch in reader:
            writer.write_batch(batch)
            written += batch.num_rows
    if proc.wait() != 0:
        raise RuntimeError(f"psql \\copy exited {proc.returncode}")
    wall = time.perf_counter() - started
    size = (out / "events.parquet").stat().st_size
    print(f"  limit: {wall:.2f} s, {written} rows, {size / 1e6:.0f} MB", flush=True)
    if written != rows:
        raise RuntimeError(f"the limit wrote {written} rows of {rows}")
    return wall, written, size


# --- CDC: the sink vs pyiceberg's upsert ---------------------------------------------------------


def pyiceberg_job(argv: list[str]) -> None:
    """Apply the change set of `changes` to COPY_TABLE with pyiceberg alone: one transaction of
    delete + upsert. Prints its own seconds (the change set is read from PostgreSQL before)."""
    import pyarrow as pa
    from pyiceberg.expressions import In

    table = catalog().load_table(COPY_TABLE)
    schema = table.schema().as_arrow()
    rows = _sql(SOURCE_DB, f"SELECT {', '.join(COLUMNS)}, op FROM changes ORDER BY seq")
    deleted = [r[0] for r in rows if r[-1] == "d"]
    upserts = pa.Table.from_pylist(
        [dict(zip(COLUMNS, r[:-1], strict=True)) for r in rows if r[-1] != "d"], schema=schema
    )
    started = time.perf_counter()
    table = catalog().load_table(COPY_TABLE)
    tx = table.transaction()
    tx.delete(In("id", deleted))  # type: ignore[call-arg]
    result = tx.upsert(upserts, join_cols=["id"])
    tx.commit_transaction()
    own = time.perf_counter() - started
    counts = {"updated": result.rows_updated, "inserted": result.rows_inserted}
    print("PYICEBERG_RESULT " + json.dumps({"seconds": own, **counts}), flush=True)


def run_pyiceberg(timeout: float) -> tuple[float | None, float | None, str]:
    started = time.perf_counter()
    try:
        proc = subprocess.run(
            [sys.executable, str(THIS), "pyiceberg-job"], capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        return None, None, f"did not finish in {timeout:.0f} s"
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        raise RuntimeError(f"pyiceberg job failed:\n{proc.stderr[-4000:]}")
    line = next(x for x in proc.stdout.splitlines() if x.startswith("PYICEBERG_RESULT "))
    found = json.loads(line.removeprefix("PYICEBERG_RESULT "))
    note = f"{found['updated']} updated, {found['inserted']} inserted by upsert"
    print(f"  pyiceberg: {wall:.2f} s (transaction {found['seconds']:.2f} s; {note})", flush=True)
    return wall, float(found["seconds"]), note


def register_copy() -> int:
    """COPY_TABLE: the Iceberg table registered again from its current metadata file (same snapshot)."""
    lake = catalog()
    table = lake.load_table(TABLE)
    lake.register_table(COPY_TABLE, table.metadata_location)
    return int(table.current_snapshot().snapshot_id)


def files_touched(name: str, since: int) -> tuple[int, int]:
    """(data files removed, data files added) by the snapshots after snapshot `since`."""
    table = catalog().load_table(name)
    removed = added = 0
    after = False
    for entry in table.history():
        if after:
            summary = table.snapshot_by_id(entry.snapshot_id).summary
            removed += int(summary.get("deleted-data-files") or 0)
            added += int(summary.get("added-data-files") or 0)
        after = after or entry.snapshot_id == since
    return removed, added


def changed_rows(name: str, keys: list[int]) -> list[tuple[Any, ...]]:
    from pyiceberg.expressions import In

    rows = catalog().load_table(name).scan(row_filter=In("id", keys), selected_fields=COLUMNS).to_arrow()  # type: ignore[call-arg]
    rows = rows.sort_by("id")
    return list(zip(*[rows[c].to_pylist() for c in COLUMNS], strict=True))


# --- the run -------------------------------------------------------------------------------------


@dataclass
class Results:
    rows: int
    load_before: tuple[float, float, float]
    versions: dict[str, str] = field(default_factory=dict)
    source_s: float = 0.0
    pool: str = ""
    memory: str = ""
    pool_conf: list[str] = field(default_factory=list)
    src: Run | None = None
    sinks: dict[str, Run] = field(default_factory=dict)
    sink_counts: dict[str, tuple[int, int]] = field(default_factory=dict)
    dlt: dict[str, DltRun] = field(default_factory=dict)
    limit: tuple[float, int, int] | None = None
    changes: ChangeSet | None = None
    chg: Run | None = None
    cdc: Run | None = None
    cdc_files: tuple[int, int] | None = None
    pyiceberg: tuple[float | None, float | None, str] | None = None
    pyiceberg_files: tuple[int, int] | None = None
    cdc_verified: str = "—"
    loads: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def versions(dlt_python: str | None) -> dict[str, str]:
    import deltalake
    import pyarrow
    import pyiceberg
    import pyspark

    found = {
        "Python": platform.python_version(),
        "pyspark": pyspark.__version__,
        "pyiceberg": pyiceberg.__version__,
        "deltalake": deltalake.__version__,
        "pyarrow": pyarrow.__version__,
        "PostgreSQL": _sql("postgres", "SHOW server_version")[0][0],
    }
    if dlt_python:
        check = "import dlt, pyiceberg, deltalake, pyarrow; print(dlt.__version__, pyiceberg.__version__, deltalake.__version__, pyarrow.__version__)"
        out = subprocess.run([dlt_python, "-c", check], capture_output=True, text=True, check=True).stdout.split()
        found["dlt venv"] = f"dlt {out[0]} (pyiceberg {out[1]}, deltalake {out[2]}, pyarrow {out[3]})"
    return found


def run_all(args: argparse.Namespace) -> Results:
    only = set(args.only.split(","))
    res = Results(args.rows, os.getloadavg())
    res.versions = versions(args.dlt_python if "dlt" in only else None)
    print(f"load average before: {res.load_before}; versions {res.versions}", flush=True)
    res.source_s = create_source(args.rows)
    print(f"source: {args.rows:,} rows in {res.source_s:.1f} s", flush=True)
    if "connect" in only:
        setup_connect()
        res.memory = args.server_memory
        res.pool_conf = args.pool_conf
        res.pool = start_pool(args.server_memory, args.pool_conf)
        try:
            res.loads.append(os.getloadavg()[0])
            res.src = connect_run("src")
            for name in ("ice", "dl"):  # each sink on its own: one failing leaves the other's numbers
                res.loads.append(os.getloadavg()[0])
                found = _step(res, f"connect run {name}", connect_run, name)
                if found is not None:
                    res.sinks[name] = found
            if "ice" in res.sinks:
                table = catalog().load_table(TABLE)
                res.sink_counts["ice"] = (iceberg_records(table), iceberg_files(table))
            if "dl" in res.sinks:
                res.sink_counts["dl"] = delta_counts(WORK / "delta" / "events")
            print(f"  counts: {res.sink_counts}", flush=True)
            if "cdc" in only and "ice" in res.sinks:
                _step(res, "cdc", run_cdc, res, args)
        except Exception as exc:  # one run only: keep what the other steps measure, say what failed
            print(f"  connect FAILED: {exc}", flush=True)
            res.errors.append(f"connect: {str(exc)[-1500:]}")
        finally:
            stop_pool()
    if "dlt" in only:
        for table_format in ("iceberg", "delta"):
            res.loads.append(os.getloadavg()[0])
            found = _step(res, f"dlt {table_format}", run_dlt, args.dlt_python, table_format, args.dlt_backend)
            if found is not None:
                res.dlt[table_format] = found
    if "limit" in only:
        res.loads.append(os.getloadavg()[0])
        res.limit = _step(res, "limit", run_limit, args.rows)
    return res


def _step(res: Results, what: str, fn: Any, *args: Any) -> Any:
    """`fn(*args)`, or None with the failure recorded (the bench runs once; the rest still runs)."""
    try:
        return fn(*args)
    except Exception as exc:
        print(f"  {what} FAILED: {exc}", flush=True)
        res.errors.append(f"{what}: {str(exc)[-1500:]}")
        return None


def run_cdc(res: Results, args: argparse.Namespace) -> None:
    res.changes = create_changes(args.rows, args.changes)
    res.chg = connect_run("chg")
    start = register_copy()
    res.loads.append(os.getloadavg()[0])
    res.cdc = connect_run("ice_cdc")
    res.cdc_files = files_touched(TABLE, start)
    res.loads.append(os.getloadavg()[0])
    res.pyiceberg = run_pyiceberg(args.pyiceberg_timeout)
    if res.pyiceberg[0] is None:
        res.cdc_verified = "sink only (pyiceberg unfinished)"
        return
    res.pyiceberg_files = files_touched(COPY_TABLE, start)
    keys = [int(r[0]) for r in _sql(SOURCE_DB, "SELECT id FROM changes")]
    ours, theirs = changed_rows(TABLE, keys), changed_rows(COPY_TABLE, keys)
    expected = res.changes.updates + res.changes.inserts
    count = args.rows - res.changes.deletes + res.changes.inserts
    totals = (iceberg_records(catalog().load_table(TABLE)), iceberg_records(catalog().load_table(COPY_TABLE)))
    ok = ours == theirs and len(ours) == expected and totals == (count, count)
    ok = ok and all(str(r[1]).startswith(("changed ", "new ")) for r in ours)
    res.cdc_verified = "yes" if ok else f"**no** ({len(ours)}/{len(theirs)} changed rows, totals {totals})"
    print(f"  cdc verified: {res.cdc_verified}", flush=True)


# --- the sections --------------------------------------------------------------------------------


def _s(value: float | None) -> str:
    return "—" if value is None else f"{value:.1f}"


def _x(ours: float | None, theirs: float | None) -> str:
    return "—" if not ours or not theirs else f"{ours / theirs:.2f}x"


def sections(res: Results, command: str) -> list[str]:
    n = res.rows
    load = f"{res.load_before[0]:.1f} / {res.load_before[1]:.1f} / {res.load_before[2]:.1f}"
    loads = f"{min(res.loads):.1f} to {max(res.loads):.1f}" if res.loads else "—"
    versions = ", ".join(f"{k} {v}" for k, v in res.versions.items())
    common = (
        f"Reproduce: `{command}`. One run on this {os.cpu_count()}-core machine, shared with other work (1-, 5-,"
        f" 15-minute load average before the run: {load}; 1-minute load before each timed step: {loads})."
        f" Versions: {versions}. Source: `events` ({n:,} rows from generate_series, a bigint key + text with"
        f" NULLs, integer, numeric(12,2), double, boolean, timestamptz; generated in {res.source_s:.1f} s)."
    )
    lines = [
        f"## lakehouse sinks: PostgreSQL → Iceberg / Delta full load of {n:,} rows vs dlt and the COPY → Parquet limit",
        "",
        common + " Times are wall seconds of whole commands from the bench process (start-up included)."
        f" connect: on a warm pool (`connect pools start warm --capacity 4 --memory {res.memory}"
        + "".join(f" --conf {kv}" for kv in res.pool_conf)
        + "`, started before the timing:"
        f" {res.pool.rstrip('.')}); pipeline = `connect run src` (JdbcSourceConnector → topic, 4 snapshot"
        " partitions) + `connect run ice` / `connect run dl` (the sink alone; both sinks read the same topic)."
        ' dlt: `sql_table(backend="pyarrow", chunk_size=100000)` → `filesystem` (local path) with'
        " `table_format`, loader_file_format parquet, otherwise dlt's defaults, fresh pipeline, in /tmp/dltvenv."
        " limit: `psql \\copy (SELECT …) TO STDOUT (FORMAT csv)` → `pyarrow.csv.open_csv` → one"
        " `ParquetWriter` (snappy, pyarrow's default), no table format. Verified: each table's row count"
        " (Iceberg snapshot summary, Delta through delta-rs) equals the source's.",
        "",
        "| tool | format | sink s | pipeline s | rows/s (pipeline) | data files | rows | verified |",
        "|---|---|---:|---:|---:|---:|---:|---|",
    ]
    src_s = res.src.command_s if res.src else None
    pipelines: dict[str, float] = {}
    for name, fmt in (("ice", "iceberg"), ("dl", "delta")):
        run = res.sinks.get(name)
        if run is None or src_s is None:
            continue
        pipelines[fmt] = src_s + run.command_s
        rows, files = res.sink_counts.get(name, (0, 0))
        ok = "yes" if rows == n else "**no**"
        lines.append(
            f"| connect (warm) | {fmt} | {run.command_s:.1f} (run {run.wall_s:.1f}) | {pipelines[fmt]:.1f}"
            f" (source {src_s:.1f}) | {n / pipelines[fmt]:,.0f} | {files} | {rows:,} | {ok} |"
        )
    for fmt, d in res.dlt.items():
        steps = ", ".join(f"{k} {v:.1f}" for k, v in d.steps.items() if k in ("extract", "normalize", "load"))
        ok = "yes" if d.rows == n else "**no**"
        lines.append(
            f"| dlt {d.version} | {fmt} | normalize+load {d.steps.get('normalize', 0) + d.steps.get('load', 0):.1f}"
            f" | {d.wall_s:.1f} ({steps}) | {n / d.wall_s:,.0f} | {d.files} | {d.rows:,} | {ok} |"
        )
    if res.limit:
        wall, written, size = res.limit
        lines.append(
            f"| limit: COPY → pyarrow | parquet ({size / 1e6:,.0f} MB) | — | {wall:.1f} | {n / wall:,.0f} | 1 |"
            f" {written:,} | yes |"
        )
    lines += ["", "Ratios from this run (pipeline seconds; below 1x = ours is faster):", ""]
    for fmt, ours in pipelines.items():
        dlt_run = res.dlt.get(fmt)
        limit = res.limit[0] if res.limit else None
        vs_dlt = _x(ours, dlt_run.wall_s if dlt_run else None)
        vs_limit = _x(ours, limit)
        met_dlt = "—" if dlt_run is None else ("met" if ours <= dlt_run.wall_s else "**missed**")
        met_limit = "—" if limit is None else ("met" if ours <= 1.5 * limit else "**missed**")
        lines.append(
            f"- {fmt}: ours ÷ dlt {vs_dlt} (target ≤ 1x: {met_dlt}); ours ÷ limit {vs_limit}"
            f" (target ≤ 1.5x: {met_limit}); sink alone ÷ limit"
            f" {_x(res.sinks['ice' if fmt == 'iceberg' else 'dl'].command_s, limit)}."
        )
    if res.errors:
        lines += ["", "Failed in this run: " + "; ".join(" ".join(e.split()) for e in res.errors)]
    if res.cdc and res.changes:
        lines += ["", *cdc_section(res, common)]
    return lines


def cdc_section(res: Results, common: str) -> list[str]:
    assert res.cdc is not None and res.changes is not None
    c = res.changes
    lines = [
        f"## lakehouse sinks: {c.total:,} CDC changes into a {res.rows:,}-row Iceberg table, sink vs pyiceberg upsert",
        "",
        common + f" Change set: {c.updates:,} updates and {c.deletes:,} deletes of distinct random keys spread"
        f" over the whole table, {c.inserts:,} new keys, in random order, one change per key; read into topic"
        f" `lake_changes` by a JDBC source first ({res.chg.command_s if res.chg else 0:.1f} s, not counted)."
        " The table: the full load above (Iceberg, no partitioning). Before the sink runs, it is registered a"
        " second time from the same metadata file, so both start from the same snapshot. connect: `connect run"
        " ice_cdc` on the warm pool (IcebergSinkConnector, `iceberg.tables.cdc-field=op`, id column `id`,"
        " copy-on-write deletes of the batch's keys + append, one commit; `op` added to the table by schema"
        ' evolution). pyiceberg: one transaction of `delete(In("id", deleted keys))` + `upsert(rows,'
        ' join_cols=["id"])` + commit, in a subprocess (its time inside that transaction in brackets; the'
        f" change set read from PostgreSQL before). Verified: {res.cdc_verified} (both tables hold the same rows"
        " for every changed key, and the expected row count).",
        "",
        "| tool | s | data files removed / added | note |",
        "|---|---:|---:|---|",
    ]
    removed, added = res.cdc_files or (0, 0)
    lines.append(
        f"| connect (warm) | {res.cdc.command_s:.1f} (run {res.cdc.wall_s:.1f}) | {removed} / {added} |"
        f" {res.cdc.rows} records |"
    )
    if res.pyiceberg:
        wall, own, note = res.pyiceberg
        pr, pa_ = res.pyiceberg_files or (0, 0)
        lines.append(f"| pyiceberg upsert + delete | {_s(wall)} ({_s(own)}) | {pr} / {pa_} | {note} |")
        met_5 = "met" if res.cdc.command_s <= 5 else "**missed**"
        faster = "—"
        if wall is not None and own is not None:
            outer = "met" if res.cdc.command_s < wall else "**missed**"
            inner = "met" if res.cdc.wall_s < own else "**missed**"
            faster = f"{outer} on whole commands, {inner} on the runs' own time"
        lines += [
            "",
            f"From this run: ours ÷ pyiceberg {_x(res.cdc.command_s, wall)} (command vs subprocess wall;"
            f" run {res.cdc.wall_s:.1f} s ÷ transaction {_s(own)} s: {_x(res.cdc.wall_s, own)}). Targets:"
            f" ≤ 5 s per run: {met_5}; faster than pyiceberg's upsert: {faster}.",
        ]
    return lines


def cleanup() -> None:
    logs = WORK / "home" / "pools"
    if logs.exists():  # the warm pool's logs outlive the run: they say why a server died
        shutil.copytree(logs, WORK.with_name(WORK.name + "-pool-logs"), dirs_exist_ok=True)
    for name in (SOURCE_DB, META_DB, CATALOG_DB):
        _sql("postgres", f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    shutil.rmtree(WORK, ignore_errors=True)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "dlt-job":
        dlt_job(sys.argv[2:])
        return
    if len(sys.argv) > 1 and sys.argv[1] == "pyiceberg-job":
        pyiceberg_job(sys.argv[2:])
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--changes", type=int, default=10_000)
    parser.add_argument("--only", default=",".join(TOOLS), help="comma-separated subset of " + ",".join(TOOLS))
    parser.add_argument("--dlt-python", default="/tmp/dltvenv/bin/python")
    parser.add_argument("--dlt-backend", default="pyarrow", choices=("pyarrow", "connectorx", "sqlalchemy"))
    parser.add_argument("--server-memory", default="1g", help="the warm pool's JVM heap")
    parser.add_argument("--pool-conf", action="append", default=[], help="key=value for `pools start --conf`")
    parser.add_argument("--pyiceberg-timeout", type=float, default=900)
    parser.add_argument("--no-write", action="store_true", help="print only; leave bench/RESULTS.md alone")
    parser.add_argument("--keep", action="store_true", help="leave the databases and files")
    args = parser.parse_args()
    try:
        res = run_all(args)
    finally:
        if not args.keep:
            cleanup()
    command = f".venv/bin/python bench/lakehouse_bench.py --rows {args.rows}"
    if args.server_memory != parser.get_default("server_memory"):
        command += f" --server-memory {args.server_memory}"
    command += "".join(f" --pool-conf {kv}" for kv in args.pool_conf)
    lines = sections(res, command)
    if args.no_write:
        print("\n".join(lines))
    else:
        sys.path.insert(0, str(THIS.parent))
        from _results import write_sections

        write_sections(lines)


if __name__ == "__main__":
    main()
