"""Incremental snapshots (issue 35): a table re-read while changes stream into it, next to its initial snapshot, on a warm pool.

    .venv/bin/python bench/snapshot_bench.py [--rows 10000000] [--rate 1000] [--samples 20] [--no-write]

The source is a PostgreSQL of the bench's own (`wal_level=logical`, as bench/cdc_bench.py starts it),
table `public.items` with `--rows` rows; the target is a table of the shared server's `bench_target`,
written by the JDBC sink (upsert by key, deletes) from the CDC source's topic, on a warm pool
(`connect pools start warm`), as bench/cdc_bench.py sets them up.

1. **Initial snapshot**: the connector's first runs copy the table (`snapshot.mode=initial`);
   `connect run src sink` until the target's checksum equals the source's. Throughput: rows / the
   source runs' seconds, and rows / the wall time until the target had them all.
2. **Idle streaming**: a writer makes `--rate` changes a second (60% updates, 20% inserts, 10%
   deletes, 10% primary-key moves, in transactions of a tenth of a second's changes), while
   `connect run src sink` runs back to back; `--samples` times a probe row is inserted and the time
   until the target shows it is measured (the streaming latency).
3. **Incremental snapshot**: with the writer still going, `connect snapshot src public.items`; the
   runs go on back to back until the snapshot's progress is gone from the committed position, probes
   measured all along. Throughput: rows read / the time from the signal to the end.
4. The writer stops; the runs go on until the target's checksum equals the source's (exact: a sum of
   per-row md5s and the row count). Then **per key**, over the topic: every update takes a value of
   a sequence (`qty`) larger than every value before it, so a snapshot event carrying a `qty` smaller
   than an earlier event's of the same key, or bringing back a deleted key, would be a chunk row
   that overwrote a newer change. The bench counts them (the issue's bound: none).

Writes the section `## incremental snapshot: …` of bench/RESULTS.md (unless `--no-write`).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import threading
import time
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _jdbc_data as data
from cdc_bench import PUBLICATION, TABLE_DDL, Checksum, Store, checksum, connect_pg

from connect_core.runtime.store.db import make_engine
from connect_core.runtime.topics.store import TopicStore
from connect_core.testing.servers import PgServer, start_logical_pg

TOPIC = "cdc.public.items"
VERSION_BASE = 1_000_000_000  # every update's qty is above the initial rows'
MOVED_BASE = 10**11  # keys moved by the writer: beyond every initial and inserted one
PROBE_BASE = 10**12
TICK_S = 0.1


# --- the writer ----------------------------------------------------------------------------------


class Writer(threading.Thread):
    """`rate` changes a second against random keys, in one transaction per tick."""

    def __init__(self, src: PgServer, rows: int, rate: int) -> None:
        super().__init__(daemon=True, name="writer")
        self.src, self.rows, self.rate = src, rows, rate
        self.changes = 0
        self.touched: set[int] = set()
        self.error: Exception | None = None
        self.seconds = 0.0
        self._stop_event = threading.Event()
        self._next_insert = rows + 1

    def run(self) -> None:
        per_tick = max(1, round(self.rate * TICK_S))
        n_upd, n_ins, n_del = per_tick * 6 // 10, per_tick * 2 // 10, per_tick // 10
        n_mov = per_tick - n_upd - n_ins - n_del
        started = time.perf_counter()
        try:
            with connect_pg(self.src.dsn) as conn, conn.cursor() as cur:
                tick = started
                while not self._stop_event.is_set():
                    ids = random.sample(range(1, self.rows + 1), n_upd + n_del + n_mov)
                    upd, dele, mov = ids[:n_upd], ids[n_upd : n_upd + n_del], ids[n_upd + n_del :]
                    new = list(range(self._next_insert, self._next_insert + n_ins))
                    self._next_insert += n_ins
                    cur.execute("BEGIN")
                    cur.execute(
                        "UPDATE items SET qty = nextval('version'), label = label || '+',"
                        " updated_at = clock_timestamp() WHERE id = ANY(%s)",
                        (upd,),
                    )
                    done = cur.rowcount
                    cur.execute(
                        "INSERT INTO items SELECT g, 'new ' || g, 1, nextval('version'), clock_timestamp(), NULL"
                        " FROM unnest(%s::bigint[]) g",
                        (new,),
                    )
                    done += cur.rowcount
                    cur.execute("DELETE FROM items WHERE id = ANY(%s)", (dele,))
                    done += cur.rowcount
                    cur.execute(
                        "UPDATE items SET id = id + %s, qty = nextval('version') WHERE id = ANY(%s)", (MOVED_BASE, mov)
                    )
                    done += cur.rowcount
                    cur.execute("COMMIT")
                    self.changes += done
                    self.touched.update(ids)
                    self.touched.update(new)
                    self.touched.update(i + MOVED_BASE for i in mov)
                    tick += TICK_S
                    time.sleep(max(0.0, tick - time.perf_counter()))
        except Exception as exc:
            self.error = exc
        self.seconds = time.perf_counter() - started

    def stop(self) -> None:
        self._stop_event.set()
        self.join(timeout=60)
        if self.error:
            raise self.error


# --- runs back to back, probes --------------------------------------------------------------------


class Loop(threading.Thread):
    """`connect run src sink` again and again; the source runs' seconds and rows are kept."""

    def __init__(self, store: Store) -> None:
        super().__init__(daemon=True, name="runs")
        self.store = store
        self.source_runs: list[tuple[float, float, int]] = []  # (finished at, wall_s, rows)
        self.error: Exception | None = None
        self._stop_event = threading.Event()

    def run(self) -> None:
        while not self._stop_event.is_set():
            try:
                _, runs = self.store.run()
            except Exception as exc:
                self.error = exc
                return
            src = next((r for r in runs if r.get("connector") == self.store.source), {})
            self.source_runs.append((time.perf_counter(), float(src.get("wall_s", 0.0)), int(src.get("rows") or 0)))

    def stop(self) -> None:
        self._stop_event.set()
        self.join(timeout=900)


