"""The README's example connector, loaded from a plugin path, runs through the runner."""

from __future__ import annotations

from pathlib import Path

from connect_core.runtime.context import Runtime
from connect_core.runtime.plugins import PluginRegistry
from tests.conftest import make_runner

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "plugins"


def test_counter_source_with_two_tasks_into_a_two_partition_topic(runtime: Runtime, spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    runtime.registry = PluginRegistry([EXAMPLES])
    runtime.create_connector(
        "counter",
        {"connector.class": "CounterSource", "topic": "numbers", "step": 5, "tasks.max": 2, "topic.partitions": 2},
    )
    runtime.create_connector(
        "numbers-out", {"connector.class": "FileSinkConnector", "topics": "numbers", "file": str(tmp_path / "o.txt")}
    )
    runner = make_runner(runtime, spark)
    for _ in range(2):
        assert [runner.run("counter", t).rows for t in (0, 1)] == [5, 5]

    assert runtime.topics.topics() == {"numbers": 2}
    segments = runtime.topics.all_segments(["numbers"])
    assert [(s.partition, s.start_offset, s.end_offset) for s in segments] == [
        (0, 0, 5),
        (0, 5, 10),
        (1, 0, 5),
        (1, 5, 10),
    ]

    assert runner.run("numbers-out", 0).rows == 20
    lines = (tmp_path / "o.txt").read_text().splitlines()
    assert sorted(lines) == sorted([f'{{"n":{i}}}' for i in range(10)] * 2)


EMPTY_SOURCE = """
from connect_core import SourceBatch, SourceConnector, SourcePosition, SourceTask


class EmptyTask(SourceTask):
    def read(self, spark, positions):
        df = spark.range(0, 10).where("id < 0")  # a query that matches nothing
        return SourceBatch({"numbers": df}, (SourcePosition({"q": 1}, {"seen": 0}),))


class EmptySource(SourceConnector):
    task_class = EmptyTask

    def task_configs(self, config, max_tasks):
        return [{}]
"""


def test_an_empty_dataframe_publishes_nothing_and_leaves_no_files(runtime: Runtime, spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "plugins").mkdir()
    (tmp_path / "plugins" / "empty_source.py").write_text(EMPTY_SOURCE)
    runtime.registry = PluginRegistry([tmp_path / "plugins"])
    runtime.create_connector("empty", {"connector.class": "EmptySource"})
    runner = make_runner(runtime, spark)
    result = runner.run("empty", 0)
    assert (result.state, result.rows, result.segments) == ("SUCCEEDED", 0, 0)
    assert runtime.topics.all_segments(["numbers"]) == []
    topic_dir = Path(runtime.settings.topics_base) / runtime.topics.cluster_id() / "numbers"
    assert not topic_dir.exists() or list(topic_dir.rglob("*.parquet")) == []
    assert runtime.connectors.positions("empty").offset({"q": 1}) == {"seen": 0}
