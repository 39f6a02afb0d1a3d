"""Transforms in real runs (in-process runner, shared SparkSession, real Postgres): a source's before
its topic, a sink's after it, routing included, and offsets still exact."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from connect_core.runtime.context import Runtime
from connect_core.runtime.execution.runner import TaskRunner
from connect_core.sdk.errors import ConfigError

#: Kafka's documentation, "Transformations": wrap each line in a struct and add a static field.
KAFKA_DOC_TRANSFORMS = {
    "transforms": "MakeMap, InsertSource",
    "transforms.MakeMap.type": "org.apache.kafka.connect.transforms.HoistField$Value",
    "transforms.MakeMap.field": "line",
    "transforms.InsertSource.type": "org.apache.kafka.connect.transforms.InsertField$Value",
    "transforms.InsertSource.static.field": "data_source",
    "transforms.InsertSource.static.value": "test-file-source",
}


def _source(runtime: Runtime, path: Path, topic: str, **extra: Any) -> None:
    runtime.create_connector(
        "src", {"connector.class": "FileSourceConnector", "filename": str(path), "topic": topic, **extra}
    )


def _sink(runtime: Runtime, path: Path, topics: str, name: str = "sink", **extra: Any) -> None:
    runtime.create_connector(
        name, {"connector.class": "FileSinkConnector", "filename": str(path), "topics": topics, **extra}
    )


def test_source_transforms_from_kafkas_documentation(runner: TaskRunner, runtime: Runtime, tmp_path: Path) -> None:
    source, sink = tmp_path / "in.txt", tmp_path / "out.txt"
    _source(runtime, source, "lines", **KAFKA_DOC_TRANSFORMS)
    _sink(runtime, sink, "lines")
    source.write_text("a\nb\n")
    assert runner.run("src", 0).state == "SUCCEEDED"
    assert runner.run("sink", 0).rows == 2
    assert [json.loads(line) for line in sink.read_text().splitlines()] == [
        {"line": {"line": "a"}, "data_source": "test-file-source"},
        {"line": {"line": "b"}, "data_source": "test-file-source"},
    ]


def test_a_router_on_the_source_writes_the_routed_topic(runner: TaskRunner, runtime: Runtime, tmp_path: Path) -> None:
    source, sink = tmp_path / "in.txt", tmp_path / "out.txt"
    _source(
        runtime,
        source,
        "orders_raw",
        **{
            "transforms": "route",
            "transforms.route.type": "org.apache.kafka.connect.transforms.RegexRouter",
            "transforms.route.regex": "(.*)_raw",
            "transforms.route.replacement": "$1",
        },
    )
    _sink(runtime, sink, "orders")
    source.write_text("x\ny\n")
    runner.run("src", 0)
    assert set(runtime.topics.topics()) == {"orders"}  # no `orders_raw`: records went to the routed topic
    assert runner.run("sink", 0).rows == 2
    assert sink.read_text().splitlines() == ["x", "y"]


def test_sink_filter_with_a_predicate_and_offsets_past_dropped_rows(
    runner: TaskRunner, runtime: Runtime, tmp_path: Path
) -> None:
    a, b, sink = tmp_path / "a.txt", tmp_path / "b.txt", tmp_path / "out.txt"
    runtime.create_connector("srcA", {"connector.class": "FileSourceConnector", "filename": str(a), "topic": "foo"})
    runtime.create_connector("srcB", {"connector.class": "FileSourceConnector", "filename": str(b), "topic": "bar"})
    _sink(
        runtime,
        sink,
        "foo,bar",
        **{
            "transforms": "Filter",
            "transforms.Filter.type": "org.apache.kafka.connect.transforms.Filter",
            "transforms.Filter.predicate": "IsFoo",
            "predicates": "IsFoo",
            "predicates.IsFoo.type": "org.apache.kafka.connect.transforms.predicates.TopicNameMatches",
            "predicates.IsFoo.pattern": "foo",
        },
    )
    a.write_text("from foo\n")
    b.write_text("from bar\n")
    runner.run("srcA", 0)
    runner.run("srcB", 0)
    assert runner.run("sink", 0).state == "SUCCEEDED"
    assert sink.read_text().splitlines() == ["from bar"]
    # the dropped record's offset is consumed too: a second run reads nothing again
    assert runner.run("sink", 0).rows == 0
    offsets = {tp.topic: c.offset for tp, c in runtime.connectors.sink_offsets("sink").items()}
    assert offsets == {"foo": 1, "bar": 1}


def test_a_bad_transform_config_is_refused_at_create_with_every_key(runtime: Runtime, tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        _source(
            runtime,
            tmp_path / "in.txt",
            "t",
            **{
                "transforms": "a,b",
                "transforms.a.type": "InsertField$Value",
                "transforms.b.type": "Cast$Value",
                "transforms.b.spec": "id:notatype",
            },
        )
    assert "transforms.b.spec" in caught.value.errors
    assert runtime.connectors.names() == []
