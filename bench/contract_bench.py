"""What schema contracts cost on the JDBC full sync (issue 34's bound: at most 5%).

    .venv/bin/python bench/contract_bench.py [--rows 10000000] [--rounds 2]

`connect run src sink` (PostgreSQL → topic → PostgreSQL, upsert on `id`, one spark-submit, timed
end to end, as in the JDBC benchmark), each variant in a metadata store and a target table of its
own: without contracts, and with `schema.contract=freeze` on both connectors plus
`schema.propagation=propagate_columns` on the sink (every run compares each topic's records with
the shape its connector let through; no change happens, so the run is what a day's sync pays). The
variants alternate for `--rounds` rounds (each round a fresh full sync of both); the table gives
each variant's best and the ratio of the bests. Verified: row counts. Writes bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _connect_jdbc as connect
import _jdbc_data as data
from _results import write_sections

CONTRACT_SOURCE = {"schema.contract": "freeze"}
CONTRACT_SINK = {"schema.contract": "freeze", "schema.propagation": "propagate_columns", "auto.create": True}
VARIANTS = {"_plain": ({}, {"auto.create": True}), "_contract": (CONTRACT_SOURCE, CONTRACT_SINK)}


def _count(table: str) -> int:
    with data.pg(data.TARGET_DB) as conn, conn.cursor() as cur:
        cur.execute(f"SELECT count(*) FROM {table}")
        return int(cur.fetchone()[0])


def _drop(table: str) -> None:
    data.ensure_pg_database(data.TARGET_DB)
    with data.pg(data.TARGET_DB) as conn, conn.cursor() as cur:
        cur.execute(f"DROP TABLE IF EXISTS {table}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    print(f"source: {args.rows:,} rows", flush=True)
    data.create_source("pg", args.rows)
    walls: dict[str, list[float]] = {v: [] for v in VARIANTS}
    loads: dict[str, list[float]] = {v: [] for v in VARIANTS}
    for round_ in range(args.rounds):
        for variant, (source_extra, sink_extra) in VARIANTS.items():
            table = f"contract{variant}"
            _drop(table)
            connect.setup("pg", table, variant=variant, source_extra=source_extra, sink_extra=sink_extra)
            loads[variant].append(os.getloadavg()[0])
            wall = connect.sync("pg", variant)
            assert _count(table) == args.rows, f"{table}: {_count(table)} rows, expected {args.rows}"
            walls[variant].append(wall)
            print(f"round {round_ + 1} {variant[1:]}: {wall:.1f} s", flush=True)
    plain, contract = min(walls["_plain"]), min(walls["_contract"])
    lines = [
        f"## schema contracts on the JDBC full sync of {args.rows:,} rows",
        "",
        "Reproduce: `.venv/bin/python bench/contract_bench.py`. `connect run src sink` (PostgreSQL → topic →",
        "PostgreSQL, upsert on `id`, one spark-submit, timed end to end), without contracts and with",
        "`schema.contract=freeze` on both connectors and `schema.propagation=propagate_columns` on the sink,",
        f"alternating, {args.rounds} round(s) each; best of each. Verified: row counts.",
        "",
        "| run | best wall s | all runs s | 1-min load before |",
        "|---|---:|---|---|",
        f"| no contracts | {plain:.1f} | {', '.join(f'{w:.1f}' for w in walls['_plain'])} | "
        f"{', '.join(f'{x:.1f}' for x in loads['_plain'])} |",
        f"| contracts | {contract:.1f} | {', '.join(f'{w:.1f}' for w in walls['_contract'])} | "
        f"{', '.join(f'{x:.1f}' for x in loads['_contract'])} |",
        "",
        f"Checking the contracts costs {100 * (contract / plain - 1):+.1f}% ({contract / plain:.3f}x). What the",
        "check does per run and topic: the records' shape from the driver's schema (no Spark job), one read of",
        "the connector's shapes, a comparison of two fingerprints, and an upsert that matches nothing.",
        "",
    ]
    write_sections(lines)


if __name__ == "__main__":
    main()
