"""Change data capture (issue 16): 1M mixed changes PostgreSQL → PostgreSQL vs pg_recvlogical, and change-to-target latency.

    .venv/bin/python bench/cdc_bench.py [--changes 1000000] [--only warm,classic] [--samples 5] [--no-write] [--keep]

The source is a PostgreSQL of the bench's own with `wal_level=logical` (started from
/usr/lib/postgresql/15/bin by connect_core/testing/servers.py, on a free loopback port, deleted at
the end; the machine's shared server keeps its settings), database `cdc`, table `public.items`
(id bigint primary key, text, numeric, int, timestamptz, nullable text). The target is the shared
server's database `bench_target`: a table `cdc_bench_<pool>.items` per pool, created beforehand
as the source's (a user's DDL).

Set-up (not timed): the publication `cdc_bench_pub` for the table; per pool kind a metadata store
of its own (`bench_connect_meta_cdc_<pool>`) with the CDC source (PostgresCdcSourceConnector,
Debezium keys, its own slot, `snapshot.mode=initial` on the then empty table, the product's
default `max.batch.size` unless `--batch`) and the JDBC sink as examples/cdc/postgres-shop-replica.json
(`ExtractNewRecordState` + `RegexRouter`, upsert by the record key, `delete.enabled`); one
`connect run src sink` takes the (empty) snapshot and creates the slot. Then a fourth slot,
`cdc_bench_recvlogical` (pgoutput), at the same point.

The changes: `--changes` (default 1,000,000) row changes made server-side in rounds of 10,000,
each round three transactions: INSERT … SELECT generate_series (60%), UPDATE of half the round's
rows (30%), DELETE of a sixth of them (10%). Then, one after another, each draining its own slot
from the same start point to the same end:

* **pg_recvlogical**: `pg_recvlogical --start -S cdc_bench_recvlogical -o proto_version=1
  -o publication_names=cdc_bench_pub --endpos <WAL end after the changes> -f /dev/null`, the wall
  time of the process: the server's decoding and streaming, nothing kept. The reference.
* **connect (warm pool)**: `connect pools start warm` (a Spark Connect server and its worker,
  started before any timing), the `local` pool removed, rebalanced; then `connect run src sink`
  again and again until the target equals the source. Each command is the source run (one slot
  read, about `max.batch.size` changes, whole transactions) then the sink run, on the pool's worker.
* **connect (classic)**: the same with the default `local` pool: each `connect run src sink` is
  one spark-submit (JVM and SparkSession start-up each time).

`source s` sums the source runs' `wall_s` as `connect run --output json` reports them (the source
alone, the command's own start-up not included), against pg_recvlogical's wall time: the ratio is the
goal of issue 16 (≥ 0.5x). `end to end s` sums the commands' wall times from this process (CLI
start-up, both runs, the sink's writes). Verified: the target's row count and an exact checksum
(sum of the 60-bit md5 prefixes of canonical row texts) equal the source's, so nothing was lost,
and the sink's upsert by key kept no replayed change as a second row.

Latency, per pool (after the throughput runs): a thread runs `connect run src sink` back to back
(no sleep: the fastest the product can be driven; its fastest schedule, `@continuous` in Airflow,
adds Airflow's own task start-up on top); `--samples` times, at a random moment, a row is
inserted and the time until the target shows it is measured. For a 1-minute schedule the latency
is computed, not waited for: a change waits for the next run, on average half the interval
(30 s, at most 60 s), then the run's time, measured as `connect run src sink` after 100 changes.

Writes the section `## change data capture: …` of bench/RESULTS.md (unless `--no-write`).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg2

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _jdbc_data as data

from connect_core.testing.servers import PG_BIN, PgServer, start_logical_pg

POOLS = ("warm", "classic")
PUBLICATION = "cdc_bench_pub"
RECV_SLOT = "cdc_bench_recvlogical"
TOPIC_PREFIX = "cdc"
ROUND = 10_000  # changes per round of three transactions
PROBE_ID = 10**12  # latency probes' ids: beyond every generated one
SMALL_CHANGES = 100

TABLE_DDL = (
    "CREATE TABLE {table} (id bigint PRIMARY KEY, label text NOT NULL, amount numeric(12,2), qty int,"
    " updated_at timestamptz NOT NULL, note text)"
)
# Canonical texts of a row, the same in source and target (sessions in UTC).
ROW_TEXT = (
    "concat_ws(chr(31), id::text, label, coalesce(trim_scale(amount)::text, '\\N'), coalesce(qty::text, '\\N'),"
    " to_char(updated_at, 'YYYY-MM-DD HH24:MI:SS.US'), coalesce(note, '\\N'))"
)


@dataclass(frozen=True)
class Checksum:
    rows: int
    digest: int

    def __str__(self) -> str:
        return f"{self.rows} rows / {self.digest}"


def checksum(conn: Any, table: str) -> Checksum:
    with conn.cursor() as cur:
        cur.execute(
            f"SELECT count(*), coalesce(sum(('x' || left(md5({ROW_TEXT}), 15))::bit(60)::bigint), 0) FROM {table}"
        )
        count, digest = cur.fetchone()
    return Checksum(int(count), int(digest))


@contextmanager
def connect_pg(dsn: str) -> Iterator[Any]:
    conn = psycopg2.connect(dsn, options="-c timezone=UTC")
    conn.autocommit = True
    try:
        yield conn
    finally:
        conn.close()


def source_checksum(src: PgServer) -> Checksum:
    with connect_pg(src.dsn) as conn:
        return checksum(conn, "public.items")


def median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


# --- the changes ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Changes:
    inserts: int
    updates: int
    deletes: int
    transactions: int
    seconds: float

    @property
    def total(self) -> int:
        return self.inserts + self.updates + self.deletes

    @property
    def records(self) -> int:
        """The source's records for them: an event a change, and a tombstone after each delete."""
        return self.total + self.deletes


