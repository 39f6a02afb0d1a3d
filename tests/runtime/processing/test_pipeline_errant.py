"""Records a transform cannot convert, in real runs (in-process runner, shared SparkSession, real
Postgres): under `errors.tolerance=all` they go to the dead-letter topic with Kafka's context
headers, committed with the run, and the good records go on; under `none` the run fails and
commits nothing. On a source's DataFrame and Arrow records, and on a sink's batch."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from connect_core.runtime.context import Runtime
from connect_core.runtime.execution.runner import TaskRunner
from connect_core.runtime.topics.segments import read_segments
from tests.connectors.jdbc_helpers import Database, postgres, target  # noqa: F401  (fixtures)

CAST_CLASS = "connect_core.transforms.cast.CastValue"
TOLERANT = {
    "errors.tolerance": "all",
    "errors.deadletterqueue.topic.name": "dlq",
    "errors.deadletterqueue.context.headers.enable": "true",
    "errors.log.enable": "true",
}


def _cast(spec: str) -> dict[str, str]:
    return {
        "transforms": "cast",
        "transforms.cast.type": "org.apache.kafka.connect.transforms.Cast$Value",
        "transforms.cast.spec": spec,
    }


#: A SQL step first: the chain cannot run on Arrow, the records go through Spark.
def _sql_then_cast(spec: str) -> dict[str, str]:
    return {
        **_cast(spec),
        "transforms": "sql,cast",
        "transforms.sql.type": "SqlTransform",
        "transforms.sql.query": "SELECT * FROM __THIS__",
    }


#: A SQL step after the cast: the rows it set aside go around the query.
def _cast_then_sql(spec: str) -> dict[str, str]:
    return {**_sql_then_cast(spec), "transforms": "cast,sql"}


def _rows(runtime: Runtime, spark: Any, topic: str) -> list[dict[str, Any]]:
    segments = runtime.topics.all_segments([topic])
    if not segments:
        return []
    df = read_segments(spark, segments).orderBy("__offset")
    return [r.asDict(recursive=True) for r in df.collect()]


def _headers(row: dict[str, Any]) -> dict[str, str]:
    prefix = "__connect.errors."
    return {h["key"][len(prefix) :]: h["value"] for h in row["__headers"] or [] if h["key"].startswith(prefix)}


def _assert_transformation_headers(row: dict[str, Any], connector: str, topic: str) -> dict[str, str]:
    headers = _headers(row)
    assert headers["stage"] == "TRANSFORMATION"
    assert headers["class.name"] == CAST_CLASS
    assert headers["exception.class.name"] == "connect_core.sdk.errors.DataError"
    assert headers["exception.message"] == f"transform `cast` ({CAST_CLASS}) could not convert the record"
    assert (headers["connector.name"], headers["topic"]) == (connector, topic)
    return headers


# -- sources ------------------------------------------------------------------------


@pytest.mark.parametrize("transforms", [_cast, _cast_then_sql], ids=["cast", "cast-then-sql"])
def test_a_tolerant_file_source_dead_letters_the_lines_a_cast_cannot_convert(
    runner: TaskRunner, runtime: Runtime, spark: Any, tmp_path: Path, transforms: Any
) -> None:
    source = tmp_path / "in.txt"
    runtime.create_connector(
        "src",
        {
            "connector.class": "FileSourceConnector",
            "filename": str(source),
            "topic": "nums",
            **transforms("line:int32"),
            **TOLERANT,
        },
    )
    source.write_text("1\nx\n3\ny\n")
    result = runner.run("src", 0)
    assert (result.state, result.rows) == ("SUCCEEDED", 2), result.message
    assert result.counts == {"failed": 2, "skipped": 2, "dead_lettered": 2}
    assert [r["line"] for r in _rows(runtime, spark, "nums")] == [1, 3]
    dead = _rows(runtime, spark, "dlq")
    assert [r["line"] for r in dead] == ["x", "y"]  # as the cast received them: strings
    for row in dead:
        assert "offset" not in _assert_transformation_headers(row, "src", "nums")  # a source's have none yet
    assert not any(c.startswith("__connect") for c in dead[0])

    again = runner.run("src", 0)
    assert (again.state, again.rows, again.counts) == ("SUCCEEDED", 0, {})
    assert len(runtime.topics.all_segments(["dlq"])) == 1


@pytest.mark.parametrize("transforms", [_cast, _sql_then_cast], ids=["arrow", "sql-forces-spark"])
def test_a_tolerant_jdbc_source_dead_letters_the_rows_a_cast_cannot_convert(
    runner: TaskRunner,
    runtime: Runtime,
    spark: Any,
    postgres: Database,  # noqa: F811
    transforms: Any,
) -> None:
    # PostgreSQL's rows are read as Arrow (ArrowRecords, in the driver when few): the cast runs
    # there, unless a SQL step sends the batch through Spark
    postgres.execute(
        "CREATE TABLE items (id bigint PRIMARY KEY, qty text)",
        "INSERT INTO items VALUES (1, '10'), (2, 'abc'), (3, '30'), (4, '')",
    )
    runtime.create_connector(
        "src",
        postgres.source_config(
            **{
                "mode": "incrementing",
                "incrementing.column.name": "id",
                "table.whitelist": "items",
                "topic.prefix": "",
            },
            **transforms("qty:int32"),
            **TOLERANT,
        ),
    )
    result = runner.run("src", 0)
    assert (result.state, result.rows) == ("SUCCEEDED", 2), result.message
    assert result.counts == {"failed": 2, "skipped": 2, "dead_lettered": 2}
    assert [(r["id"], r["qty"]) for r in _rows(runtime, spark, "items")] == [(1, 10), (3, 30)]
    dead = _rows(runtime, spark, "dlq")
    assert [(r["id"], r["qty"]) for r in dead] == [(2, "abc"), (4, "")]
    for row in dead:
        _assert_transformation_headers(row, "src", "items")

    postgres.execute("INSERT INTO items VALUES (5, '50')")
    again = runner.run("src", 0)
    assert (again.state, again.rows, again.counts) == ("SUCCEEDED", 1, {})
    assert len(_rows(runtime, spark, "dlq")) == 2


def test_without_tolerance_a_source_fails_on_the_record_and_commits_nothing(
    runner: TaskRunner, runtime: Runtime, tmp_path: Path
) -> None:
    source = tmp_path / "in.txt"
    runtime.create_connector(
        "src",
        {"connector.class": "FileSourceConnector", "filename": str(source), "topic": "nums", **_cast("line:int32")},
    )
    source.write_text("1\nx\n")
    result = runner.run("src", 0)
    assert (result.state, result.error_kind) == ("FAILED", "data")
    assert f"transform `cast` ({CAST_CLASS}) could not convert a record" in result.message
    assert runtime.topics.all_segments(["nums"]) == []
    assert dict(runtime.connectors.positions("src")) == {}


# -- sinks --------------------------------------------------------------------------


def _lines_topic(runner: TaskRunner, runtime: Runtime, tmp_path: Path, lines: str) -> None:
    source = tmp_path / "in.txt"
    runtime.create_connector(
        "src", {"connector.class": "FileSourceConnector", "filename": str(source), "topic": "lines"}
    )
    source.write_text(lines)
    assert runner.run("src", 0).state == "SUCCEEDED"


@pytest.mark.parametrize("transforms", [_cast, _cast_then_sql], ids=["cast", "cast-then-sql"])
def test_a_tolerant_sink_writes_the_good_records_and_dead_letters_the_rest(
    runner: TaskRunner, runtime: Runtime, spark: Any, tmp_path: Path, transforms: Any
) -> None:
    _lines_topic(runner, runtime, tmp_path, "1\nx\n3\ny\n")
    out = tmp_path / "out.txt"
    runtime.create_connector(
        "sink",
        {
            "connector.class": "FileSinkConnector",
            "filename": str(out),
            "topics": "lines",
            **transforms("line:int32"),
            **TOLERANT,
        },
    )
    result = runner.run("sink", 0)
    assert (result.state, result.rows) == ("SUCCEEDED", 4), result.message
    assert result.counts == {"failed": 2, "skipped": 2, "dead_lettered": 2}
    assert [json.loads(line) for line in out.read_text().splitlines()] == [{"line": 1}, {"line": 3}]
    dead = _rows(runtime, spark, "dlq")
    assert [r["line"] for r in dead] == ["x", "y"]
    where = [(h["partition"], h["offset"]) for h in (_assert_transformation_headers(r, "sink", "lines") for r in dead)]
    assert where == [("0", "1"), ("0", "3")]
    # offsets past every record read, set aside or not: a rerun reads nothing again
    assert {tp.topic: c.offset for tp, c in runtime.connectors.sink_offsets("sink").items()} == {"lines": 4}
    again = runner.run("sink", 0)
    assert (again.state, again.rows, again.counts) == ("SUCCEEDED", 0, {})
    assert len(runtime.topics.all_segments(["dlq"])) == 1


def test_a_tolerant_jdbc_sink_copies_the_good_records_from_arrow(
    runner: TaskRunner,
    runtime: Runtime,
    spark: Any,
    tmp_path: Path,
    target: Database,  # noqa: F811
) -> None:
    # the JDBC sink copies the topic's Arrow records: the rows the cast set aside are gone from them
    _lines_topic(runner, runtime, tmp_path, "1\nx\n3\n")
    target.execute("CREATE TABLE lines (line int)")
    runtime.create_connector(
        "sink",
        {
            "connector.class": "JdbcSinkConnector",
            "connection.url": target.jdbc_url,
            "topics": "lines",
            "insert.mode": "insert",
            **_cast("line:int32"),
            **TOLERANT,
        },
    )
    result = runner.run("sink", 0)
    assert result.state == "SUCCEEDED", result.message
    assert result.counts == {"failed": 1, "skipped": 1, "dead_lettered": 1}
    assert target.rows("SELECT line FROM lines ORDER BY line") == [(1,), (3,)]
    (dead,) = _rows(runtime, spark, "dlq")
    assert dead["line"] == "x" and _assert_transformation_headers(dead, "sink", "lines")["offset"] == "1"
    assert {tp.topic: c.offset for tp, c in runtime.connectors.sink_offsets("sink").items()} == {"lines": 3}


def test_without_tolerance_a_sink_fails_at_the_records_offset_and_commits_nothing(
    runner: TaskRunner, runtime: Runtime, tmp_path: Path
) -> None:
    _lines_topic(runner, runtime, tmp_path, "1\nx\n")
    out = tmp_path / "out.txt"
    runtime.create_connector(
        "sink", {"connector.class": "FileSinkConnector", "filename": str(out), "topics": "lines", **_cast("line:int32")}
    )
    result = runner.run("sink", 0)
    assert (result.state, result.error_kind) == ("FAILED", "data")
    assert "could not convert a record (errors.tolerance=none) at offset 1" in result.message
    # only the file sink's baseline (its file's size before any write) was committed
    assert {tp.topic: c.offset for tp, c in runtime.connectors.sink_offsets("sink").items()} == {"lines": 0}
    assert runtime.topics.all_segments(["dlq"]) == []
    assert out.read_text() == ""