def probe(store: Store, probe_id: int, loop: Loop) -> float:
    """Seconds from a probe row's commit until the target shows it."""
    with connect_pg(store.src.dsn) as src, data.pg(data.TARGET_DB) as tgt:
        with src.cursor() as cur:
            cur.execute("INSERT INTO items VALUES (%s, 'probe', 1, 1, clock_timestamp(), NULL)", (probe_id,))
        committed = time.perf_counter()
        with tgt.cursor() as cur:
            while True:
                cur.execute(f"SELECT 1 FROM {store.target} WHERE id = %s", (probe_id,))
                if cur.fetchone():
                    return time.perf_counter() - committed
                if loop.error:
                    raise loop.error
                if time.perf_counter() - committed > 600:
                    raise RuntimeError(f"probe {probe_id} not in the target after 600 s")
                time.sleep(0.02)


def progress(store: Store) -> dict[str, Any] | None:
    """The incremental snapshot's committed progress (None: none running)."""
    with data.pg(store.meta_db) as conn, conn.cursor() as cur:
        cur.execute(
            "SELECT \"offset\" -> 'incremental' FROM connect.source_positions WHERE connector = %s", (store.source,)
        )
        found = cur.fetchone()
    return found[0] if found and found[0] else None


def waiting_signals(store: Store) -> int:
    """Signals no commit consumed yet."""
    with data.pg(store.meta_db) as conn, conn.cursor() as cur:
        cur.execute(
            "SELECT count(*) FROM connect.connector_signals WHERE connector = %s AND consumed_run IS NULL",
            (store.source,),
        )
        return int(cur.fetchone()[0])


def converge(store: Store, expected: Checksum, limit: int) -> int:
    """`connect run src sink` until the target equals the source: the commands it took."""
    for n in range(1, limit + 1):
        store.run()
        if store.target_checksum() == expected:
            return n
    raise RuntimeError(f"target {store.target_checksum()} ≠ source {expected} after {limit} commands")


# --- per key --------------------------------------------------------------------------------------


