"""The runner on a warm Spark pool: each run a Spark Connect client of a real Spark Connect server.

The same runner, connectors and transforms as on a classic session, with the same results: the
seed's file copy, a JDBC sync (its rows made in the driver and in the server's Python workers),
a SQL transform and its confinement, and a session of each run's own, released when it ends.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from connect_core.runtime.context import Runtime
from connect_core.runtime.execution.runner import TaskRunner
from connect_core.runtime.processing.chain import TransformError
from connect_core.sdk import ConfigError, is_connect
from tests.conftest import file_pair, make_runner
from tests.connectors.jdbc_helpers import Database, create_upsert_sink, postgres, synced, target  # noqa: F401  (fixtures)

pytestmark = pytest.mark.spark_connect

MARKER_CONF = "connect.test.marker"
MARKER_VIEW = "connect_test_marker"


@pytest.fixture(autouse=True)
def _connect_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    """The process is a Spark Connect client for this test only: pyspark marks it so when it makes a
    Connect session (`pyspark.sql.functions` then build Connect columns, and no classic session can
    start), and the classic tests that run after this one in the process need the mark gone."""
    monkeypatch.setenv("SPARK_CONNECT_MODE_ENABLED", "1")


@pytest.fixture
def sessions(spark_connect_url: str) -> Iterator[list[Any]]:
    """The Spark Connect sessions the test's runner was given, one per run."""
    made: list[Any] = []
    yield made
    for session in made:
        session.stop()  # released by the runner already; stopping again does nothing


@pytest.fixture
def connect_factory(spark_connect_url: str, sessions: list[Any]) -> Callable[[], Any]:
    from pyspark.sql import SparkSession

    def factory() -> Any:
        session = SparkSession.builder.remote(spark_connect_url).create()
        sessions.append(session)
        return session

    return factory


@pytest.fixture
def connect_runner(runtime: Runtime, connect_factory: Callable[[], Any]) -> TaskRunner:
    return make_runner(runtime, None, spark_factory=connect_factory)


@pytest.fixture
def client(spark_connect_url: str) -> Iterator[Any]:
    """A Spark Connect session of the test itself (not a run's)."""
    from pyspark.sql import SparkSession

    session = SparkSession.builder.remote(spark_connect_url).create()
    yield session
    session.stop()


def test_the_seeds_file_pair_copies_lines_incrementally(
    connect_runner: TaskRunner, runtime: Runtime, tmp_path: Path, sessions: list[Any]
) -> None:
    source, sink = file_pair(runtime, tmp_path)
    source.write_text("Hello\r\nRocketMQ\n Connect\n")

    first = connect_runner.run("fileSourceConnector", 0)
    assert (first.state, first.rows) == ("SUCCEEDED", 3), first.message
    assert connect_runner.run("fileSinkConnector", 0).rows == 3
    assert sink.read_text() == "Hello\nRocketMQ\n Connect\n"
    assert is_connect(sessions[0])
    stats = runtime.connectors.last_runs("fileSourceConnector", limit=1)[0]["stats"]
    assert stats["spark_master"] == "local[2]" and stats["spark_remote"].startswith("sc://localhost:")
    assert "token" not in json.dumps(stats)  # the pool's token never reaches a run's stats

    # a rerun writes nothing new
    again = [connect_runner.run(c, 0) for c in ("fileSourceConnector", "fileSinkConnector")]
    assert [(r.state, r.rows) for r in again] == [("SUCCEEDED", 0), ("SUCCEEDED", 0)]
    assert sink.read_text() == "Hello\nRocketMQ\n Connect\n"

    # an append: only the new lines
    with source.open("a") as f:
        f.write("more 1\nmore 2\n")
    assert connect_runner.run("fileSourceConnector", 0).rows == 2
    assert connect_runner.run("fileSinkConnector", 0).rows == 2
    assert sink.read_text().splitlines() == ["Hello", "RocketMQ", " Connect", "more 1", "more 2"]
    assert len(sessions) == 6  # a session per run


