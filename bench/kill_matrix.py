"""The kill -9 matrix: the runner SIGKILLed at each fault point, then rerun; rows lost or duplicated.

    .venv/bin/python bench/kill_matrix.py [--runs 5] [--rows 40]

Three pipelines: the file pair (file source → topic → file sink); JDBC (a MariaDB table →
JdbcSourceConnector → topic → JdbcSinkConnector into PostgreSQL, `insert.mode` insert without a
key, so only the sink's own bookkeeping can keep a replay out); and CDC (a table of a PostgreSQL
with `wal_level=logical` of the bench's own → PostgresCdcSourceConnector → topic →
ExtractNewRecordState → JdbcSinkConnector upserting and deleting by key into PostgreSQL; every
append inserts, updates and deletes, and the slot's confirmed position is checked never to pass
the committed one). A *cell* is a fault point and a
pipeline; one run of a cell appends new source rows, then

1. spark-submits the source and the sink (one Spark application) with `CONNECT_FAULT=<point>`:
   the source dies there (at `mid_sink`, which sources do not have, the source commits and the
   sink dies half-way through writing its target);
2. reruns the source to completion;
3. for the runner's points, spark-submits the sink alone with the same fault: the sink dies there;
4. reruns both to completion, and compares the sink's target with the source, exactly: the sink
   file's lines with the source file's, the target table's rows with the source table's.

A kill is checked to have happened (the driver died by SIGKILL with no result); a fault point
that is never reached fails the matrix instead of passing it. The kills are always real
spark-submits; the reruns run the same runner in this process on one local SparkSession (no Spark
start-up each), or with `--rerun submit` by spark-submit too. The CI test
(tests/e2e/test_kill_matrix.py) runs each cell once.

Needs PostgreSQL (CONNECT_TEST_PG_URL, default postgres@127.0.0.1:5432) and MariaDB at
127.0.0.1:3306 (root). Writes bench/KILL_MATRIX.md and the "kill -9 matrix" section of RESULTS.md.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import select

from connect_core.connectors.cdc.config import owned_name
from connect_core.runtime.context import Runtime
from connect_core.runtime.execution.submit import SubmitResult, submit_tasks
from connect_core.runtime.settings import Settings
from connect_core.runtime.spark.conf import merge_spark_conf, spark_conf
from connect_core.runtime.store.models import TaskRunRow

__all__ = [
    "POINTS",
    "CdcPipeline",
    "CellResult",
    "FilePipeline",
    "JdbcPipeline",
    "Pipeline",
    "lost_and_duplicated",
    "run_cell",
    "spark_submitter",
]

#: The runner's checkpoints (sources and sinks pass them) and the sinks' own.
RUNNER_POINTS = ("before_stage", "after_stage", "before_commit", "after_commit")
POINTS = (*RUNNER_POINTS, "mid_sink")

#: spark-submit `connectors` (task 0 of each, in order, one Spark application) with a fault point or none.
Submit = Callable[[Sequence[str], str | None], list[SubmitResult]]
#: Run `connectors` to completion (raises if one does not succeed).
Rerun = Callable[[Sequence[str]], None]


class Pipeline:
    """A source connector, a sink connector, and how to add source rows and read both ends."""

    name: str
    runtime: Runtime
    source: str
    sink: str

    def append(self, rows: int) -> None:
        raise NotImplementedError

    def expected(self) -> list[Any]:
        """The source's rows, in order."""
        raise NotImplementedError

    def actual(self) -> list[Any]:
        """The sink's target's rows, in the same order."""
        raise NotImplementedError


class FilePipeline(Pipeline):
    name = "file"

    def __init__(self, runtime: Runtime, directory: Path, prefix: str = "file") -> None:
        self.runtime, self.source, self.sink = runtime, f"{prefix}-source", f"{prefix}-sink"
        self._in, self._out = directory / f"{prefix}-in.txt", directory / f"{prefix}-out.txt"
        self._in.touch()
        self._appended = 0
        topic = f"{prefix}Topic"
        runtime.create_connector(
            self.source, {"connector.class": "FileSourceConnector", "filename": str(self._in), "topic": topic}
        )
        runtime.create_connector(
            self.sink, {"connector.class": "FileSinkConnector", "filename": str(self._out), "topics": topic}
        )

    def append(self, rows: int) -> None:
        with self._in.open("a") as f:
            f.writelines(f"line {self._appended + i}\n" for i in range(rows))
        self._appended += rows

    def expected(self) -> list[Any]:
        return self._in.read_text().splitlines()

    def actual(self) -> list[Any]:
        return self._out.read_text().splitlines() if self._out.exists() else []


