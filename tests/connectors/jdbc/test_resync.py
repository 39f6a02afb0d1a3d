"""`connect resync` of a JDBC source's table (real PostgreSQL source → topic → a sink that records what
the runner gives it): the other tables keep their positions, every row of the table arrives again,
the re-read's boundaries are recorded in the source's commit, a sink batch never straddles them and
is told `ends` exactly once, when it has every row (also when the end came with no rows); a killed
run leaves the request and records nothing; a request the source cannot take is refused."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from typing import Any, ClassVar

import httpx
import pytest

from connect_core.runtime.context import Runtime
from connect_core.runtime.execution.precheck import has_new_data
from connect_core.runtime.execution.runner import TaskRunner
from connect_core.runtime.management.local import LocalManagement
from connect_core.runtime.plugins import PluginRegistry
from connect_core.runtime.topics.resyncs import TOLD, ReRead
from connect_core.sdk import SinkBatch, SinkConnector, SinkConnectorConfig, SinkTask
from connect_core.sdk.errors import ConfigError, ConflictError
from connect_core.sdk.records import OFFSET_COLUMN, Resync, TopicPartition
from connect_core.sdk.testing import faults
from tests.conftest import make_runner
from tests.connectors.jdbc_helpers import Database, postgres  # noqa: F401  (fixtures)
from tests.rest.conftest import make_api  # noqa: F401  (fixture)


class _RecordingTask(SinkTask):
    def write(self, spark: Any, batch: SinkBatch) -> Mapping[str, Any] | None:
        rows = {
            topic: sorted(r[0] for r in batch.topic(topic).select(OFFSET_COLUMN).collect())
            for topic in batch.read_topics()
        }
        RecordingSink.batches.append((rows, dict(batch.replacing)))
        return {"written": sum(len(v) for v in rows.values())}


class RecordingSink(SinkConnector[SinkConnectorConfig]):
    """Notes each batch: its offsets per topic and its `replacing`."""

    config_model = SinkConnectorConfig
    task_class = _RecordingTask
    batches: ClassVar[list[tuple[dict[str, list[int]], dict[str, Resync]]]] = []

    def task_configs(self, config: SinkConnectorConfig, max_tasks: int) -> list[dict[str, Any]]:
        return [{}]


@pytest.fixture
def pipeline(runtime: Runtime, spark: Any, postgres: Database) -> TaskRunner:  # noqa: F811
    """Tables `a` (10 rows) and `b` (3 rows) read by `src` (4 rows a window) into `p_a`, `p_b`; `sink`
    records what it gets of both."""
    runtime.registry = PluginRegistry(extra=[RecordingSink])
    RecordingSink.batches.clear()
    postgres.execute(
        "CREATE TABLE a (id bigint PRIMARY KEY, v text)",
        "CREATE TABLE b (id bigint PRIMARY KEY, v text)",
        "CREATE TABLE c (id bigint PRIMARY KEY, v text)",
        "INSERT INTO a SELECT g, 'a' || g FROM generate_series(1, 10) g",
        "INSERT INTO b SELECT g, 'b' || g FROM generate_series(1, 3) g",
    )
    runtime.create_connector(
        "src",
        postgres.source_config(
            **{
                "mode": "incrementing",
                "incrementing.column.name": "id",
                "table.whitelist": "a,b,c",
                "topic.prefix": "p_",
                "batch.max.rows": 4,
            }
        ),
    )
    runtime.create_connector("sink", {"connector.class": "RecordingSink", "topics": "p_a,p_b,p_c"})
    return make_runner(runtime, spark)


def _run(runner: TaskRunner, connector: str, times: int = 1) -> None:
    for _ in range(times):
        result = runner.run(connector, 0)
        assert result.state == "SUCCEEDED", result.message


def _positions(runtime: Runtime) -> dict[str, Any]:
    return {json.loads(k)["table"]: dict(p.offset) for k, p in runtime.connectors.positions("src").items()}


def test_a_replace_re_read_reaches_the_sink_whole_and_apart(
    runtime: Runtime,
    pipeline: TaskRunner,
    postgres: Database,  # noqa: F811
) -> None:
    _run(pipeline, "src", 3)  # a: 4 + 4 + 2 rows, b: 3
    assert _positions(runtime) == {"a": {"incrementing": 10}, "b": {"incrementing": 3}}
    manage = LocalManagement(runtime)
    queued = manage.resync("src", "a", "replace")
    assert queued["table"] == "a" and queued["mode"] == "replace"
    assert has_new_data(runtime, "src", 0) is True
    postgres.execute("INSERT INTO a VALUES (11, 'a11')", "INSERT INTO b VALUES (4, 'b4')")

    _run(pipeline, "src")  # the re-read's first window; b goes on from its own position
    positions = _positions(runtime)
    assert positions["b"] == {"incrementing": 4}
    assert positions["a"] == {
        "incrementing": 4,
        "resync": {"generation": 1, "mode": "replace", "until": {"incrementing": 11}},
    }
    assert runtime.connectors.signals.pending("src") == []  # consumed by the commit that began it
    assert runtime.topics.resyncs.all("p_a") == [ReRead(TopicPartition("p_a", 0), 1, "replace", 10, None)]
    with pytest.raises(ConflictError, match="under way"):
        manage.resync("src", "a")

    _run(pipeline, "src", 2)  # ids 5..8, then 9..11: the end
    assert _positions(runtime)["a"] == {"incrementing": 11}
    assert runtime.topics.resyncs.all("p_a") == [ReRead(TopicPartition("p_a", 0), 1, "replace", 10, 21)]
    assert has_new_data(runtime, "src", 0) is False

    _run(pipeline, "sink", 3)
    (before, none), (inside, replacing) = RecordingSink.batches  # the third run: nothing new, no write
    assert before == {"p_a": list(range(10)), "p_b": [0, 1, 2, 3]} and none == {}  # stops at the beginning
    assert inside == {"p_a": list(range(10, 21))}  # every row again, ids 1..11, and nothing else
    assert replacing == {"p_a": Resync(1, "replace", ends=True)}
    told = runtime.connectors.sink_offsets("sink")[TopicPartition("p_a", 0)]
    assert told.offset == 21 and told.metadata[TOLD] == {"p_a": {"0": 1}} and told.metadata["written"] == 11
    assert has_new_data(runtime, "sink", 0) is False


def test_the_sink_is_told_the_end_once_when_the_last_window_has_no_rows(
    runtime: Runtime,
    pipeline: TaskRunner,
    postgres: Database,  # noqa: F811
) -> None:
    _run(pipeline, "src", 3)
    _run(pipeline, "sink")
    LocalManagement(runtime).resync("src", "a", "replace")
    _run(pipeline, "src")  # ids 1..4 (until: 10)
    postgres.execute("DELETE FROM a WHERE id >= 9")
    _run(pipeline, "src")  # ids 5..8: not the end yet
    _run(pipeline, "sink")
    assert RecordingSink.batches[-1] == ({"p_a": list(range(10, 18))}, {"p_a": Resync(1, "replace")})
    assert has_new_data(runtime, "sink", 0) is False
    _run(pipeline, "src")  # nothing left up to `until`: the end, with no rows
    assert runtime.topics.resyncs.all("p_a")[0].end == 18
    assert has_new_data(runtime, "sink", 0) is True  # a run to tell the end
    told = len(RecordingSink.batches)
    _run(pipeline, "sink", 2)  # the second: nothing to write
    assert RecordingSink.batches[told:] == [({}, {"p_a": Resync(1, "replace", ends=True)})]
    assert has_new_data(runtime, "sink", 0) is False


def test_an_empty_table_s_re_read_begins_and_ends_in_one_batch(
    runtime: Runtime,
    pipeline: TaskRunner,
) -> None:
    _run(pipeline, "src", 3)
    LocalManagement(runtime).resync("src", "c", "replace")
    _run(pipeline, "src")
    assert runtime.topics.resyncs.all("p_c") == [ReRead(TopicPartition("p_c", 0), 1, "replace", 0, 0)]
    _run(pipeline, "sink", 2)
    replaced = [r for _, r in RecordingSink.batches if "p_c" in r]
    assert replaced == [{"p_c": Resync(1, "replace", ends=True)}]
    # a second re-read of it takes the next generation
    LocalManagement(runtime).resync("src", "c", "retain")
    _run(pipeline, "src")
    assert [r.generation for r in runtime.topics.resyncs.all("p_c")] == [1, 2]
    assert runtime.topics.resyncs.replacing([TopicPartition("p_c", 0)])[-1].generation == 1  # retain: not replacing


def test_a_run_killed_before_its_commit_leaves_the_request_and_records_nothing(
    runtime: Runtime,
    pipeline: TaskRunner,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _run(pipeline, "src", 3)
    LocalManagement(runtime).resync("src", "a", "retain")
    before = _positions(runtime)

    def crash(point: str) -> None:
        if point == "before_commit":
            raise RuntimeError("killed")

    monkeypatch.setattr(faults, "checkpoint", crash)
    assert pipeline.run("src", 0).state == "FAILED"
    monkeypatch.undo()
    assert _positions(runtime) == before and runtime.topics.resyncs.all("p_a") == []
    assert len(runtime.connectors.signals.pending("src")) == 1
    _run(pipeline, "src", 3)
    assert runtime.topics.resyncs.all("p_a") == [ReRead(TopicPartition("p_a", 0), 1, "retain", 10, 20)]
    _run(pipeline, "sink", 2)
    assert RecordingSink.batches[0] == ({"p_a": list(range(20)), "p_b": [0, 1, 2]}, {})  # retain: ordinary rows


def test_the_signal_goes_to_the_task_reading_the_table(runtime: Runtime, pipeline: TaskRunner) -> None:
    LocalManagement(runtime).patch_config("src", {"tasks.max": 2})  # a, c on task 0; b on task 1
    LocalManagement(runtime).resync("src", "b")
    assert has_new_data(runtime, "src", 1) is True
    _run(pipeline, "src")  # task 0: leaves it
    assert len(runtime.connectors.signals.pending("src")) == 1
    result = pipeline.run("src", 1)
    assert result.state == "SUCCEEDED", result.message
    assert runtime.connectors.signals.pending("src") == []
    assert [r.begin for r in runtime.topics.resyncs.all("p_b")] == [0]


def test_a_signal_naming_tables_of_two_tasks_reaches_both(runtime: Runtime, pipeline: TaskRunner) -> None:
    manage = LocalManagement(runtime)
    manage.patch_config("src", {"tasks.max": 2})  # a, c on task 0; b on task 1
    manage.send_signal("src", "both", "execute-snapshot", {"data-collections": ["a", "b"]})
    waiting = sorted(s.data["data-collections"] for _, s in runtime.connectors.signals.pending("src"))
    assert waiting == [["a"], ["b"]]  # a part for each task, consumed by its own commit
    for task in (0, 1):
        result = pipeline.run("src", task)
        assert result.state == "SUCCEEDED", result.message
    assert runtime.connectors.signals.pending("src") == []
    assert [r.generation for r in runtime.topics.resyncs.all("p_a")] == [1]
    assert [r.generation for r in runtime.topics.resyncs.all("p_b")] == [1]


def test_signals_a_jdbc_source_cannot_act_on_are_refused(runtime: Runtime, pipeline: TaskRunner) -> None:
    manage = LocalManagement(runtime)
    for kind, data, key in [
        ("pause-snapshot", {}, "type"),
        ("execute-snapshot", {"data-collections": ["a; DROP TABLE a"]}, "data.data-collections"),
        ("execute-snapshot", {"data-collections": ["a"], "resync-mode": "replace"}, "data.resync-mode"),
    ]:
        with pytest.raises(ConfigError) as refused:
            manage.send_signal("src", None, kind, data)
        assert key in refused.value.errors, refused.value.errors
    assert runtime.connectors.signals.pending("src") == []


def test_requests_the_source_cannot_take_are_refused(
    runtime: Runtime,
    pipeline: TaskRunner,
    postgres: Database,  # noqa: F811
    tmp_path: Any,
    make_api: Any,  # noqa: F811
) -> None:
    manage = LocalManagement(runtime)
    with pytest.raises(ConfigError, match="reads: a, b, c") as unknown:
        manage.resync("src", "nope")
    assert "table" in unknown.value.errors
    with pytest.raises(ConfigError) as mode:
        manage.resync("src", "a", "wipe")
    assert "mode" in mode.value.errors
    with pytest.raises(ConfigError, match="does not re-read tables"):
        manage.resync("sink", "a")
    runtime.create_connector(
        "q",
        postgres.source_config(
            **{
                "query": "SELECT * FROM a",
                "topic.prefix": "q",
                "mode": "incrementing",
                "incrementing.column.name": "id",
            }
        ),
    )
    with pytest.raises(ConfigError, match="query"):
        manage.resync("q", "a")

    api = make_api()
    with httpx.Client(base_url=api.url, timeout=30) as client:
        sent = client.post("/connectors/src/resync", json={"table": "b"})
        assert sent.status_code == 202 and sent.json()["mode"] == "retain" and sent.json()["table"] == "b"
        assert client.post("/connectors/src/resync", json={"table": "b"}).status_code == 409  # queued already
        assert client.post("/connectors/src/resync", json={"table": "zz"}).status_code == 400
        assert client.post("/connectors/src/resync", json={"table": "a", "mode": "x"}).status_code == 400
        assert client.post("/connectors/nope/resync", json={"table": "a"}).status_code == 404
        assert client.post("/connectors/src/resync", json={"table": "a", "more": 1}).status_code in (400, 422)

    env = {k: v for k, v in os.environ.items() if not k.startswith("CONNECT_")}
    env["CONNECT_REST_URL"] = api.url
    cli = subprocess.run(
        [sys.executable, "-m", "connect_core.cli", "resync", "src", "--table", "a", "--mode", "replace"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert cli.returncode == 0, cli.stdout + cli.stderr
    assert "re-read of a (replace) queued for `src`" in cli.stdout
    waiting = [s.data for _, s in runtime.connectors.signals.pending("src")]
    assert waiting[-1] == {"data-collections": ["a"], "type": "incremental", "resync-mode": "replace"}


def test_a_timestamp_table_is_re_read_up_to_its_newest_row_then_goes_on(
    runtime: Runtime,
    spark: Any,
    postgres: Database,  # noqa: F811
) -> None:
    postgres.execute(
        "CREATE TABLE t (id bigint PRIMARY KEY, at timestamp(6))",
        "INSERT INTO t SELECT g, timestamp '2024-01-01' + g * interval '1 second' FROM generate_series(1, 5) g",
    )
    runtime.create_connector(
        "ts",
        postgres.source_config(
            **{
                "mode": "timestamp+incrementing",
                "incrementing.column.name": "id",
                "timestamp.column.name": "at",
                "table.whitelist": "t",
                "topic.prefix": "",
                "batch.max.rows": 2,
            }
        ),
    )
    runner = make_runner(runtime, spark)
    _run(runner, "ts", 3)
    done = dict(runtime.connectors.positions("ts")['{"table":"t"}'].offset)
    LocalManagement(runtime).resync("ts", "t")
    _run(runner, "ts")
    postgres.execute("INSERT INTO t VALUES (6, timestamp '2024-01-02')")  # past `until`: after the re-read
    _run(runner, "ts", 2)  # ids 3..4, then 5: the end
    assert dict(runtime.connectors.positions("ts")['{"table":"t"}'].offset) == done
    assert runtime.topics.resyncs.all("t") == [ReRead(TopicPartition("t", 0), 1, "retain", 5, 10)]
    _run(runner, "ts")
    assert [s.row_count for s in runtime.topics.all_segments(["t"])] == [2, 2, 1, 2, 2, 1, 1]


def test_a_re_read_its_source_dropped_is_abandoned(runtime: Runtime, pipeline: TaskRunner) -> None:
    _run(pipeline, "src", 3)
    manage = LocalManagement(runtime)
    manage.resync("src", "a", "replace")
    _run(pipeline, "src")  # begins at offset 10
    manage.set_state("src", "STOPPED")
    manage.reset_offsets("src")  # its positions, and with them the re-read, are gone
    manage.set_state("src", "RUNNING")
    _run(pipeline, "src")  # table a read anew as ordinary rows, from offset 14
    (dropped,) = runtime.topics.resyncs.all("p_a")
    assert (dropped.mode, dropped.begin, dropped.end) == ("abandoned", 10, 14)
    _run(pipeline, "sink", 2)
    assert all(replacing == {} for _, replacing in RecordingSink.batches)  # its rows are ordinary writes