def test_paths_left_by_runs_that_never_committed_are_replaced_and_deleted(
    connect_runner: TaskRunner, runtime: Runtime, tmp_path: Path
) -> None:
    """Files at the path a run writes (a run killed mid-write) do not mix into its segment; what a
    killed run staged is deleted by the next run of the task (no JVM file system on Spark Connect)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    source, sink = file_pair(runtime, tmp_path)
    source.write_text("fresh 1\nfresh 2\n")
    # A run that staged output and then died (no commit, lease lapsed): run 1.
    lease = runtime.runs.acquire("fileSourceConnector", 0, lease_seconds=0.001)
    runtime.topics.ensure_topic("fileTopic")
    orphan = Path(runtime.topics.segment_path("fileTopic", 0, lease.run_id))
    runtime.runs.record_staged(lease, str(orphan))
    orphan.mkdir(parents=True)
    (orphan / "part-0.parquet").write_bytes(b"garbage")
    # A whole stale segment where the next run (2) writes: if it were kept, the sink would read it.
    stale = Path(runtime.topics.segment_path("fileTopic", 0, lease.run_id + 1))
    stale.mkdir(parents=True)
    rows = pa.table({"line": ["stale"] * 3, "__seq": pa.array([0, 1, 2], pa.int64()), "__run": [2, 2, 2]})
    pq.write_table(rows, stale / "part-00007.snappy.parquet")

    first = connect_runner.run("fileSourceConnector", 0)
    assert (first.state, first.run_id, first.rows) == ("SUCCEEDED", lease.run_id + 1, 2), first.message
    assert not orphan.exists()
    assert not (stale / "part-00007.snappy.parquet").exists()
    assert connect_runner.run("fileSinkConnector", 0).state == "SUCCEEDED"
    assert sink.read_text().splitlines() == ["fresh 1", "fresh 2"]


@pytest.mark.parametrize("where", ["driver", "workers", "jdbc-reader"])
def test_a_postgres_to_postgres_sync_is_value_for_value_and_incremental(
    where: str,
    connect_runner: TaskRunner,
    runtime: Runtime,
    postgres: Database,  # noqa: F811
    target: Database,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Rows made by COPY in the client (`driver`) or in the server's Python workers (`workers`, as a
    big window is), or read by Spark's JDBC reader in the server (a `bit` column, which the COPY path
    does not read); written by the JDBC sink."""
    if where == "workers":
        monkeypatch.setattr("connect_core.connectors.jdbc.source.DRIVER_MAX_ROWS", 0)
        monkeypatch.setattr("connect_core.sdk.records.DRIVER_MAX_ROWS", 0)
        monkeypatch.setattr("connect_core.sdk.records.CONNECT_DRIVER_MAX_ROWS", 0)
    extra = ", flag bit(1)" if where == "jdbc-reader" else ""
    postgres.execute(
        f"CREATE TABLE orders (id bigint PRIMARY KEY, name text, amount numeric(12,2), updated_at timestamp(6){extra})",
        "INSERT INTO orders SELECT g, 'n' || g || ' é', g * 1.25, timestamp '2024-01-01' + g * interval '1 second' "
        "FROM generate_series(1, 3000) g",
    )
    caplog.set_level("INFO", logger="connect")
    runtime.create_connector(
        "src",
        postgres.source_config(
            **{
                "mode": "incrementing",
                "incrementing.column.name": "id",
                "table.whitelist": "orders",
                "topic.prefix": "",
            }
        ),
    )
    create_upsert_sink(runtime, target, "orders")

    first = synced(connect_runner, "src", "sink")
    assert [r.rows for r in first] == [3000, 3000]
    reader = "Spark's JDBC reader" if where == "jdbc-reader" else "COPY"
    assert f"orders: reading the window through {reader}" in caplog.text
    _same(postgres, target)

    postgres.execute("INSERT INTO orders (id, name, amount, updated_at) VALUES (3001, 'new', 1, '2025-01-01')")
    again = synced(connect_runner, "src", "sink")
    assert [r.rows for r in again] == [1, 1]
    assert len(_same(postgres, target)) == 3001