class JdbcPipeline(Pipeline):
    """`source` and `target` are connect_core.testing.Database: a MariaDB and a PostgreSQL database."""

    name = "jdbc"

    def __init__(self, runtime: Runtime, source: Any, target: Any, prefix: str = "jdbc") -> None:
        self.runtime, self.source, self.sink = runtime, f"{prefix}-source", f"{prefix}-sink"
        self._db, self._target = source, target
        source.execute("CREATE TABLE events (id BIGINT AUTO_INCREMENT PRIMARY KEY, kind VARCHAR(20), payload TEXT)")
        runtime.create_connector(
            self.source,
            source.source_config(
                **{
                    "mode": "incrementing",
                    "incrementing.column.name": "id",
                    "table.whitelist": "events",
                    "topic.prefix": f"{prefix}-",
                }
            ),
        )
        runtime.create_connector(
            self.sink,
            {
                "connector.class": "JdbcSinkConnector",
                "connection.url": target.jdbc_url,
                "topics": f"{prefix}-events",
                "table.name.format": "events",
                "insert.mode": "insert",  # no key: a replayed row would be a second row
                "auto.create": True,
            },
        )

    def append(self, rows: int) -> None:
        self._db.execute(
            "INSERT INTO events (kind, payload) SELECT CONCAT('k', seq MOD 7), REPEAT('é', seq MOD 13) "
            f"FROM seq_1_to_{rows}"
        )

    def expected(self) -> list[Any]:
        return [tuple(r) for r in self._db.rows("SELECT id, kind, payload FROM events ORDER BY id")]

    def actual(self) -> list[Any]:
        exists = self._target.rows("SELECT to_regclass('events') IS NOT NULL")[0][0]
        return (
            [tuple(r) for r in self._target.rows("SELECT id, kind, payload FROM events ORDER BY id")] if exists else []
        )


class CdcPipeline(Pipeline):
    """Change data capture: a PostgreSQL table with `wal_level=logical` (`source`: a
    connect_core.testing.PgServer) → PostgresCdcSourceConnector → topic →
    ExtractNewRecordState → JdbcSinkConnector (upsert by the record key, `delete.enabled`) into
    PostgreSQL (`target`). Every append inserts, updates and deletes, so the target must follow
    each change, deletes included; a replayed or lost change shows as a row that differs."""

    name = "cdc"

    def __init__(self, runtime: Runtime, source: Any, target: Any, prefix: str = "cdc") -> None:
        self.runtime, self.source, self.sink = runtime, f"{prefix}-source", f"{prefix}-sink"
        self._db, self._target = source, target
        self._next, self._server = 1, prefix
        # the default slot, named after the connector: a first run killed before its first commit leaves
        # it behind, and only a slot provably the connector's own is dropped and made again by the rerun
        self.slot = owned_name(self.source)
        self.table = f"{prefix}_events"  # the target's (a target database may hold the JDBC pipeline's `events`)
        source.execute("CREATE TABLE events (id bigint PRIMARY KEY, kind text NOT NULL, version int NOT NULL)")
        runtime.create_connector(
            self.source,
            {
                "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
                "database.hostname": source.host,
                "database.port": str(source.port),
                "database.user": source.user,
                "database.dbname": source.database,
                "topic.prefix": prefix,
                "publication.name": f"{prefix}_pub_{uuid.uuid4().hex[:8]}",
                "table.include.list": "public.events",
            },
        )
        runtime.create_connector(
            self.sink,
            {
                "connector.class": "JdbcSinkConnector",
                "connection.url": target.jdbc_url,
                "topics": f"{prefix}.public.events",
                "table.name.format": self.table,
                "insert.mode": "upsert",
                "pk.mode": "record_key",
                "delete.enabled": True,
                "auto.create": True,
                "transforms": "unwrap",
                "transforms.unwrap.type": "io.debezium.transforms.ExtractNewRecordState",
            },
        )

    def append(self, rows: int) -> None:
        """`rows` new rows, then an update of every third row there is and a delete of every fifth."""
        first, self._next = self._next, self._next + rows
        self._db.execute(
            f"INSERT INTO events SELECT g, 'k' || g % 7, 1 FROM generate_series({first}, {self._next - 1}) g",
            f"UPDATE events SET version = version + 1, kind = kind || '+' WHERE id % 3 = {first % 3}",
            f"DELETE FROM events WHERE id % 5 = {first % 5} AND id < {first}",
        )

    def expected(self) -> list[Any]:
        return [tuple(r) for r in self._db.rows("SELECT id, kind, version FROM events ORDER BY id")]

    def actual(self) -> list[Any]:
        exists = self._target.rows(f"SELECT to_regclass('{self.table}') IS NOT NULL")[0][0]
        query = f"SELECT id, kind, version FROM {self.table} ORDER BY id"
        return [tuple(r) for r in self._target.rows(query)] if exists else []

    def confirmed_past_committed(self) -> bool:
        """Whether the slot's confirmed position is past what the metadata committed (it must never be)."""
        offset = self.runtime.connectors.positions(self.source).offset({"server": self._server})
        committed = int(offset["lsn"]) if offset else 0
        (text,) = self._db.rows(
            "SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = %s", self.slot
        )[0]
        high, low = text.split("/")
        return ((int(high, 16) << 32) | int(low, 16)) > committed