def stale_snapshot_events(store: Store, keys: set[int]) -> tuple[int, int]:
    """(snapshot events checked, those older than an earlier event of their key): over the topic's
    events of `keys`, in topic order."""
    topics = TopicStore(make_engine(data.pg_url(store.meta_db)), "")
    key_set = pa.array(sorted(keys), pa.int64())
    segments = sorted(topics.all_segments([TOPIC]), key=lambda s: (s.partition, s.start_offset))
    latest: dict[int, tuple[int, bool]] = {}  # key → (largest qty seen, deleted since)
    checked = stale = 0
    for segment in segments:
        table = pq.read_table(
            segment.path.removeprefix("file://"), columns=["__key", "op", "before", "after", "source"]
        )
        ids = pc.struct_field(table.column("__key"), "id")
        table = table.filter(pc.is_in(ids, value_set=key_set))
        for row in table.to_pylist():
            key, op = row["__key"]["id"], row["op"]
            seen, deleted = latest.get(key, (-1, False))
            if op == "d" or row["after"] is None:  # a delete, or its tombstone
                latest[key] = (seen, True)
                continue
            qty = int(row["after"]["qty"])
            if op == "r" and row["source"]["snapshot"] == "incremental":
                checked += 1
                if qty < seen or (deleted and qty <= seen):
                    stale += 1
            latest[key] = (max(seen, qty), False)
    return checked, stale


# --- the run --------------------------------------------------------------------------------------


def pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


@dataclass
class Pass:
    """One incremental snapshot of the table, with `parallel` chunk reads at once."""

    parallel: int
    rows: int = 0
    wall_s: float = 0.0
    source_s: float = 0.0
    runs: int = 0
    during: list[float] = field(default_factory=list)
    load: tuple[float, float] = (0.0, 0.0)  # the 1-minute load average at its start and its end


def incremental(store: Store, loop: Loop, parallel: int, rows: int, probe_id: int) -> Pass:
    """`connect snapshot src public.items`, then probes until its progress is gone."""
    done = Pass(parallel)
    with connect_pg(store.src.dsn) as conn, conn.cursor() as cur:
        cur.execute("SELECT count(*) FROM items WHERE id <= %s", (rows,))
        done.rows = int(cur.fetchone()[0])  # what the snapshot reads (up to its largest key)
    load = os.getloadavg()[0]
    store.cli("snapshot", store.source, "public.items")
    signalled = time.perf_counter()
    runs_before = len(loop.source_runs)
    print(f"incremental snapshot, {parallel} chunk read(s) at once: probes until it ends", flush=True)
    while True:
        time.sleep(random.uniform(0.5, 2.5))
        probe_id += 1
        done.during.append(probe(store, probe_id, loop))
        now = progress(store)
        if now is None and not waiting_signals(store):
            break
        print(f"  latency {done.during[-1]:.2f} s; read {int((now or {}).get('rows', 0)):,} rows", flush=True)
    # ended: seen from here after a probe (at most a probe's cycle late, a few seconds)
    done.wall_s = time.perf_counter() - signalled
    runs = [r for r in loop.source_runs[runs_before:] if r[0] <= signalled + done.wall_s]
    done.runs = len(runs)
    done.source_s = sum(w for _, w, _ in runs)
    done.load = (load, os.getloadavg()[0])
    return done


@dataclass
class Result:
    rows: int
    rate: int
    initial_source_s: float = 0.0
    initial_wall_s: float = 0.0
    initial_commands: int = 0
    idle: list[float] = field(default_factory=list)
    passes: list[Pass] = field(default_factory=list)
    writer_changes: int = 0
    writer_s: float = 0.0
    checksum_equal: bool = False
    final: str = ""
    checked: int = 0
    stale: int = 0
    converge_commands: int = 0
    notes: list[str] = field(default_factory=list)