def _same(source: Database, target: Database) -> list[tuple[Any, ...]]:  # noqa: F811
    columns = "id, name, amount, updated_at"
    rows = source.rows(f"SELECT {columns} FROM orders ORDER BY id")
    assert target.rows(f"SELECT {columns} FROM orders ORDER BY id") == rows
    return rows


def test_a_sql_transform_runs_and_stays_confined(
    connect_runner: TaskRunner,
    runtime: Runtime,
    tmp_path: Path,
    client: Any,
    connect_factory: Callable[[], Any],
) -> None:
    source, sink = file_pair(runtime, tmp_path)
    source.write_text("alpha\nbeta\n")
    runtime.update_connector(
        "fileSinkConnector",
        {
            **runtime.connectors.get("fileSinkConnector").config,
            "transforms": "q",
            "transforms.q.type": "SqlTransform",
            "transforms.q.query": "SELECT *, upper(line) AS shout FROM __THIS__",
        },
    )
    assert connect_runner.run("fileSourceConnector", 0).state == "SUCCEEDED"
    done = connect_runner.run("fileSinkConnector", 0)
    assert done.state == "SUCCEEDED", done.message
    assert sink.read_text() == '{"line":"alpha","shout":"ALPHA"}\n{"line":"beta","shout":"BETA"}\n'

    # A quoted `reflect` stored before the query check existed is refused before Spark Connect sees it.
    from connect_core.transforms.sql import SqlTransform, SqlTransformConfig
    from tests.transforms.conftest import chain, make

    quoted = SqlTransform(
        SqlTransformConfig.model_construct(
            query="SELECT `reflect`('java.lang.System', 'getProperty', 'user.home') AS h FROM __THIS__"
        )
    )
    with pytest.raises(TransformError, match="calls Java methods") as refused:
        chain(quoted).spark(client.createDataFrame([(1,)], "id long"), "t")
    assert isinstance(refused.value.__cause__, ConfigError)

    # A run's session reads no file by its path, whatever the server's default: the runner sets it off.
    client.range(3).write.parquet(str(tmp_path / "f"))
    with pytest.raises(Exception, match=r"(?i)table or view|not found|cannot be found"):
        client.sql(f"SELECT * FROM parquet.`{tmp_path}/f`").collect()
    run_session = connect_factory()
    run_session.conf.set("spark.sql.runSQLOnFiles", "true")  # as a server left at Spark's default
    allowed = make(SqlTransform, query="SELECT * FROM __THIS__")
    with pytest.raises(TransformError, match="runSQLOnFiles"):
        chain(allowed).spark(run_session.createDataFrame([(1,)], "id long"), "t")
    from connect_core.runtime.spark.session import prepare_session

    prepare_session(run_session)
    assert run_session.conf.get("spark.sql.runSQLOnFiles") == "false"
    assert run_session.conf.get("spark.sql.variable.substitute") == "false"
    assert chain(allowed).spark(run_session.createDataFrame([(1,)], "id long"), "t").count() == 1