def lost_and_duplicated(expected: Sequence[Any], actual: Sequence[Any]) -> tuple[int, int]:
    """Rows of `expected` missing from `actual`, and rows of `actual` beyond `expected` (copies, strays)."""
    want, got = Counter(expected), Counter(actual)
    return sum((want - got).values()), sum((got - want).values())


@dataclass
class CellResult:
    pipeline: str
    point: str
    killed: list[str]  # which connectors were SIGKILLed at the point, in order
    lost: int
    duplicated: int
    in_order: bool  # the target's rows in the source's order
    seconds: float


def run_cell(pipe: Pipeline, point: str, submit: Submit, rerun: Rerun, rows: int) -> CellResult:
    """One run of the cell (`pipe`, `point`); see the module's docstring."""
    started = time.monotonic()
    pipe.append(rows)
    killed = [_killed(pipe, submit([pipe.source, pipe.sink], point), point)]
    if point in RUNNER_POINTS:
        rerun([pipe.source])
        killed.append(_killed(pipe, submit([pipe.sink], point), point))
    rerun([pipe.source, pipe.sink])
    expected, actual = pipe.expected(), pipe.actual()
    lost, duplicated = lost_and_duplicated(expected, actual)
    return CellResult(
        pipe.name, point, killed, lost, duplicated, actual == expected, round(time.monotonic() - started, 1)
    )


def _killed(pipe: Pipeline, results: list[SubmitResult], point: str) -> str:
    """The connector whose run was SIGKILLed at `point`; raises when the driver was not killed (a point
    never reached). The driver prints its results only at its end, so a killed submit reports none:
    the killed run is the newest run of the submitted tasks (later tasks of the submit never started)."""
    if any(r.state != "KILLED" for r in results):
        states = ", ".join(f"{r.connector}: {r.state} {r.result.get('message', '')}" for r in results)
        raise AssertionError(f"no run was killed at `{point}` ({states}):\n{results[-1].stderr_tail}")
    names = [r.connector for r in results]
    with pipe.runtime.engine.connect() as conn:
        newest = conn.scalar(
            select(TaskRunRow.connector).where(TaskRunRow.connector.in_(names)).order_by(TaskRunRow.id.desc()).limit(1)
        )
    return str(newest)


def spark_submitter(runtime: Runtime) -> Submit:
    """Real spark-submits of task 0 of each connector, with the connectors' Spark settings (JDBC jars)."""

    def submit(connectors: Sequence[str], fault: str | None) -> list[SubmitResult]:
        conf = merge_spark_conf(*(runtime.spark_conf_for(name) for name in dict.fromkeys(connectors)))
        return submit_tasks(
            runtime.settings,
            runtime.database_url,
            [(name, 0) for name in connectors],
            conf=conf,
            extra_env={"CONNECT_FAULT": fault} if fault else None,
            timeout=600,
        )

    return submit


def in_process_rerun(runtime: Runtime, spark: Any) -> Rerun:
    """Reruns by the runner in this process on `spark` (one at a time: the session is shared)."""
    from connect_core.runtime.execution.runner import TaskRunner

    runner = TaskRunner.for_runtime(runtime, lambda: spark)
    lock = threading.Lock()

    def rerun(connectors: Sequence[str]) -> None:
        with lock:
            for name in connectors:
                result = runner.run(name, 0)
                if result.state != "SUCCEEDED":
                    raise AssertionError(f"rerun of `{name}`: {result.state} {result.message}")

    return rerun


def submit_rerun(submit: Submit) -> Rerun:
    def rerun(connectors: Sequence[str]) -> None:
        for r in submit(connectors, None):
            if r.state != "SUCCEEDED":
                raise AssertionError(f"rerun of `{r.connector}`: {r.state} {r.result.get('message')}\n{r.stderr_tail}")

    return rerun


# -- the bench ---------------------------------------------------------------