def make_changes(src: PgServer, changes: int) -> Changes:
    """`changes` row changes in rounds of ROUND: insert 60% new rows (one transaction), update half
    of them (another), delete a sixth of them (a third). Ids go on from `first`."""
    inserts = updates = deletes = transactions = 0
    started = time.perf_counter()
    with connect_pg(src.dsn) as conn, conn.cursor() as cur:
        left = changes
        while left:
            size = min(ROUND, left)
            n_ins, n_upd = size * 6 // 10, size * 3 // 10
            n_del = size - n_ins - n_upd
            base = inserts
            cur.execute(
                "INSERT INTO items SELECT g, 'item ' || g, (g % 100000) / 100.0, (g % 1000)::int,"
                " timestamptz '2024-01-01 00:00:00+00' + g * interval '1 second',"
                " CASE WHEN g % 5 = 0 THEN NULL ELSE md5(g::text) END"
                f" FROM generate_series({base + 1}::bigint, {base + n_ins}) g"
            )
            cur.execute(
                "UPDATE items SET label = label || ' u', amount = amount + 1, qty = qty + 1,"
                " updated_at = updated_at + interval '1 day', note = coalesce(note, 'was null')"
                f" WHERE id BETWEEN {base + 1} AND {base + n_upd}"
            )
            cur.execute(f"DELETE FROM items WHERE id BETWEEN {base + n_upd + 1} AND {base + n_upd + n_del}")
            inserts, updates, deletes, transactions = (
                inserts + n_ins,
                updates + n_upd,
                deletes + n_del,
                transactions + 3,
            )
            left -= size
    return Changes(inserts, updates, deletes, transactions, time.perf_counter() - started)


def wal_insert_lsn(src: PgServer) -> str:
    return str(src.rows("SELECT pg_current_wal_insert_lsn()::text")[0][0])