def test_a_quoted_reflect_call_fails_the_run_and_commits_nothing(
    connect_runner: TaskRunner, runtime: Runtime, tmp_path: Path
) -> None:
    source, sink = file_pair(runtime, tmp_path)
    source.write_text("alpha\n")
    # stored as before the query check existed (create refuses it now): straight into the store
    bad = {
        "transforms": "q",
        "transforms.q.type": "SqlTransform",
        "transforms.q.query": "SELECT `reflect`('java.lang.System', 'getProperty', 'user.home') AS line FROM __THIS__",
    }
    info = runtime.connectors.get("fileSinkConnector")
    runtime.connectors.modify_config(
        "fileSinkConnector",
        lambda current: {
            "connector_class": info.connector_class,
            "type": info.type,
            "config": {**current, **bad},
            "task_configs": [{**t, **bad} for t in info.tasks],
        },
    )
    assert connect_runner.run("fileSourceConnector", 0).state == "SUCCEEDED"
    failed = connect_runner.run("fileSinkConnector", 0)
    # the stored config is validated again where the task runs: a config error, never retried
    assert (failed.state, failed.error_kind) == ("FAILED", "config")
    assert "`reflect` (calls Java methods) is not an allowed function" in failed.message, failed.message
    # only the sink's baseline, committed before any write (as on classic)
    assert {c.offset for c in runtime.connectors.sink_offsets("fileSinkConnector").values()} <= {0}
    assert not sink.exists() or sink.read_text() == ""


def test_each_run_has_a_session_of_its_own_released_when_it_ends(
    runtime: Runtime, tmp_path: Path, spark_connect_url: str, sessions: list[Any]
) -> None:
    """A temp view or a setting made in one run's session is gone in the next; the server forgets
    the session once the run ends."""
    from pyspark.sql import SparkSession

    seen: list[tuple[str | None, bool]] = []

    def factory() -> Any:
        session = SparkSession.builder.remote(spark_connect_url).create()
        sessions.append(session)
        # what the run before left, if it could leak; then this run leaves its own
        seen.append((session.conf.get(MARKER_CONF, None), session.catalog.tableExists(MARKER_VIEW)))
        session.conf.set(MARKER_CONF, f"run {len(sessions)}")
        session.range(1).createOrReplaceTempView(MARKER_VIEW)
        session.range(10).persist().count()
        return session

    runner = make_runner(runtime, None, spark_factory=factory)
    source, _ = file_pair(runtime, tmp_path)
    source.write_text("a\n")
    for _ in range(2):
        assert runner.run("fileSourceConnector", 0).state == "SUCCEEDED"
    assert runner.run("fileSinkConnector", 0).state == "SUCCEEDED"
    assert seen == [(None, False)] * 3
    assert len({s.session_id for s in sessions}) == 3

    # The server released the first run's session: it cannot be reattached.
    ended = sessions[0].session_id
    reattached = SparkSession.builder.remote(f"{spark_connect_url};session_id={ended}").create()
    try:
        with pytest.raises(Exception, match=r"(?i)closed|released|INVALID_HANDLE"):
            reattached.range(1).count()
    finally:
        reattached.stop()  # a client left open at exit would retry its clean-up against a stopped server


def test_arrow_records_run_in_the_servers_workers_with_exact_offsets(client: Any, tmp_path: Path) -> None:
    """ArrowRecords' units in consecutive order per Spark partition (Spark Connect has no `parallelize`),
    made and written by the server's Python workers, read back with the same offsets both ways."""
    from tests.runtime.topics.test_arrow_records import test_arrow_segments_read_back_with_exact_offsets_both_ways

    for in_driver in (False, True):
        test_arrow_segments_read_back_with_exact_offsets_both_ways(client, tmp_path / str(in_driver), in_driver)


def test_inputs_keep_their_units_in_order_per_partition(client: Any) -> None:
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType, StructField, StructType

    from connect_core.sdk import ArrowRecords

    units = StructType([StructField("unit", LongType())])
    records = ArrowRecords(client, [(u,) for u in range(10)], units, lambda b: b, units, partitions=3)
    rows = records.inputs.select("unit", F.spark_partition_id().alias("p")).collect()
    # as `parallelize(range(10), 3)` slices them: [0..2], [3..5], [6..9]
    assert [(r["unit"], r["p"]) for r in rows] == [(u, 0 if u < 3 else 1 if u < 6 else 2) for u in range(10)]
    one_each = dataclasses.replace(records, partitions=None)
    assert [r["p"] for r in one_each.inputs.select(F.spark_partition_id().alias("p")).collect()] == list(range(10))
