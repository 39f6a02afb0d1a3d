"""Record keys: the JDBC source keys each record by the table's primary key (or `key.fields`), and
the JDBC sink upserts by it (`pk.mode=record_key`)."""

from __future__ import annotations

from typing import Any

from pyspark.sql import SparkSession

from connect_core.runtime.context import Runtime
from connect_core.runtime.execution.runner import TaskRunner
from connect_core.runtime.topics.segments import read_segments
from tests.connectors.jdbc_helpers import Database, mariadb, postgres, target  # noqa: F401  (fixtures)


def _keys(runtime: Runtime, topic: str) -> list[Any]:
    spark = SparkSession.getActiveSession()
    assert spark is not None
    df = read_segments(spark, runtime.topics.all_segments([topic]))
    return sorted((r["__key"].asDict() for r in df.select("__key").collect()), key=lambda k: tuple(k.values()))


def test_the_primary_key_is_the_record_key_and_the_sink_upserts_by_it(
    runtime: Runtime,
    runner: TaskRunner,
    mariadb: Database,  # noqa: F811
    target: Database,  # noqa: F811
) -> None:
    mariadb.execute(
        "CREATE TABLE accounts (region VARCHAR(8), num INT, owner VARCHAR(20), updated_at DATETIME(6) NOT NULL, "
        "PRIMARY KEY (region, num))",
        "INSERT INTO accounts VALUES ('eu', 1, 'ann', '2024-01-01 00:00:01'), ('us', 1, 'bob', '2024-01-01 00:00:02')",
    )
    runtime.create_connector(
        "src",
        mariadb.source_config(
            **{
                "mode": "timestamp",
                "timestamp.column.name": "updated_at",
                "table.whitelist": "accounts",
                "topic.prefix": "",
            }
        ),
    )
    runtime.create_connector(
        "sink",
        {
            "connector.class": "JdbcSinkConnector",
            "connection.url": target.jdbc_url,
            "topics": "accounts",
            "insert.mode": "upsert",
            "pk.mode": "record_key",
            "auto.create": True,
        },
    )
    assert runner.run("src", 0).state == "SUCCEEDED"
    assert _keys(runtime, "accounts") == [{"region": "eu", "num": 1}, {"region": "us", "num": 1}]
    assert runner.run("sink", 0).state == "SUCCEEDED"

    mariadb.execute("UPDATE accounts SET owner = 'ann2', updated_at = '2024-01-02' WHERE region = 'eu'")
    assert runner.run("src", 0).rows == 1
    assert runner.run("sink", 0).state == "SUCCEEDED"
    assert target.rows("SELECT region, num, owner FROM accounts ORDER BY region") == [
        ("eu", 1, "ann2"),
        ("us", 1, "bob"),
    ]
    key = target.rows(
        "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey) "
        "WHERE i.indrelid = 'accounts'::regclass AND i.indisprimary ORDER BY 1"
    )
    assert key == [("num",), ("region",)]


def test_key_fields_override_and_a_query_has_no_key(
    runtime: Runtime,
    runner: TaskRunner,
    postgres: Database,  # noqa: F811
) -> None:
    postgres.execute("CREATE TABLE t (id int PRIMARY KEY, code text)", "INSERT INTO t VALUES (1, 'a'), (2, 'b')")
    runtime.create_connector(
        "by-code",
        postgres.source_config(**{"mode": "bulk", "table.whitelist": "t", "topic.prefix": "k_", "key.fields": "code"}),
    )
    runtime.create_connector(
        "query", postgres.source_config(**{"mode": "bulk", "query": "SELECT id FROM t", "topic.prefix": "q"})
    )
    assert runner.run("by-code", 0).state == "SUCCEEDED"
    assert _keys(runtime, "k_t") == [{"code": "a"}, {"code": "b"}]
    assert runner.run("query", 0).state == "SUCCEEDED"
    spark = SparkSession.getActiveSession()
    assert spark is not None
    assert "__key" not in read_segments(spark, runtime.topics.all_segments(["q"])).columns