def _table(results: list[CellResult], runs: int) -> list[str]:
    lines = [
        "| fault point | pipeline | killed | runs | rows lost | rows duplicated | target in source order |",
        "|---|---|---|---:|---:|---:|---|",
    ]
    for point in POINTS:
        for pipeline in ("file", "jdbc", "cdc"):
            cell = [r for r in results if r.point == point and r.pipeline == pipeline]
            killed = " then ".join(dict.fromkeys("sink" if k.endswith("sink") else "source" for k in cell[0].killed))
            lines.append(
                f"| {point} | {pipeline} | {killed} | {len(cell)} | {sum(r.lost for r in cell)} "
                f"| {sum(r.duplicated for r in cell)} | {'yes' if all(r.in_order for r in cell) else 'NO'} |"
            )
    assert all(
        len([r for r in results if (r.point, r.pipeline) == (p, n)]) == runs
        for p in POINTS
        for n in ("file", "jdbc", "cdc")
    )
    return lines


@contextmanager
def _databases() -> Iterator[tuple[str, Any, Any]]:
    """(metadata database URL, MariaDB source, PostgreSQL target): fresh, dropped afterwards."""
    from connect_core.testing import SERVER_URL, mariadb_database, metadata_database, pg_database

    suffix = f"kill_{uuid.uuid4().hex[:8]}"
    with (
        mariadb_database(f"bench_{suffix}") as source,
        metadata_database(SERVER_URL) as meta,  # empty: Runtime.open migrates it, as a user's first start
        pg_database(SERVER_URL, f"bench_{suffix}_dst") as target,
    ):
        yield meta, source, target


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5, help="runs of every cell")
    parser.add_argument("--rows", type=int, default=40, help="source rows added by every run of a cell")
    parser.add_argument("--rerun", choices=("in-process", "submit"), default="in-process", help="how reruns run")
    args = parser.parse_args()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from connect_core.testing import fresh_db, start_logical_pg

    with (
        tempfile.TemporaryDirectory() as tmp,
        _databases() as (url, source_db, target_db),
        start_logical_pg() as logical,
        fresh_db(logical) as cdc_db,
    ):
        home = Path(tmp)
        os.environ["CONNECT_FILE_ALLOWED_PATHS"] = str(home)  # file connectors are confined to it
        runtime = Runtime.open(Settings(database_url=url, home=home / "home", file_allowed_paths=str(home)))
        submit = spark_submitter(runtime)
        cdc = CdcPipeline(runtime, cdc_db, target_db)
        pipes = [FilePipeline(runtime, home), JdbcPipeline(runtime, source_db, target_db), cdc]
        rerun = submit_rerun(submit) if args.rerun == "submit" else in_process_rerun(runtime, _session(runtime, pipes))
        results: list[CellResult] = []
        started = time.monotonic()

        def matrix(pipe: Pipeline) -> None:  # the pipelines are independent: one thread each
            for run in range(args.runs):
                for point in POINTS:
                    cell = run_cell(pipe, point, submit, rerun, args.rows)
                    results.append(cell)
                    print(f"run {run + 1} {cell}", flush=True)

        threads = [threading.Thread(target=matrix, args=(pipe,)) for pipe in pipes]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if cdc.confirmed_past_committed():
            raise SystemExit("the CDC slot was told a position past what the metadata committed")
        runtime.close()
        minutes = (time.monotonic() - started) / 60
    table = _table(results, args.runs)
    _write(table, args, minutes)


def _session(runtime: Runtime, pipes: Sequence[Pipeline]) -> Any:
    """A local SparkSession with the connectors' Spark settings (the JDBC drivers' jars)."""
    from pyspark.sql import SparkSession

    conf = merge_spark_conf(*(runtime.spark_conf_for(n) for p in pipes for n in (p.source, p.sink)))
    builder = SparkSession.builder.master("local[2]").appName("kill-matrix-reruns")
    for key, value in {**spark_conf(), **conf}.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def _write(table: list[str], args: argparse.Namespace, minutes: float) -> None:
    bench = Path(__file__).resolve().parent
    sys.path.insert(0, str(bench))
    from _results import write_sections

    how = (
        f"Reproduce: `.venv/bin/python bench/kill_matrix.py --runs {args.runs} --rows {args.rows}` "
        f"({minutes:.0f} min on 2 cores shared with other work). Every run of a cell adds {args.rows} "
        "source rows, SIGKILLs the runner's spark-submit at the point (`CONNECT_FAULT`: the source there, "
        "then the sink there; at `mid_sink` the sink half-way through writing its target), reruns to "
        f"completion ({'by spark-submit' if args.rerun == 'submit' else 'in the bench process'}), and "
        "compares the whole target with the whole source."
    )
    (bench / "KILL_MATRIX.md").write_text(
        "# The kill -9 matrix\n\n"
        + (__doc__ or "").split("\n\n", 1)[1].split("Needs PostgreSQL")[0]
        + how
        + "\n\n"
        + "\n".join(table)
        + "\n"
    )
    write_sections(
        ["## kill -9 matrix: runner SIGKILLed at each fault point, then rerun (file, JDBC, CDC)", "", how, "", *table]
    )


if __name__ == "__main__":
    main()
