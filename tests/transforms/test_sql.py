"""The SQL transform runs on Spark only (a query over the whole batch)."""

from __future__ import annotations

import datetime as dt

import pytest
from pydantic import ValidationError

from connect_core.transforms.sql import SqlTransform, SqlTransformConfig
from tests.transforms.conftest import chain, make

SCHEMA = "id long, name string, __key struct<id:long>, __timestamp timestamp"
ROWS = [
    (1, "ann", {"id": 1}, dt.datetime(2024, 1, 1, tzinfo=dt.UTC)),
    (2, "bob", {"id": 2}, dt.datetime(2024, 1, 2, tzinfo=dt.UTC)),
    (3, None, None, None),
]


def test_a_query_that_selects_star_keeps_the_record_parts(spark) -> None:  # type: ignore[no-untyped-def]
    t = make(SqlTransform, query="SELECT *, upper(name) AS shout FROM __THIS__ WHERE id > 1")
    steps = chain(t)
    assert not steps.arrow_capable
    out = sorted(steps.spark(spark.createDataFrame(ROWS, SCHEMA), "people").collect(), key=lambda r: r["id"])
    assert [(r["id"], r["shout"], r["__key"] and r["__key"].asDict(), r["__topic"]) for r in out] == [
        (2, "BOB", {"id": 2}, "people"),
        (3, None, None, "people"),
    ]
    assert out[0]["__timestamp"] == dt.datetime(2024, 1, 2)


def test_a_projection_keeps_only_what_it_selects(spark) -> None:  # type: ignore[no-untyped-def]
    t = make(SqlTransform, query="select id * 10 AS id, '{\"n\": 1}' AS braces FROM __THIS__ ORDER BY id DESC")
    df = chain(t).spark(spark.createDataFrame(ROWS, SCHEMA), "people")
    assert "__topic" not in df.columns  # the connector's topic is used
    assert "__key" not in df.columns  # a key of no type is no key
    rows = df.collect()
    assert [(r["id"], r["braces"], r["__headers"], r["__timestamp"]) for r in rows] == [
        (30, '{"n": 1}', None, None),
        (20, '{"n": 1}', None, None),
        (10, '{"n": 1}', None, None),
    ]


def test_queries_may_aggregate_and_use_the_batch_twice(spark) -> None:  # type: ignore[no-untyped-def]
    query = (
        "WITH named AS (SELECT * FROM __THIS__ WHERE name IS NOT NULL) "
        "SELECT count(*) AS n, (SELECT max(id) FROM __THIS__) AS top, __topic FROM named GROUP BY __topic"
    )
    out = chain(make(SqlTransform, query=query)).spark(spark.createDataFrame(ROWS, SCHEMA), "people").collect()
    assert [(r["n"], r["top"], r["__topic"]) for r in out] == [(2, 3, "people")]


def test_division_and_quoted_names_are_fine() -> None:
    assert make(SqlTransform, query="SELECT `a` / `b` AS `a per b` FROM __THIS__")


def test_only_the_spark_frame_is_implemented(spark) -> None:  # type: ignore[no-untyped-def]
    t = make(SqlTransform, query="SELECT * FROM __THIS__")
    assert SqlTransform.whole_batch
    with pytest.raises(NotImplementedError):
        t.spark(spark.createDataFrame(ROWS, SCHEMA))
    with pytest.raises(NotImplementedError):
        t.arrow(None)


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("SELECT * FROM events", "`__THIS__`"),
        ("SELECT * FROM __this__", "`__THIS__`"),
        ("SELECT * FROM x__THIS__", "`__THIS__`"),
        ("DROP TABLE __THIS__", "is not a query"),
        ("SELECT reflect('java.lang.System', 'exit', '0') FROM __THIS__", "calls Java methods"),
        ("SELECT * FROM __THIS__ JOIN csv.`/etc/passwd`", "files and tables are not readable"),
        ("SELECT * FROM __THIS__ JOIN `../x/y`", "neither `__THIS__` nor a CTE"),
        ("SELECT * FROM __THIS__ JOIN parquet.`data.parquet`", "files and tables are not readable"),
        ("SELECT * FROM IDENTIFIER('__THIS__')", "IDENTIFIER"),
        ("SELECT `reflect`('java.lang.System', 'getProperty', 'user.home') FROM __THIS__", "calls Java methods"),
    ],
)
def test_the_query_is_checked(query: str, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        make(SqlTransform, query=query)


def test_a_stored_query_is_checked_again_before_it_runs(spark) -> None:  # type: ignore[no-untyped-def]
    from connect_core.sdk.errors import ConfigError

    # a config stored before the check existed: built without validation
    stored = SqlTransform(
        SqlTransformConfig.model_construct(query="SELECT `reflect`('java.lang.System', 'getenv') AS e FROM __THIS__")
    )
    with pytest.raises(ConfigError, match="calls Java methods"):
        stored.spark_frame(spark.createDataFrame([(1,)], "id long"))


def test_sql_on_files_is_off_in_every_runner(spark, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from connect_core.runtime.spark.install import BASE_SPARK_CONF

    assert BASE_SPARK_CONF["spark.sql.runSQLOnFiles"] == "false"  # the test session has it too
    spark.range(3).write.parquet(str(tmp_path / "f"))
    with pytest.raises(Exception, match=r"(?i)table or view|not found|cannot be found"):
        spark.sql(f"SELECT * FROM parquet.`{tmp_path}/f`").collect()