def bench(args: argparse.Namespace) -> Result:
    result = Result(args.rows, args.rate)
    with start_logical_pg("max_wal_size=8GB", "shared_buffers=512MB") as src:
        print(f"logical PostgreSQL on port {src.port}; {args.rows:,} rows", flush=True)
        src.execute(
            TABLE_DDL.format(table="items"),
            f"CREATE SEQUENCE version START {VERSION_BASE}",
            "INSERT INTO items SELECT g, 'item ' || g, (g % 100000) / 100.0, (g % 1000)::int,"
            " timestamptz '2024-01-01 00:00:00+00' + g * interval '1 second',"
            f" CASE WHEN g % 5 = 0 THEN NULL ELSE md5(g::text) END FROM generate_series(1, {args.rows}) g",
            "VACUUM ANALYZE items",
            f"CREATE PUBLICATION {PUBLICATION} FOR TABLE items",
        )
        extra = {
            "incremental.snapshot.chunk.size": str(args.chunk),
            "incremental.snapshot.max.rows.per.run": str(args.per_run),
        }
        store = Store("warm", src, None, extra)
        store.setup()
        try:
            print("  " + store.start_warm_pool(), flush=True)
            expected = checksum_of(src)
            print(f"initial snapshot: source {expected}", flush=True)
            started = time.perf_counter()
            while store.target_checksum() != expected:
                wall, runs = store.run()
                src_run = next(r for r in runs if r.get("connector") == store.source)
                result.initial_source_s += float(src_run.get("wall_s", 0.0))
                result.initial_commands += 1
                print(f"  #{result.initial_commands}: {wall:.1f} s, {src_run.get('rows')} rows", flush=True)
                if result.initial_commands > 50:
                    raise RuntimeError("the initial snapshot did not converge in 50 commands")
            result.initial_wall_s = time.perf_counter() - started

            writer = Writer(src, args.rows, args.rate)
            writer.start()
            loop = Loop(store)
            loop.start()
            probe_id = PROBE_BASE
            time.sleep(3)
            print("idle streaming: probes", flush=True)
            for _ in range(args.samples):
                time.sleep(random.uniform(0.5, 2.5))
                probe_id += 1
                result.idle.append(probe(store, probe_id, loop))
                print(f"  idle latency {result.idle[-1]:.2f} s", flush=True)

            for parallel in args.parallel:
                store.put_source({**extra, "incremental.snapshot.parallel.reads": str(parallel)})
                result.passes.append(incremental(store, loop, parallel, args.rows, probe_id))
                probe_id += len(result.passes[-1].during)
            writer.stop()
            result.writer_changes, result.writer_s = writer.changes, writer.seconds
            loop.stop()
            if loop.error:
                raise loop.error
            expected = checksum_of(src)
            result.converge_commands = converge(store, expected, 30)
            got = store.target_checksum()
            result.checksum_equal = got == expected
            result.final = f"{got}"
            print(f"target {got}, source {expected}", flush=True)
            result.checked, result.stale = stale_snapshot_events(store, writer.touched)
            print(f"per key: {result.checked:,} snapshot events of changed keys, {result.stale} stale", flush=True)
        finally:
            with suppress(RuntimeError):
                store.stop_warm_pool()
            if not args.keep:
                with suppress(Exception):
                    store.drop()
    return result


def checksum_of(src: PgServer) -> Checksum:
    with connect_pg(src.dsn) as conn:
        return checksum(conn, "public.items")


