"""A table name reaches a dialect's metadata SQL (`columns_query`, `primary_key_query`) only as
`parse_identifier` passes it: the dialect checks the name itself, whoever built it, so a hostile
one is refused before any SQL reaches the server, and the server's tables stay as they were."""

from __future__ import annotations

import pytest

from connect_core.connectors.jdbc.dialects import dialect_for, parse_identifier
from connect_core.sdk.errors import ConfigError
from tests.connectors.jdbc_helpers import Database, mariadb, postgres  # noqa: F401  (fixtures)

HOSTILE = [
    "x`; DROP TABLE y; --",
    "x'; DROP TABLE y; --",
    'x"; DROP TABLE y; --',
    "y' OR '1'='1",  # unchecked, it read every table's key columns of the server
    "y\\",
    "y\n",
    "y.z",
    "",
]

_TABLES = {
    "mariadb": "SHOW TABLES",
    "postgresql": "SELECT tablename FROM pg_tables WHERE schemaname = 'public'",
}


@pytest.fixture(params=["mariadb", "postgres"])
def database(request: pytest.FixtureRequest) -> Database:
    return request.getfixturevalue(request.param)


def _schema(database: Database) -> str:
    return database.name if database.kind == "mariadb" else "public"


@pytest.mark.parametrize("query", ["primary_key_query", "columns_query"])
def test_a_hostile_table_name_is_refused_before_any_sql(database: Database, query: str) -> None:
    database.execute("CREATE TABLE y (id INT PRIMARY KEY, v TEXT)", "INSERT INTO y VALUES (1, 'a')")
    dialect = dialect_for(database.jdbc_url)
    for name in HOSTILE:
        for table in [(name,), (_schema(database), name), (name, "y"), ("a", "b", "y"), ()]:
            with pytest.raises(ConfigError, match="not a plain SQL name"):
                getattr(dialect, query)(table)
    assert database.rows(_TABLES[database.kind]) == [("y",)]
    assert database.rows("SELECT * FROM y") == [(1, "a")]


def test_a_plain_table_name_still_reads_its_key_and_columns(database: Database) -> None:
    database.execute("CREATE TABLE y (a INT, b VARCHAR(8), v TEXT, PRIMARY KEY (b, a))")
    dialect = dialect_for(database.jdbc_url)
    for table in [("y",), (_schema(database), "y"), parse_identifier(f" {_schema(database)}.y ", "table")]:
        assert dialect.rows(dialect.primary_key_query(table)) == [{"name": "b"}, {"name": "a"}]
        assert [r["name"] for r in dialect.rows(dialect.columns_query(table)) or []] == ["a", "b", "v"]


def test_a_line_break_inside_a_qualified_name_is_no_plain_name() -> None:
    with pytest.raises(ConfigError, match="not a plain SQL name"):
        parse_identifier("y\n.z", "table")