# --- this product: a metadata store per pool kind ------------------------------------------------


@dataclass
class Store:
    pool: str  # "warm" or "classic"
    src: PgServer
    batch: int | None
    source_extra: dict[str, str] = field(default_factory=dict)  # more of the source's config

    @property
    def meta_db(self) -> str:
        return f"bench_connect_meta_cdc_{self.pool}"

    @property
    def home(self) -> Path:
        return Path(tempfile.gettempdir()) / f"connect-cdc-bench-{self.pool}"

    @property
    def source(self) -> str:
        return f"cdc_src_{self.pool}"

    @property
    def sink(self) -> str:
        return f"cdc_sink_{self.pool}"

    @property
    def slot(self) -> str:
        return f"cdc_bench_{self.pool}"

    @property
    def schema(self) -> str:
        return f"cdc_bench_{self.pool}"

    @property
    def target(self) -> str:
        return f"{self.schema}.items"

    def env(self) -> dict[str, str]:
        return {
            **os.environ,
            "CONNECT_DATABASE_URL": data.pg_url(self.meta_db),
            "CONNECT_HOME": str(self.home),
            "SPARK_LOCAL_IP": "127.0.0.1",
        }

    def cli(self, *args: str) -> str:
        proc = subprocess.run(
            [sys.executable, "-m", "connect_core.cli", *args], env=self.env(), capture_output=True, text=True
        )
        if proc.returncode != 0:
            raise RuntimeError(f"connect {' '.join(args)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
        return proc.stdout

    def source_config(self) -> dict[str, Any]:
        """The CDC source's config (`source_extra` over the bench's)."""
        source: dict[str, Any] = {
            "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
            "database.hostname": self.src.host,
            "database.port": str(self.src.port),
            "database.user": self.src.user,
            "database.dbname": self.src.database,
            "topic.prefix": TOPIC_PREFIX,
            "table.include.list": "public.items",
            "slot.name": self.slot,
            "publication.name": PUBLICATION,
            "slot.drop.on.stop": "true",
            "schedule": "none",
        }
        if self.batch:
            source["max.batch.size"] = str(self.batch)
        source.update(self.source_extra)
        return source

    def put_source(self, extra: dict[str, str]) -> None:
        """The source's config with `extra` instead of `source_extra` (`connect put`)."""
        self.source_extra = dict(extra)
        path = self.home / f"{self.source}.json"
        path.write_text(json.dumps(self.source_config()))
        self.cli("put", self.source, "--config", str(path))

    def setup(self) -> None:
        """A fresh metadata store, home and target table; the two connectors."""
        with data.pg("postgres") as conn, conn.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS {self.meta_db} WITH (FORCE)")
            cur.execute(f"CREATE DATABASE {self.meta_db}")
        with data.pg(data.TARGET_DB) as conn, conn.cursor() as cur:
            cur.execute(f"DROP SCHEMA IF EXISTS {self.schema} CASCADE")
            cur.execute(f"CREATE SCHEMA {self.schema}")
            cur.execute(TABLE_DDL.format(table=self.target))
            cur.execute(
                "CREATE TABLE IF NOT EXISTS connect_sink_offsets (connector text, topic text, partition int, "
                "next_offset bigint NOT NULL, PRIMARY KEY (connector, topic, partition))"
            )
            cur.execute("DELETE FROM connect_sink_offsets WHERE connector = %s", (self.sink,))
        shutil.rmtree(self.home, ignore_errors=True)
        self.home.mkdir(parents=True)
        server = data.PG_SERVER
        sink = {
            "connector.class": "io.confluent.connect.jdbc.JdbcSinkConnector",
            "connection.url": f"jdbc:postgresql://{server.host}:{server.port}/{data.TARGET_DB}",
            "connection.user": server.user,
            **({"connection.password": server.password} if server.password else {}),
            "topics": f"{TOPIC_PREFIX}.public.items",
            "table.name.format": f"{self.schema}.${{topic}}",
            "insert.mode": "upsert",
            "pk.mode": "record_key",
            "delete.enabled": "true",
            "transforms": "unwrap,route",
            "transforms.unwrap.type": "io.debezium.transforms.ExtractNewRecordState",
            "transforms.route.type": "org.apache.kafka.connect.transforms.RegexRouter",
            "transforms.route.regex": f"{TOPIC_PREFIX}\\.public\\.(.*)",
            "transforms.route.replacement": "$1",
        }
        for name, config in ((self.source, self.source_config()), (self.sink, sink)):
            path = self.home / f"{name}.json"
            path.write_text(json.dumps(config))
            self.cli("create", name, "--config", str(path))

    def start_warm_pool(self) -> str:
        out = " ".join(self.cli("pools", "start", "warm", "--capacity", "4").split())
        self.cli("pools", "remove", "local", "--missing-ok")
        self.cli("rebalance")
        return out

    def stop_warm_pool(self) -> None:
        print("  " + " ".join(self.cli("pools", "stop", "warm").split()), flush=True)

    def run(self) -> tuple[float, list[dict[str, Any]]]:
        """`connect run src sink --output json`: its wall seconds and the runs it printed."""
        started = time.perf_counter()
        out = self.cli("run", self.source, self.sink, "--output", "json")
        wall = time.perf_counter() - started
        runs = json.loads(out)
        for run in runs:
            if run.get("state") not in ("SUCCEEDED", "SKIPPED"):
                raise RuntimeError(f"{run['connector']} {run.get('state')}: {run.get('message')}")
        return wall, runs

    def target_checksum(self) -> Checksum:
        with data.pg(data.TARGET_DB) as conn:
            return checksum(conn, self.target)

    def drop(self) -> None:
        with data.pg(data.TARGET_DB) as conn, conn.cursor() as cur:
            cur.execute(f"DROP SCHEMA IF EXISTS {self.schema} CASCADE")
            cur.execute("DELETE FROM connect_sink_offsets WHERE connector = %s", (self.sink,))
        with data.pg("postgres") as conn, conn.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS {self.meta_db} WITH (FORCE)")
        shutil.rmtree(self.home, ignore_errors=True)


def _by(runs: list[dict[str, Any]], connector: str) -> dict[str, Any]:
    return next((r for r in runs if r.get("connector") == connector), {})


@dataclass
class Drain:
    pool: str
    commands: int = 0
    end_to_end_s: float = 0.0
    source_s: float = 0.0  # the source runs' wall_s
    sink_s: float = 0.0
    source_work_s: float = 0.0  # their timings.run_s
    sink_work_s: float = 0.0
    source_runs: list[float] = field(default_factory=list)  # each source run's wall_s, in order
    source_rows: int = 0
    sink_rows: int = 0
    verified: bool | None = None
    note: str = ""


def drain(store: Store, expected: Checksum, changes: Changes) -> Drain:
    """`connect run src sink` until the target's checksum equals the source's; then the records
    each end counted must be one per change, and a tombstone per delete (none lost, none twice)."""
    result = Drain(store.pool)
    batch = store.batch or 100_000
    limit = changes.total // batch + 6
    while result.commands < limit:
        wall, runs = store.run()
        src, snk = _by(runs, store.source), _by(runs, store.sink)
        result.commands += 1
        result.end_to_end_s += wall
        result.source_s += float(src.get("wall_s", 0.0))
        result.source_runs.append(float(src.get("wall_s", 0.0)))
        result.sink_s += float(snk.get("wall_s", 0.0))
        result.source_work_s += float(src.get("timings", {}).get("run_s", 0.0))
        result.sink_work_s += float(snk.get("timings", {}).get("run_s", 0.0))
        result.source_rows += int(src.get("rows") or 0)
        result.sink_rows += int(snk.get("rows") or 0)
        print(
            f"  {store.pool} #{result.commands}: {wall:.1f} s; source {src.get('state')} {src.get('rows')} rows"
            f" wall_s={src.get('wall_s', 0):.2f} run_s={src.get('timings', {}).get('run_s')};"
            f" sink {snk.get('state')} {snk.get('rows')} rows wall_s={snk.get('wall_s', 0):.2f}",
            flush=True,
        )
        got = store.target_checksum()
        if got == expected:
            records = changes.records
            result.verified = result.source_rows == records and result.sink_rows == records
            if not result.verified:
                result.note = (
                    f"records: {result.source_rows:,} out of the source, {result.sink_rows:,} into the sink,"
                    f" expected {records:,}"
                )
            return result
    result.verified = False
    result.note = f"target {store.target_checksum()} ≠ source {expected} after {result.commands} commands"
    return result


# --- pg_recvlogical ------------------------------------------------------------------------------


def recvlogical(src: PgServer, endpos: str) -> float:
    cmd = [
        str(PG_BIN / "pg_recvlogical"),
        "-h",
        src.host,
        "-p",
        str(src.port),
        "-U",
        src.user,
        "-d",
        src.database,
        "-S",
        RECV_SLOT,
        "--start",
        "--no-loop",
        "-o",
        "proto_version=1",
        "-o",
        f"publication_names={PUBLICATION}",
        "--endpos",
        endpos,
        "-f",
        "/dev/null",
    ]
    started = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
    seconds = time.perf_counter() - started
    if proc.returncode != 0:
        raise RuntimeError(f"pg_recvlogical exited {proc.returncode}: {proc.stderr[-2000:]}")
    confirmed = src.rows("SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = %s", RECV_SLOT)
    print(f"  pg_recvlogical: {seconds:.2f} s to {endpos} (slot confirmed {confirmed[0][0]})", flush=True)
    return seconds


# --- latency -------------------------------------------------------------------------------------


@dataclass
class Latency:
    pool: str
    samples: list[float] = field(default_factory=list)
    loop_commands: list[float] = field(default_factory=list)  # back-to-back commands' wall seconds
    small_runs: list[float] = field(default_factory=list)  # `connect run src sink` after SMALL_CHANGES
    note: str = ""


class BackToBack(threading.Thread):
    """`connect run src sink` again and again, no pause, until stopped."""

    def __init__(self, store: Store) -> None:
        super().__init__(daemon=True, name=f"back-to-back-{store.pool}")
        self.store = store
        self.walls: list[float] = []
        self.error: Exception | None = None
        self._stop_event = threading.Event()

    def run(self) -> None:
        while not self._stop_event.is_set():
            try:
                wall, _ = self.store.run()
            except Exception as exc:
                self.error = exc
                return
            self.walls.append(wall)

    def stop(self) -> None:
        self._stop_event.set()
        self.join(timeout=600)


def latency(store: Store, samples: int, next_id: list[int]) -> Latency:
    result = Latency(store.pool)
    loop = BackToBack(store)
    loop.start()
    try:
        with connect_pg(store.src.dsn) as src, data.pg(data.TARGET_DB) as tgt:
            time.sleep(2)
            for _ in range(samples):
                time.sleep(random.uniform(0.5, 4.0))
                if loop.error:
                    raise loop.error
                probe = next_id[0]
                next_id[0] += 1
                with src.cursor() as cur:
                    cur.execute("INSERT INTO items VALUES (%s, 'probe', 1, 1, clock_timestamp(), NULL)", (probe,))
                committed = time.perf_counter()
                deadline = committed + 300
                with tgt.cursor() as cur:
                    while True:
                        cur.execute(f"SELECT 1 FROM {store.target} WHERE id = %s", (probe,))
                        if cur.fetchone():
                            break
                        if time.perf_counter() > deadline or loop.error:
                            raise RuntimeError(f"probe {probe} not in the target after 300 s ({loop.error})")
                        time.sleep(0.02)
                result.samples.append(time.perf_counter() - committed)
                print(f"  {store.pool} latency sample: {result.samples[-1]:.2f} s", flush=True)
    except Exception as exc:
        result.note = f"latency: {type(exc).__name__}: {str(exc)[-300:]}"
        print(result.note, file=sys.stderr)
    finally:
        loop.stop()
        result.loop_commands = list(loop.walls)
    # the run time of a small change set, for the computed 1-minute-schedule latency
    try:
        for _ in range(3):
            first = next_id[0]
            next_id[0] += SMALL_CHANGES
            store.src.execute(
                "INSERT INTO items SELECT g, 'small', 1, 1, clock_timestamp(), NULL"
                f" FROM generate_series({first}::bigint, {first + SMALL_CHANGES - 1}) g"
            )
            wall, _ = store.run()
            result.small_runs.append(wall)
            print(f"  {store.pool} run after {SMALL_CHANGES} changes: {wall:.2f} s", flush=True)
    except Exception as exc:
        result.note += f" small runs: {type(exc).__name__}: {str(exc)[-300:]}"
    return result


# --- report --------------------------------------------------------------------------------------


def _s(value: float | None, digits: int = 1) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def _rate(count: int, seconds: float | None) -> str:
    return f"{count / seconds:,.0f}" if seconds else "—"


POOL_LABEL = {"warm": "connect, warm pool", "classic": "connect, classic (spark-submit)"}


def section(
    command: str,
    changes: Changes,
    recv_s: float | None,
    drains: list[Drain],
    latencies: list[Latency],
    batch: int | None,
    load: float,
    warm_start: str,
) -> list[str]:
    n = changes.total
    lines = [
        f"## change data capture: {n:,} mixed changes, PostgreSQL → PostgreSQL, vs pg_recvlogical"
        + (f" (max.batch.size {batch:,})" if batch else ""),
        "",
        f"Reproduce: `{command}`. Source: a PostgreSQL 15 of the bench's own (`wal_level=logical`,"
        " fsync off, on this 2-core machine, shared with other work), one table (bigint key, text,"
        " numeric, int, timestamptz, nullable text); target: a table of the shared server's `bench_target`."
        f" Changes: {changes.inserts:,} inserts, {changes.updates:,} updates, {changes.deletes:,} deletes"
        f" in {changes.transactions:,} transactions (rounds of an INSERT … SELECT, an UPDATE, a DELETE;"
        f" made in {changes.seconds:.1f} s), after each tool's slot was created. Each tool drains a slot of"
        " its own, one after another. pg_recvlogical: `pg_recvlogical --start -o proto_version=1"
        f" -o publication_names=… --endpos <WAL end> -f /dev/null`, its wall time. connect:"
        " PostgresCdcSourceConnector (pgoutput) → topic → JdbcSinkConnector (ExtractNewRecordState,"
        " RegexRouter, upsert by the record key, `delete.enabled`), `connect run src sink` again and again"
        " until the target equals the source; `max.batch.size`"
        + (f" {batch:,}" if batch else " the default (100,000)")
        + " changes a source run. `source s`: the source runs' `wall_s` summed (what `connect run --output"
        " json` reports: the run alone, no command start-up) — compared with pg_recvlogical;"
        " `end to end s`: the commands' wall times summed (CLI start-up, source and sink runs)."
        " Verified: row count and an exact checksum of canonical row texts equal the source's, and the"
        f" records counted out of the source and into the sink are {changes.records:,} each (a change"
        " event per change, a tombstone per delete: none lost, none twice)."
        f" 1-minute load average before the runs: {load:.1f}.",
    ]
    if warm_start:
        lines += ["", f"Warm pool (started before any timing): {warm_start}"]
    lines += [
        "",
        "| tool | commands | source s | source changes/s | ÷ pg_recvlogical | sink s | end to end s"
        " | end-to-end changes/s | verified |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|",
        f"| pg_recvlogical (to /dev/null) | 1 | {_s(recv_s, 2)} | {_rate(n, recv_s)} | 1.00x | — | {_s(recv_s, 2)}"
        f" | {_rate(n, recv_s)} | — |",
    ]
    for d in drains:
        ratio = f"{recv_s / d.source_s:.2f}x" if recv_s and d.source_s else "—"
        verified = "—" if d.verified is None else ("yes" if d.verified else f"**no** ({d.note})")
        lines.append(
            f"| {POOL_LABEL[d.pool]} | {d.commands} | {_s(d.source_s)} | {_rate(n, d.source_s)} | {ratio}"
            f" | {_s(d.sink_s)} | {_s(d.end_to_end_s)} | {_rate(n, d.end_to_end_s)} | {verified} |"
        )
    if drains:
        lines += [
            "",
            "`÷ pg_recvlogical`: the source's changes/s over pg_recvlogical's (goal ≥ 0.5x). Inside the runs"
            " (`timings.run_s`, the work without the session or Spark start-up): "
            + "; ".join(
                f"{POOL_LABEL[d.pool]}: source {d.source_work_s:.1f} s, sink {d.sink_work_s:.1f} s,"
                f" records {d.source_rows:,} out of the source, {d.sink_rows:,} into the sink"
                for d in drains
            )
            + ".",
        ]
    if any(len(d.source_runs) > 1 for d in drains):
        lines += [
            "",
            "Each source run's `wall_s`, in order. A run opens a replication session of its own, and the server"
            " decodes it from the slot's `restart_lsn`, which PostgreSQL moves on only at a running-transactions"
            " record (logged every 15 s, or at a checkpoint): the changes here, made in a few seconds, hold none,"
            " so every run decodes the WAL from their start again, up to where it stops: "
            + "; ".join(f"{POOL_LABEL[d.pool]}: " + ", ".join(f"{s:.2f}" for s in d.source_runs) for d in drains)
            + ".",
        ]
    if latencies:
        lines += [
            "",
            "Change-to-target latency: from the commit of an inserted row in the source to the row showing in"
            " the target (polled every 20 ms). `back to back`: measured, `connect run src sink` looping with no"
            " pause (the fastest the product can be driven; Airflow's `@continuous` schedule adds its own task"
            " start-up); samples at random moments. `1-minute schedule`: **computed, not waited for**: a change"
            " waits for the next run, half the interval on average (30 s), at most 60 s, plus the run's time,"
            f" measured as `connect run src sink` after {SMALL_CHANGES} changes (median of 3).",
            "",
            "| tool | schedule | latency median s | min - max s | samples | how |",
            "|---|---|---:|---|---:|---|",
        ]
        for lat in latencies:
            label = POOL_LABEL[lat.pool]
            med = median(lat.samples)
            span = f"{min(lat.samples):.1f} - {max(lat.samples):.1f}" if lat.samples else "—"
            loop = median(lat.loop_commands)
            how = f"measured; a back-to-back command took {_s(loop, 1)} s (median of {len(lat.loop_commands)})"
            if lat.note:
                how += f"; {lat.note}"
            lines.append(f"| {label} | back to back | {_s(med)} | {span} | {len(lat.samples)} | {how} |")
            run = median(lat.small_runs)
            if run is not None:
                lines.append(
                    f"| {label} | 1 minute | {30 + run:.1f} | {run:.1f} - {60 + run:.1f} | — |"
                    f" computed: 30 s + {run:.1f} s run (range 0-60 s wait + run) |"
                )
    return lines


# --- main ----------------------------------------------------------------------------------------


def reproduce_command(args: argparse.Namespace, parser: argparse.ArgumentParser) -> str:
    cmd = ".venv/bin/python bench/cdc_bench.py"
    for name in ("changes", "only", "batch", "samples"):
        value = getattr(args, name)
        if value != parser.get_default(name):
            cmd += f" --{name} {value}"
    return cmd


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--changes", type=int, default=1_000_000, help="row changes (a multiple of 10)")
    parser.add_argument("--only", default=",".join(POOLS), help="comma-separated subset of " + ",".join(POOLS))
    parser.add_argument("--batch", type=int, default=None, help="the source's max.batch.size (default: the product's)")
    parser.add_argument("--samples", type=int, default=5, help="latency samples per pool")
    parser.add_argument("--keep", action="store_true", help="leave the metadata stores and target schemas")
    parser.add_argument("--no-write", action="store_true", help="print only; leave bench/RESULTS.md alone")
    args = parser.parse_args()
    pools = [p for p in POOLS if p in args.only.split(",")]
    if set(args.only.split(",")) - set(POOLS) or not pools:
        parser.error(f"--only: a subset of {','.join(POOLS)}")
    if args.changes <= 0 or args.changes % 10:
        parser.error("--changes: a positive multiple of 10")
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    load = os.getloadavg()[0]
    print(f"1-minute load average before the runs: {load:.2f}", flush=True)
    data.ensure_pg_database(data.TARGET_DB)

    drains: list[Drain] = []
    latencies: list[Latency] = []
    recv_s: float | None = None
    warm_start = ""
    with start_logical_pg("max_wal_size=4GB", "shared_buffers=256MB") as src:
        print(f"logical PostgreSQL on port {src.port}", flush=True)
        src.execute(TABLE_DDL.format(table="items"), f"CREATE PUBLICATION {PUBLICATION} FOR TABLE items")
        stores = {p: Store(p, src, args.batch) for p in pools}
        warm = stores.get("warm")
        try:
            for store in stores.values():
                store.setup()
            if warm:
                print("connect pools start warm", flush=True)
                started = warm.start_warm_pool()
                found = re.search(r"up in [\d.]+ s, warmed in [\d.]+ s", started)
                warm_start = f"`connect pools start warm --capacity 4`: {found.group(0) if found else started}."
                print(f"  {started}", flush=True)
            for store in stores.values():
                wall, _ = store.run()  # the snapshot of the empty table: creates the slot
                print(f"  {store.pool}: snapshot run {wall:.1f} s", flush=True)
            src.execute(f"SELECT pg_create_logical_replication_slot('{RECV_SLOT}', 'pgoutput')")
            print(f"making {args.changes:,} changes", flush=True)
            changes = make_changes(src, args.changes)
            endpos = wal_insert_lsn(src)
            expected = source_checksum(src)
            print(f"  {changes.seconds:.1f} s; WAL end {endpos}; source {expected}", flush=True)
            recv_s = recvlogical(src, endpos)
            for store in stores.values():
                print(f"connect ({store.pool}): draining", flush=True)
                try:
                    drains.append(drain(store, expected, changes))
                except RuntimeError as exc:
                    drains.append(Drain(store.pool, verified=False, note=str(exc).splitlines()[-1][:200]))
                    print(exc, file=sys.stderr)
            next_id = [PROBE_ID]
            for store in stores.values():
                if any(d.pool == store.pool and d.verified for d in drains) and args.samples:
                    print(f"connect ({store.pool}): latency", flush=True)
                    latencies.append(latency(store, args.samples, next_id))
        finally:
            if warm:
                with suppress(RuntimeError):
                    warm.stop_warm_pool()
            if not args.keep:
                for store in stores.values():
                    with suppress(Exception):
                        store.drop()
    lines = section(reproduce_command(args, parser), changes, recv_s, drains, latencies, args.batch, load, warm_start)
    if args.no_write:
        print("\n".join(lines))
    else:
        from _results import write_sections

        write_sections(lines)


if __name__ == "__main__":
    started = time.monotonic()
    main()
    print(f"total {time.monotonic() - started:.0f} s")
