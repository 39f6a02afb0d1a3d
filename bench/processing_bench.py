"""What record processing costs on the JDBC sync: a chain of transforms, and bad rows tolerated.

    .venv/bin/python bench/processing_bench.py [--rows 10000000] [--error-rows 1000000]

Two comparisons, each `connect run src sink` (PostgreSQL → topic → PostgreSQL, one spark-submit,
timed end to end as in `jdbc_bench.py`), each side in a metadata store and target table of its own:

* **transforms**: the full sync of `--rows` rows with no transforms, then with a chain of 5 on the
  source (InsertField$Value static field, ReplaceField$Value rename, MaskField$Value, Cast$Value,
  ValueToKey): the chain runs in the Python workers on the Arrow batches the source reads. Both
  sinks create their table (`auto.create`); verified: the target's row count, and the transformed
  table's columns hold what the chain says.
* **errors**: the full sync of `--error-rows` rows into a target whose `int_val` is NOT NULL and whose
  `body` is varchar(250): clean (`errors.tolerance=none`, the default fast path), then with 0.1% bad
  rows (0.05% NULL `int_val`, 0.05% a 300-character `body`) under `errors.tolerance=all` with a
  dead-letter topic. Verified: the target holds exactly the good rows and the run dead-lettered
  exactly the bad ones.

Writes its tables to bench/RESULTS.md (section "record processing").
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _connect_jdbc as connect
import _jdbc_data as data
from _results import write_sections

TRANSFORMS = {
    "transforms": "origin,rename,mask,cast,key",
    "transforms.origin.type": "org.apache.kafka.connect.transforms.InsertField$Value",
    "transforms.origin.static.field": "origin",
    "transforms.origin.static.value": "bench",
    "transforms.rename.type": "org.apache.kafka.connect.transforms.ReplaceField$Value",
    "transforms.rename.renames": "label:title",
    "transforms.mask.type": "org.apache.kafka.connect.transforms.MaskField$Value",
    "transforms.mask.fields": "body",
    "transforms.cast.type": "org.apache.kafka.connect.transforms.Cast$Value",
    "transforms.cast.spec": "small_val:int32",
    "transforms.key.type": "org.apache.kafka.connect.transforms.ValueToKey",
    "transforms.key.fields": "id",
}
BAD_EVERY = 2000  # a NULL int_val at id % 2000 = 1000 and a long body at id % 2000 = 0: 0.1% of the rows


def _count(table: str, where: str = "TRUE") -> int:
    with data.pg(data.TARGET_DB) as conn, conn.cursor() as cur:
        cur.execute(f"SELECT count(*) FROM {table} WHERE {where}")
        return int(cur.fetchone()[0])


def _drop(*tables: str) -> None:
    data.ensure_pg_database(data.TARGET_DB)
    with data.pg(data.TARGET_DB) as conn, conn.cursor() as cur:
        for table in tables:
            cur.execute(f"DROP TABLE IF EXISTS {table}")


def _load() -> float:
    return float(os.getloadavg()[0])


def transforms(rows: int) -> list[str]:
    print(f"source: {rows:,} rows", flush=True)
    data.create_source("pg", rows)
    _drop("proc_plain", "proc_chain")
    results = {}
    for variant, table, extra in (("_plain", "proc_plain", {}), ("_chain", "proc_chain", TRANSFORMS)):
        connect.setup("pg", table, variant=variant, source_extra=extra, sink_extra={"auto.create": True})
        load = _load()
        print(f"{variant[1:]}: load {load:.1f}", flush=True)
        results[variant] = (connect.sync("pg", variant), load)
        assert _count(table) == rows, f"{table}: {_count(table)} rows, expected {rows}"
    assert _count("proc_chain", "origin = 'bench'") == rows, "InsertField missed rows"
    with data.pg(data.TARGET_DB) as conn, conn.cursor() as cur:
        cur.execute("SELECT column_name FROM information_schema.columns WHERE table_name = 'proc_chain'")
        columns = {r[0] for r in cur.fetchall()}
    assert "title" in columns and "label" not in columns, f"ReplaceField did not rename: {sorted(columns)}"
    assert _count("proc_chain", "body IS NOT NULL AND body <> ''") == 0, "MaskField left a body"
    plain, chain = results["_plain"][0], results["_chain"][0]
    return [
        f"## record processing: a chain of 5 transforms on the JDBC full sync of {rows:,} rows",
        "",
        "Reproduce: `.venv/bin/python bench/processing_bench.py`. `connect run src sink` (PostgreSQL →",
        "topic → PostgreSQL, upsert on `id`, one spark-submit, timed end to end), without transforms and",
        "with 5 on the source (InsertField$Value, ReplaceField$Value, MaskField$Value, Cast$Value,",
        "ValueToKey), each into a table of its own (auto.create). Verified: row counts; the chained",
        "table has the static field, the renamed column and masked bodies.",
        "",
        "| run | wall s | 1-min load before |",
        "|---|---:|---:|",
        f"| no transforms | {plain:.1f} | {results['_plain'][1]:.1f} |",
        f"| 5 transforms | {chain:.1f} | {results['_chain'][1]:.1f} |",
        "",
        f"The chain costs {100 * (chain / plain - 1):+.1f}% ({chain / plain:.2f}x the run without transforms).",
        "",
    ]


def _target_ddl(table: str) -> str:
    ddl = data.pg_create_table_sql(table)
    return ddl.replace("int_val integer", "int_val integer NOT NULL").replace("body text", "body varchar(250)")


def errors(rows: int) -> list[str]:
    print(f"source: {rows:,} rows", flush=True)
    data.create_source("pg", rows)
    _drop("proc_clean", "proc_tolerant")
    with data.pg(data.TARGET_DB) as conn, conn.cursor() as cur:
        cur.execute(_target_ddl("proc_clean"))
        cur.execute(_target_ddl("proc_tolerant"))
    base = {"auto.create": False}
    connect.setup("pg", "proc_clean", variant="_clean", sink_extra=base)
    load_clean = _load()
    clean = connect.sync("pg", "_clean")
    assert _count("proc_clean") == rows

    with data.pg(data.SOURCE_DB) as conn, conn.cursor() as cur:
        cur.execute(f"UPDATE {data.TABLE} SET int_val = NULL WHERE id % {BAD_EVERY} = {BAD_EVERY // 2}")
        cur.execute(f"UPDATE {data.TABLE} SET body = repeat('x', 300) WHERE id % {BAD_EVERY} = 0")
        cur.execute(f"SELECT count(*) FROM {data.TABLE} WHERE int_val IS NULL OR length(body) > 250")
        bad = int(cur.fetchone()[0])
        cur.execute(f"VACUUM (ANALYZE) {data.TABLE}")
    tolerant = {
        **base,
        "errors.tolerance": "all",
        "errors.deadletterqueue.topic.name": "proc-dlq",
        "errors.deadletterqueue.context.headers.enable": True,
    }
    connect.setup("pg", "proc_tolerant", variant="_tolerant", sink_extra=tolerant)
    load_tolerant = _load()
    started = time.perf_counter()
    took = connect.sync("pg", "_tolerant")
    print(f"  tolerant sync {time.perf_counter() - started:.1f} s", flush=True)
    assert _count("proc_tolerant") == rows - bad, f"{_count('proc_tolerant')} rows, expected {rows - bad}"
    return [
        f"## record processing: {rows:,} rows with 0.1% bad rows, errors.tolerance=all",
        "",
        "Reproduce: `.venv/bin/python bench/processing_bench.py`. `connect run src sink` (PostgreSQL →",
        "topic → PostgreSQL, upsert on `id`) into a table whose `int_val` is NOT NULL and `body`",
        "varchar(250). Clean: no bad rows, `errors.tolerance=none` (the binary COPY fast path). Bad:",
        f"{bad:,} rows ({100 * bad / rows:.2f}%: NULL `int_val`, or a 300-character `body`) under",
        "`errors.tolerance=all` with a dead-letter topic and context headers. Verified: the target holds",
        "exactly the good rows.",
        "",
        "| run | wall s | 1-min load before |",
        "|---|---:|---:|",
        f"| clean | {clean:.1f} | {load_clean:.1f} |",
        f"| 0.1% bad, tolerated | {took:.1f} | {load_tolerant:.1f} |",
        "",
        f"Tolerating the bad rows costs {took / clean:.2f}x the clean run.",
        "",
    ]


def _mariadb_count(table: str) -> int:
    with data.mariadb(data.TARGET_DB) as conn, conn.cursor() as cur:
        cur.execute(f"SELECT count(*) FROM `{table}`")
        return int(cur.fetchone()[0])


def targets(rows: int) -> list[str]:
    """The same sync into PostgreSQL and into MariaDB (each table made by `auto.create`)."""
    print(f"source: {rows:,} rows", flush=True)
    data.create_source("pg", rows)
    _drop("proc_pg_target")
    data.ensure_mariadb_database(data.TARGET_DB)
    with data.mariadb(data.TARGET_DB) as conn, conn.cursor() as cur:
        cur.execute("DROP TABLE IF EXISTS proc_mariadb_target")
        cur.execute("DROP TABLE IF EXISTS connect_sink_offsets")
    server = data.MARIADB_SERVER
    mariadb = {
        "connection.url": f"jdbc:mariadb://{server.host}:{server.port}/{data.TARGET_DB}",
        "connection.user": server.user,
        "connection.password": server.password,
    }
    results = {}
    for variant, table, extra in (
        ("_pgt", "proc_pg_target", {}),
        ("_mariadbt", "proc_mariadb_target", mariadb),
    ):
        connect.setup("pg", table, variant=variant, sink_extra={"auto.create": True, **extra})
        load = _load()
        print(f"{variant[1:]}: load {load:.1f}", flush=True)
        results[variant] = (connect.sync("pg", variant), load)
    assert _count("proc_pg_target") == rows
    assert _mariadb_count("proc_mariadb_target") == rows, f"MariaDB: {_mariadb_count('proc_mariadb_target')} rows"
    pg_s, maria_s = results["_pgt"][0], results["_mariadbt"][0]
    return [
        f"## JDBC sink targets: PostgreSQL and MariaDB, {rows:,} rows",
        "",
        "Reproduce: `.venv/bin/python bench/processing_bench.py --only targets`. `connect run src sink`",
        "(PostgreSQL source → topic → target, upsert on `id`, table made by `auto.create`, one",
        "spark-submit, timed end to end). PostgreSQL: COPY (binary, ADBC) into the empty table.",
        "MariaDB: `LOAD DATA LOCAL INFILE` of text pyarrow encodes, from the Spark workers into an InnoDB",
        "staging table,",
        "then one `INSERT … SELECT … ON DUPLICATE KEY UPDATE` transaction. Verified: row counts.",
        "",
        "| target | wall s | rows/s | 1-min load before |",
        "|---|---:|---:|---:|",
        f"| PostgreSQL | {pg_s:.1f} | {rows / pg_s:,.0f} | {results['_pgt'][1]:.1f} |",
        f"| MariaDB | {maria_s:.1f} | {rows / maria_s:,.0f} | {results['_mariadbt'][1]:.1f} |",
        "",
        f"MariaDB takes {maria_s / pg_s:.2f}x the PostgreSQL sync.",
        "",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--error-rows", type=int, default=1_000_000)
    parser.add_argument("--target-rows", type=int, default=1_000_000)
    parser.add_argument("--only", choices=("transforms", "errors", "targets"), default=None)
    args = parser.parse_args()
    lines: list[str] = []
    if args.only in (None, "transforms"):
        lines += transforms(args.rows)
    if args.only in (None, "errors"):
        lines += errors(args.error_rows)
    if args.only in (None, "targets"):
        lines += targets(args.target_rows)
    write_sections(lines)


if __name__ == "__main__":
    main()
