"""A SQL transform that is not a pure query over the batch is refused at create, over HTTP, naming the part."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.rest.conftest import Served

_THIRTY = ", ".join(f"{i} AS c{i}" for i in range(30))


@pytest.mark.parametrize(
    ("query", "named"),
    [
        (
            f"SELECT {_THIRTY}, `reflect`('java.lang.System', 'getenv', 'CONNECT_DATABASE_URL') AS line FROM __THIS__",
            "`reflect` (calls Java methods) is not an allowed function",
        ),
        (
            "WITH x AS (SELECT * FROM __THIS__) INSERT OVERWRITE DIRECTORY '/tmp/x' USING text SELECT * FROM x",
            "cannot be parsed",
        ),
        ("INSERT OVERWRITE DIRECTORY '/tmp/x' USING text SELECT * FROM __THIS__", "cannot be parsed"),
        ("FROM __THIS__ INSERT OVERWRITE DIRECTORY '/tmp/x' SELECT *", "is not a query"),
        ("SELECT * FROM __THIS__; DROP TABLE t", "must be one query, not 2 statements"),
        ("SELECT * FROM __THIS__ JOIN parquet.`/etc/data`", "files and tables are not readable"),
        ("SELECT made_up(line) FROM __THIS__", "`made_up` is not an allowed function"),
        ("SELECT `java_method`('java.lang.System', 'getenv') FROM __THIS__", "`java_method` (calls Java methods)"),
        ("SELECT /*+ REPARTITION(1) */ * FROM __THIS__", "hints"),
        ("SELECT * FROM __THIS__ -- \nJOIN csv.`/etc/passwd`", "comments"),
        ("SELECT * FROM __THIS__ JOIN csv.`/etc/passwd`", "files and tables are not readable"),
        ("SELECT * /* */ FROM IDENTIFIER('__THIS__')", "comments"),
        ("SELECT * FROM IDENTIFIER('__THIS__')", "IDENTIFIER"),
        # Spark's `--` comment runs on past a backslash at the line's end, sqlglot's does not: the
        # review's payload, a string to one parser and a script transform to the other
        (
            "-- \\\nSELECT '\nSELECT TRANSFORM(name) USING \"sh -c id\" AS (out) FROM __THIS__ -- ' AS s FROM __THIS__ --",
            "backslash at the end of a line",
        ),
        ("SELECT 'a\\\n' AS s FROM __THIS__", "backslash at the end of a line"),
        # Spark fills `${env:X}` into the text before parsing: written out again, `\u0024{` is `${`
        ("SELECT *, '\\u0024{env:SECRET_X}' AS leak FROM __THIS__", "`${`"),
        ("SELECT '${x'.`}` AS a, ' AS a, t.* FROM (SELECT 1) t --' AS c FROM __THIS__", "`${`"),
        # names sqlglot writes out unquoted (a LATERAL VIEW alias, an EXTRACT unit): the text it
        # generates must read back as the checked query
        (
            "SELECT 1 FROM __THIS__ LATERAL VIEW explode(array(1)) `t--\nAS c UNION ALL SELECT "
            "reflect('java.lang.System', 'getenv', 'PATH') FROM __THIS__ LATERAL VIEW EXPLODE(array(1)) u` AS c",
            "reads differently once written out",
        ),
        ("SELECT extract(`DAY--` FROM current_date()) FROM __THIS__", "reads differently once written out"),
        (
            "SELECT 1 FROM __THIS__ LATERAL VIEW explode(array(1)) `t\nUNION ALL SELECT 2 FROM __THIS__ "
            "LATERAL VIEW explode(array(1)) u` AS c",
            "does not read back",
        ),
        ("SELECT \uff52eflect('a', 'b') FROM __THIS__", "outside ASCII"),  # a fullwidth r
        ("SELECT TRANSFORM(line) USING 'id' FROM __THIS__", "script transform"),
    ],
)
def test_a_refused_query_is_a_400_naming_the_part(api: Served, tmp_path: Path, query: str, named: str) -> None:
    config = {
        "connector.class": "FileSourceConnector",
        "file": str(tmp_path / "in.txt"),
        "topic": "t",
        "transforms": "q",
        "transforms.q.type": "SqlTransform",
        "transforms.q.query": query,
    }
    answer = httpx.post(f"{api.url}/connectors", json={"name": "src", "config": config})
    assert answer.status_code == 400, answer.text
    message = answer.json()["message"]
    assert "transforms.q.query" in message
    assert named in message
    assert httpx.get(f"{api.url}/connectors").json() == []


def test_a_pure_query_is_accepted(api: Served, tmp_path: Path) -> None:
    config = {
        "connector.class": "FileSourceConnector",
        "file": str(tmp_path / "in.txt"),
        "topic": "t",
        "transforms": "q",
        "transforms.q.type": "SqlTransform",
        "transforms.q.query": "SELECT *, upper(line) AS shout FROM __THIS__ WHERE line <> ''",
    }
    answer = httpx.post(f"{api.url}/connectors", json={"name": "src", "config": config})
    assert answer.status_code in (200, 201), answer.text