def _s(value: float | None, digits: int = 2) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def section(args: argparse.Namespace, r: Result, load: float) -> list[str]:
    initial_rate = r.rows / r.initial_source_s if r.initial_source_s else 0.0
    idle99 = pct(r.idle, 0.99)
    changes_s = r.writer_changes / r.writer_s if r.writer_s else 0.0
    cmd = f"python bench/snapshot_bench.py --rows {args.rows} --rate {args.rate} --samples {args.samples}"
    if (args.chunk, args.per_run) != (10_000, 100_000):
        cmd += f" --chunk {args.chunk} --per-run {args.per_run}"
    if args.parallel != [1, 2]:
        cmd += f" --parallel {','.join(map(str, args.parallel))}"
    snapshots, latencies, ratios = [], [], []
    for p in r.passes:
        what = f"incremental, {p.parallel} chunk read(s) at once (`incremental.snapshot.parallel.reads={p.parallel}`)"
        source_rate = p.rows / p.source_s if p.source_s else 0.0
        snapshots.append(
            f"| {what} | {p.rows:,} | {p.source_s:.1f} | {source_rate:,.0f} | {p.wall_s:.1f} |"
            f" {p.rows / p.wall_s if p.wall_s else 0:,.0f} |"
        )
        during99 = pct(p.during, 0.99)
        latencies.append(f"| during the {what} | {len(p.during)} | {_s(pct(p.during, 0.5))} | {_s(during99)} |")
        ratio = during99 / idle99 if idle99 and during99 else None
        ratios.append(
            f"parallel reads {p.parallel}: p99 during / idle **{_s(ratio)}x** (the issue's bound: 2x),"
            f" incremental / initial throughput (source runs) **{source_rate / initial_rate if initial_rate else 0:.2f}x**"
            f" in {p.runs} source runs (1-minute load {p.load[0]:.2f} at its start, {p.load[1]:.2f} at its end)"
        )
    return [
        f"## incremental snapshot: {r.rows:,} rows re-read while {args.rate:,} changes/s stream, warm pool",
        "",
        f"Reproduce: `{cmd}`. PostgreSQL 15 source of the bench's own (`wal_level=logical`), CDC source"
        " → topic → JDBC sink (upsert by key, deletes) into the shared server, both connectors on a warm pool"
        " (`connect pools start warm`), `connect run src sink` back to back. The writer made"
        f" {r.writer_changes:,} changes in {r.writer_s:.0f} s ({changes_s:,.0f}/s: updates, inserts, deletes,"
        f" key moves). Chunks of {args.chunk:,} rows, at most {args.per_run:,} rows a run; the table re-read"
        f" once per `--parallel` value, one after the other, the writer going all along."
        f" 1-minute load average before: {load:.2f} (2 cores, shared with the databases).",
        "",
        "| snapshot | rows | source runs s | rows/s (source runs) | wall s | rows/s (wall) |",
        "|---|---:|---:|---:|---:|---:|",
        f"| initial (`snapshot.mode=initial`, no writer) | {r.rows:,} | {r.initial_source_s:.1f} |"
        f" {initial_rate:,.0f} | {r.initial_wall_s:.1f} | {r.rows / r.initial_wall_s if r.initial_wall_s else 0:,.0f} |",
        *snapshots,
        "",
        "| streaming latency (probe commit → in the target) | samples | p50 s | p99 s |",
        "|---|---:|---:|---:|",
        f"| idle (writer on, no snapshot) | {len(r.idle)} | {_s(pct(r.idle, 0.5))} | {_s(idle99)} |",
        *latencies,
        "",
        "; ".join(ratios) + f". After the writer stopped, {r.converge_commands} command(s) to"
        f" converge; target = source by checksum: **{'yes' if r.checksum_equal else 'NO'}** ({r.final})."
        f" Per key, over the topic: {r.checked:,} snapshot events of keys the writer changed,"
        f" **{r.stale}** older than an earlier event of their key.",
        *([""] + [f"Note: {n}" for n in r.notes] if r.notes else []),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--rate", type=int, default=1000, help="changes a second while the snapshot runs")
    parser.add_argument("--samples", type=int, default=20, help="idle latency probes")
    parser.add_argument("--chunk", type=int, default=10_000, help="incremental.snapshot.chunk.size")
    parser.add_argument("--per-run", type=int, default=100_000, help="incremental.snapshot.max.rows.per.run")
    parser.add_argument(
        "--parallel",
        type=lambda v: [int(x) for x in v.split(",")],
        default=[1, 2],
        help="incremental.snapshot.parallel.reads of each re-read, in turn (comma-separated)",
    )
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    load = os.getloadavg()[0]
    data.ensure_pg_database(data.TARGET_DB)
    result = bench(args)
    lines = section(args, result, load)
    if args.no_write:
        print("\n".join(lines))
    else:
        from _results import write_sections

        write_sections(lines)
    print(json.dumps({"stale": result.stale, "equal": result.checksum_equal}))


if __name__ == "__main__":
    started = time.monotonic()
    main()
    print(f"total {time.monotonic() - started:.0f} s")
