"""Poison rows through the JDBC sink into a real PostgreSQL and a real MariaDB: `errors.tolerance=none` fails the run
and commits nothing; `all` lands every good row and puts exactly the bad ones in the dead-letter
topic, with Kafka's error-context headers, where any sink can read them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx

from connect_core.rest.app import create_app
from connect_core.rest.auth import bearer_or_loopback
from connect_core.runtime.context import Runtime
from connect_core.runtime.execution.runner import TaskRunner
from tests.connectors.jdbc_helpers import Database, mariadb, mariadb_target, sink_target, target  # noqa: F401  (fixtures)
from tests.rest.conftest import serve

#: id 3: NULL into NOT NULL; 4: too long for varchar(5); 5: no integer; 8: a key already in the target.
SOURCE_ROWS = (
    "(1, 'ok', '10'), (2, 'fine', '20'), (3, NULL, '30'), (4, 'toolongname', '40'), (5, 'cast', 'abc'), "
    "(6, 'good', '60'), (7, 'also', NULL), (8, 'dup', '80')"
)
BAD_IDS = {3, 4, 5, 8}


def _setup(runtime: Runtime, mariadb: Database, target: Database, **errors: Any) -> None:  # noqa: F811
    mariadb.execute(
        "CREATE TABLE items (id BIGINT PRIMARY KEY, name VARCHAR(50), qty VARCHAR(20))",
        f"INSERT INTO items VALUES {SOURCE_ROWS}",
    )
    target.execute(
        "CREATE TABLE items (id bigint PRIMARY KEY, name varchar(5) NOT NULL, qty int)",
        "INSERT INTO items VALUES (8, 'old', 0)",
    )
    runtime.create_connector(
        "src",
        mariadb.source_config(
            **{"mode": "incrementing", "incrementing.column.name": "id", "table.whitelist": "items", "topic.prefix": ""}
        ),
    )
    runtime.create_connector(
        "sink",
        {
            "connector.class": "JdbcSinkConnector",
            "connection.url": target.jdbc_url,
            "topics": "items",
            "insert.mode": "insert",
            **errors,
        },
    )


def test_tolerance_none_fails_with_the_cause_and_commits_nothing(
    runtime: Runtime,
    runner: TaskRunner,
    mariadb: Database,  # noqa: F811
    sink_target: Database,  # noqa: F811
) -> None:
    _setup(runtime, mariadb, sink_target)
    assert runner.run("src", 0).state == "SUCCEEDED"
    result = runner.run("sink", 0)
    assert (result.state, result.error_kind) == ("FAILED", "data")  # no Airflow retry: it would fail the same
    assert "a record of topic `items` could not be written" in result.message
    causes = ("value too long", "invalid input syntax", "null value", "Data too long", "cannot be null", "Incorrect")
    assert any(cause in result.message for cause in causes), result.message
    assert sink_target.rows("SELECT id FROM items ORDER BY id") == [(8,)]
    assert runtime.connectors.sink_offsets("sink") == {}


def test_tolerance_all_lands_the_good_rows_and_dead_letters_exactly_the_bad(
    runtime: Runtime,
    runner: TaskRunner,
    mariadb: Database,  # noqa: F811
    sink_target: Database,  # noqa: F811
    tmp_path: Path,
) -> None:
    _setup(
        runtime,
        mariadb,
        sink_target,
        **{
            "errors.tolerance": "all",
            "errors.deadletterqueue.topic.name": "items-dlq",
            "errors.deadletterqueue.context.headers.enable": "true",
            "errors.log.enable": "true",
        },
    )
    assert runner.run("src", 0).state == "SUCCEEDED"
    result = runner.run("sink", 0)
    assert result.state == "SUCCEEDED", result.message
    assert result.counts == {"failed": 4, "skipped": 4, "dead_lettered": 4}
    assert sink_target.rows("SELECT id, name, qty FROM items ORDER BY id") == [
        (1, "ok", 10),
        (2, "fine", 20),
        (6, "good", 60),
        (7, "also", None),
        (8, "old", 0),
    ]
    offsets = runtime.connectors.sink_offsets("sink")
    assert {tp.topic: c.offset for tp, c in offsets.items()} == {"items": 8}
    # the task's totals, in its status over real HTTP (Kafka's task-error-metrics)
    served = serve(create_app(lambda: runtime, auth=[bearer_or_loopback(None)]))
    api = next(served)
    status = httpx.get(f"{api.url}/connectors/sink/status").json()
    next(served, None)
    assert status["tasks"][0]["errors"] == {"dead_lettered": 4, "failed": 4, "skipped": 4}

    # the dead-letter topic is a topic like any other: a file sink reads it
    out = tmp_path / "dlq.jsonl"
    runtime.create_connector(
        "dlq-reader", {"connector.class": "FileSinkConnector", "filename": str(out), "topics": "items-dlq"}
    )
    assert runner.run("dlq-reader", 0).rows == 4
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert {int(r["id"]) for r in records} == BAD_IDS
    assert {r.get("name") for r in records} == {None, "toolongname", "cast", "dup"}  # to_json drops nulls

    # with Kafka's context headers: where each came from and why
    headers = _dead_letter_headers(runtime)
    by_id = {h["id"]: h for h in headers}
    message = {i: h["__connect.errors.exception.message"] for i, h in by_id.items()}
    if sink_target.kind == "postgresql":
        assert by_id[3]["__connect.errors.exception.class.name"] == "psycopg2.errors.NotNullViolation"
        assert "value too long" in message[4]
        assert "invalid input syntax for type integer" in message[5]
        assert "duplicate key" in message[8]
    else:
        assert by_id[3]["__connect.errors.exception.class.name"] == "pymysql.err.IntegrityError"
        assert message[3] == "Column 'name' cannot be null"
        assert message[4] == "Data too long for column 'name'"
        assert "Incorrect integer value: 'abc' for column" in message[5]
        assert message[8] == "Duplicate entry for key 'PRIMARY'"
    for h in headers:
        assert h["__connect.errors.topic"] == "items"
        assert h["__connect.errors.connector.name"] == "sink"
        assert h["__connect.errors.stage"] == "TASK_PUT"

    # nothing is written or dead-lettered twice
    again = runner.run("sink", 0)
    assert (again.state, again.rows, again.counts) == ("SUCCEEDED", 0, {})


def _dead_letter_headers(runtime: Runtime) -> list[dict[str, Any]]:
    from pyspark.sql import SparkSession

    from connect_core.runtime.topics.segments import read_segments

    spark = SparkSession.getActiveSession()
    assert spark is not None
    segments = runtime.topics.all_segments(["items-dlq"])
    rows = read_segments(spark, segments).select("id", "__headers").collect()
    found = []
    for row in rows:
        headers = {h["key"]: h["value"] for h in row["__headers"]}
        found.append({"id": int(row["id"]), **headers})
    return found


def test_upsert_into_an_empty_table_copies_straight_in_and_sets_the_bad_rows_aside(
    runtime: Runtime,
    runner: TaskRunner,
    mariadb: Database,  # noqa: F811
    sink_target: Database,  # noqa: F811
) -> None:
    _setup(
        runtime,
        mariadb,
        sink_target,
        **{"insert.mode": "upsert", "pk.mode": "record_value", "pk.fields": "id", "errors.tolerance": "all"},
    )
    sink_target.execute("DELETE FROM items")  # empty: the COPY goes straight into the table
    assert runner.run("src", 0).state == "SUCCEEDED"
    result = runner.run("sink", 0)
    assert (result.state, result.counts) == ("SUCCEEDED", {"failed": 3, "skipped": 3}), result.message
    assert [r[0] for r in sink_target.rows("SELECT id FROM items ORDER BY id")] == [1, 2, 6, 7, 8]
    assert runner.run("sink", 0).rows == 0
