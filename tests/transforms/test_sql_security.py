"""The SQL transform's allow-lists: against Spark's whole function registry, and where it runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from connect_core.sdk.errors import ConfigError
from connect_core.transforms._sqlcheck import RefusedQuery, check_query
from connect_core.transforms._sqlfunctions import ALLOWED_FUNCTIONS, REFUSED_FUNCTIONS
from connect_core.transforms._sqlplan import check_analysed_plan
from connect_core.transforms.sql import SqlTransform, SqlTransformConfig


def _stored(query: str) -> SqlTransform:
    """A transform whose query was stored without validation (before the check existed)."""
    return SqlTransform(SqlTransformConfig.model_construct(query=query))


def test_every_registry_function_is_classified(spark: Any) -> None:
    registry = {row[0] for row in spark.sql("SHOW SYSTEM FUNCTIONS").collect()}
    unclassified = registry - ALLOWED_FUNCTIONS - set(REFUSED_FUNCTIONS)
    assert not unclassified, f"classify these in connect_core/transforms/_sqlfunctions.py: {sorted(unclassified)}"
    assert not ALLOWED_FUNCTIONS & set(REFUSED_FUNCTIONS)
    assert registry >= ALLOWED_FUNCTIONS  # no stale names


def test_nothing_allowed_calls_java_reads_files_or_runs_a_udf(spark: Any) -> None:
    registry = spark._jvm.org.apache.spark.sql.catalyst.analysis.FunctionRegistry.builtin()
    classes = {}
    iterator = registry.listFunction().iterator()
    while iterator.hasNext():
        identifier = iterator.next()
        info = registry.lookupFunction(identifier)
        if identifier.funcName() in ALLOWED_FUNCTIONS and info.isDefined():
            classes[identifier.funcName()] = info.get().getClassName() or ""
    risky = ("Reflect", "Reflection", "InputFile", "XPath", "Udf", "UDF", "Protobuf", "Avro", "Xml", "Python")
    flagged = {name: cls for name, cls in classes.items() if any(word in cls.rsplit(".", 1)[-1] for word in risky)}
    assert flagged == {"to_xml": "org.apache.spark.sql.catalyst.expressions.StructsToXml"}  # writes XML, parses none
    for name in ("reflect", "java_method", "try_reflect", "input_file_name", "from_xml", "xpath", "range"):
        assert name not in ALLOWED_FUNCTIONS


def test_a_function_not_on_the_allow_list_is_refused() -> None:
    with pytest.raises(RefusedQuery, match=r"`made_up_fn` is not an allowed function"):
        check_query("SELECT made_up_fn(id) FROM __THIS__")
    with pytest.raises(RefusedQuery, match=r"`python_worker_logs` \(is a table-valued function"):
        check_query("SELECT * FROM __THIS__, python_worker_logs()")


@pytest.mark.parametrize(
    ("query", "refused"),
    [
        ("SELECT `reflect`('java.lang.System', 'getenv') AS e FROM __THIS__", "CallMethodViaReflection"),
        ("SELECT try_reflect('java.lang.System', 'getenv') AS e FROM __THIS__", "TryReflect"),
        ("SELECT input_file_name() AS f FROM __THIS__", "InputFileName"),
        ("SELECT * FROM range(3)", "Range"),
    ],
)
def test_the_analysed_plan_walk_refuses_what_the_parse_check_would(spark: Any, query: str, refused: str) -> None:
    df = spark.createDataFrame([(1,)], "id long")
    view = "_test_batch"
    df.createOrReplaceTempView(view)
    try:
        jspark = spark._jsparkSession
        parsed = jspark.sessionState().sqlParser().parsePlan(query.replace("__THIS__", view))
        skip = spark._jvm.org.apache.spark.sql.execution.CommandExecutionMode.SKIP()
        analysed = jspark.sessionState().executePlan(parsed, skip).analyzed()
        with pytest.raises(ConfigError, match=f"`{refused}` is not an allowed"):
            check_analysed_plan(spark, analysed, view)
    finally:
        spark.catalog.dropTempView(view)


def test_the_plan_walk_passes_a_query_of_many_parts(spark: Any) -> None:
    query = (
        "WITH w AS (SELECT id, name, arr FROM __THIS__ WHERE name IS NOT NULL) "
        "SELECT id, upper(name) AS u, transform(arr, x -> x + 1) AS t, ceil(id / 2) AS c, lpad(name, 5, '*') AS p, "
        "row_number() OVER (PARTITION BY name ORDER BY id) AS rn, (SELECT max(id) FROM __THIS__) AS top, "
        "from_json('{\"a\": 1}', 'a int').a AS j, get_json_object('{\"a\": 2}', '$.a') AS g, "
        "nvl(name, 'x') AS n, CASE WHEN id > 1 THEN 'big' ELSE 'small' END AS size "
        "FROM w WHERE id IN (SELECT id FROM __THIS__) "
        "UNION ALL SELECT id, name, arr, 0, name, 0, 0, 0, '', name, '' FROM __THIS__ LATERAL VIEW explode(arr) e AS v"
    )
    df = spark.createDataFrame([(1, "a", [1, 2]), (2, "b", [3])], "id long, name string, arr array<int>")
    out = SqlTransform(SqlTransformConfig(query=query)).spark_frame(df)
    assert out.count() == 5


def test_the_30_column_reflect_payload_is_refused_where_it_runs(spark: Any) -> None:
    literals = ", ".join(f"{i} AS c{i}" for i in range(30))
    query = f"SELECT {literals}, `reflect`('java.lang.System', 'getenv', 'CONNECT_DATABASE_URL') AS leak FROM __THIS__"
    with pytest.raises(ConfigError, match="calls Java methods"):
        _stored(query).spark_frame(spark.createDataFrame([(1,)], "id long"))


def test_a_stored_insert_never_touches_the_directory(spark: Any, tmp_path: Path) -> None:
    target = tmp_path / "target"
    target.mkdir()
    (target / "keep.txt").write_text("precious\n")
    query = f"WITH x AS (SELECT * FROM __THIS__) INSERT OVERWRITE DIRECTORY '{target}' USING text SELECT name FROM x"
    df = spark.createDataFrame([(1, "evil")], "id long, name string")
    with pytest.raises(ConfigError, match=r"cannot be parsed|is not a query"):
        _stored(query).spark_frame(df)
    assert sorted(p.name for p in target.iterdir()) == ["keep.txt"]
    assert (target / "keep.txt").read_text() == "precious\n"


def test_spark_runs_the_checked_tree_not_the_users_text(spark: Any, tmp_path: Path) -> None:
    """Where two parsers part ways (Spark's `--` comment runs on past a backslash at a line's end),
    a stored query is refused before Spark sees it, and a query that passes reaches Spark as the text
    generated from the tree that was checked."""
    marker = tmp_path / "pwned"
    smuggled = (
        "-- \\\nSELECT '\nSELECT TRANSFORM(name) USING \"touch "
        + str(marker)
        + "\" AS (out) FROM __THIS__ -- ' AS s FROM __THIS__ --"
    )
    df = spark.createDataFrame([(1, "a")], "id long, name string")
    with pytest.raises(ConfigError, match="backslash at the end of a line"):
        _stored(smuggled).spark_frame(df)
    assert not marker.exists()
    assert check_query("SELECT name, '--x' AS s FROM __THIS__") == "SELECT name, '--x' AS s FROM __THIS__"
    rows = _stored("SELECT upper(name) AS n, 'a\\'' AS q FROM __THIS__").spark_frame(df).collect()
    assert [tuple(r) for r in rows] == [("A", "a'")]


@pytest.mark.parametrize(
    "query",
    [
        "SELECT TRANSFORM(id) USING 'cat' FROM __THIS__",
        "SELECT TRANSFORM(id) USING 'touch /tmp/pwned' AS (x) FROM __THIS__",
        "SELECT /*+ REPARTITION(3) */ * FROM __THIS__",
        "SELECT /*+ A */ /*+ REPARTITION(reflect('java.lang.System', 'getenv')) */ * FROM __THIS__",
        "SELECT * FROM __THIS__; SET spark.sql.runSQLOnFiles=true",
        "EXPLAIN SELECT * FROM __THIS__",
        "ADD JAR '/tmp/x.jar'",
        "LOAD DATA LOCAL INPATH '/etc/passwd' INTO TABLE t",
        "CREATE TEMPORARY FUNCTION f AS 'java.lang.Runtime'",
        "SELECT transform(array(1), x -> reflect('java.lang.System', 'getenv')) FROM __THIS__",
        "SELECT * FROM __THIS__ LATERAL VIEW explode(array(java_method('java.lang.System', 'getenv'))) t AS v",
        "SELECT * FROM (SELECT * FROM (SELECT `try_reflect`('a', 'b') FROM __THIS__))",
        "SELECT x.upper(name) FROM __THIS__",
        "SELECT * FROM __THIS__ JOIN default.secrets",
        "WITH t AS (SELECT * FROM t) SELECT * FROM t, __THIS__",
        "SELECT * FROM (WITH s AS (SELECT 1) SELECT * FROM s), s, __THIS__",
        "SELECT :p FROM __THIS__",
        "SELECT ${spark.sql.warehouse.dir} FROM __THIS__",
        "SELECT \u0455elect FROM __THIS__",  # a Cyrillic s
        "SELECT * FROM read_files('/etc') JOIN __THIS__",
        "SELECT * FROM __THIS__ UNION SELECT * FROM json.`/etc`",
        "SELECT * FROM VALUES (1) AS v(a)",
    ],
)
def test_hostile_queries_are_refused(query: str) -> None:
    with pytest.raises(RefusedQuery):
        check_query(query)


@pytest.mark.parametrize(
    "query",
    [
        "SELECT * FROM __THIS__ TABLESAMPLE (50 PERCENT)",
        "SELECT stack(2, id, id) AS (a) FROM __THIS__",
        "SELECT from_json(name, 'a int, b map<string, string>') AS j FROM __THIS__",
        "SELECT sum(id) OVER (ORDER BY id ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) AS s FROM __THIS__",
        "SELECT * FROM VALUES (1, 'x') AS v(a, b) JOIN __THIS__ ON v.a = __THIS__.id",
        "SELECT e.* FROM __THIS__, LATERAL (SELECT __THIS__.id + 1 AS j) e",
    ],
)
def test_harmless_variants_pass_and_run(spark: Any, query: str) -> None:
    df = spark.createDataFrame([(1, '{"a": 1}'), (2, None)], "id long, name string")
    out = SqlTransform(SqlTransformConfig(query=query)).spark_frame(df)
    out.collect()
