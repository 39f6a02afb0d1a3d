"""PostgreSQL: `jdbc:postgresql://`, psycopg2 for small queries, `COPY … TO STDOUT` for rows.

Column types on the way into PostgreSQL (`column_type`): the source's own type when it travelled
with the topic (field metadata `connect.sql.type`), else the Spark type's natural PostgreSQL type.

| source (MariaDB / PostgreSQL)            | Spark / topic          | PostgreSQL target        |
|------------------------------------------|------------------------|--------------------------|
| TINYINT, SMALLINT / smallint             | byte, short            | smallint                 |
| MEDIUMINT, INT / integer                 | int                    | integer                  |
| BIGINT, INT UNSIGNED / bigint            | long                   | bigint                   |
| BIGINT UNSIGNED                          | decimal(20,0)          | numeric(20,0)            |
| DECIMAL(p,s) / numeric(p,s)              | decimal(p,s)           | numeric(p,s)             |
| FLOAT / real                             | float                  | real                     |
| DOUBLE / double precision                | double                 | double precision         |
| CHAR, VARCHAR, TEXT / text, varchar      | string                 | text                     |
| JSON (MariaDB: LONGTEXT) / json, jsonb   | string                 | text / json, jsonb       |
| BOOLEAN, TINYINT(1) / boolean            | boolean                | boolean                  |
| DATE / date                              | date                   | date                     |
| DATETIME(6) / timestamp                  | timestamp_ntz          | timestamp(6)             |
| TIMESTAMP / timestamptz                  | timestamp (UTC)        | timestamptz(6)           |
| TIME(6) / time                           | string (exact text)    | time(6)                  |
| BLOB, VARBINARY / bytea                  | binary                 | bytea                    |
| PostgreSQL uuid, interval, inet, …       | string (exact text)    | the same type            |
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from connect_core.connectors.jdbc.dialects import BulkRead, JdbcDialect, checked_identifier, register
from connect_core.sdk.errors import ConfigError

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

__all__ = ["PostgresDialect"]

#: Harmless URL parameters, lower-case (pgjdbc reads keys case-insensitively or not at all: compared
#: lower-case, a key in another case is no way around this list).
_PARAMETERS = frozenset(
    s.lower()
    for s in (
        "user",
        "password",
        "ssl",
        "sslmode",
        "gssEncMode",
        "channelBinding",
        "ApplicationName",
        "currentSchema",
        "connectTimeout",
        "socketTimeout",
        "loginTimeout",
        "cancelSignalTimeout",
        "tcpKeepAlive",
        "tcpNoDelay",
        "readOnly",
        "readOnlyMode",
        "stringtype",
        "prepareThreshold",
        "preparedStatementCacheQueries",
        "preparedStatementCacheSizeMiB",
        "preferQueryMode",
        "reWriteBatchedInserts",
        "defaultRowFetchSize",
        "binaryTransfer",
        "targetServerType",
        "assumeMinServerVersion",
        "unknownLength",
        "logUnclosedConnections",
        "disableColumnSanitiser",
        "escapeSyntaxCallMode",
        "quoteReturningIdentifiers",
    )
)

# Source types kept as they are when the target is PostgreSQL (from a PostgreSQL source, or TIME).
_KEEP = {
    "json": "json",
    "jsonb": "jsonb",
    "uuid": "uuid",
    "interval": "interval",
    "inet": "inet",
    "cidr": "cidr",
    "macaddr": "macaddr",
    "xml": "xml",
    "money": "money",
    "time": "time(6)",
    "time without time zone": "time(6)",
    "time with time zone": "timetz(6)",
}

_BY_SPARK = {
    "byte": "smallint",
    "short": "smallint",
    "integer": "integer",
    "long": "bigint",
    "float": "real",
    "double": "double precision",
    "string": "text",
    "boolean": "boolean",
    "date": "date",
    "timestamp_ntz": "timestamp(6)",
    "timestamp": "timestamptz(6)",
    "binary": "bytea",
}


@register
class PostgresDialect(JdbcDialect):
    name = "postgresql"
    schemes = ("postgresql",)
    url_form = "jdbc:postgresql://host[:port]/db"
    url_parameters = _PARAMETERS
    driver = "org.postgresql.Driver"
    default_jars = ("/usr/share/java/postgresql.jar",)
    default_port = 5432
    quote_char = '"'
    lineage_scheme = "postgres"
    bulk_reader = "COPY"
    describes_queries = True

    def libpq_dsn(self) -> dict[str, str]:
        """psycopg2's connection arguments."""
        parts, user, password = self.server()
        args = {"host": parts.hostname or "127.0.0.1", "port": str(parts.port or 5432)}
        args["dbname"] = parts.path.strip("/") or "postgres"
        if user:
            args["user"] = user
        if password:
            args["password"] = password
        return args

    def connect(self) -> Any:
        """A psycopg2 connection in the session COPY's text needs; clear errors."""
        from connect_core.connectors.jdbc import _pgcopy

        return _pgcopy.connect(self.libpq_dsn(), self.host)

    def rows(self, sql: str) -> list[Any] | None:
        import psycopg2.extras

        conn = self.connect()
        try:
            with conn.cursor(cursor_factory=psycopg2.extras.RealDictCursor) as cur:
                cur.execute(sql)
                return list(cur.fetchall())
        finally:
            conn.close()

    def describe(self, sql: str) -> StructType | None:
        from connect_core.connectors.jdbc import _pgcopy

        conn = self.connect()
        try:
            with conn.cursor() as cur:
                cur.execute(f"SELECT * FROM ({sql}) connect_q LIMIT 0")
                return _pgcopy.spark_schema(cur.description)
        finally:
            conn.close()

    def bulk_read(
        self,
        sql: str,
        predicates: list[str] | None,
        column_types: list[str],
        schema: Callable[[str], StructType | None],
    ) -> BulkRead | None:
        """`COPY … TO STDOUT` in CSV, parsed by pyarrow in each Spark partition (`_pgcopy`)."""
        from connect_core.connectors.jdbc import _pgcopy

        found = schema(sql)
        if found is None:
            return None
        statements = [
            f"COPY (SELECT * FROM ({sql}) connect_q WHERE {p}) TO STDOUT WITH (FORMAT csv)"
            for p in predicates or ["TRUE"]
        ]
        return BulkRead(found, statements, functools.partial(_pgcopy.copy_reader, self.libpq_dsn(), self.host))

    def columns_query(self, table: tuple[str, ...]) -> str:
        table = checked_identifier(table)  # into string literals below: plain names only
        schema = f"'{table[0]}'" if len(table) == 2 else "current_schema()"
        # Explicit casts: drivers describe information_schema columns in odd ways.
        return (
            "SELECT CAST(column_name AS TEXT) AS name, CAST(data_type AS TEXT) AS sql_type, "
            "CAST(numeric_precision AS INTEGER) AS p, CAST(numeric_scale AS INTEGER) AS s "
            f"FROM information_schema.columns WHERE table_schema = {schema} AND table_name = '{table[-1]}' "
            "ORDER BY ordinal_position"
        )

    def primary_key_query(self, table: tuple[str, ...]) -> str:
        qualified = ".".join(f'"{part}"' for part in checked_identifier(table))
        return (
            "SELECT CAST(a.attname AS TEXT) AS name FROM pg_index i "
            "JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey) "
            f"WHERE i.indrelid = to_regclass('{qualified}') AND i.indisprimary "
            "ORDER BY array_position(i.indkey, a.attnum)"
        )

    def text_cast(self, quoted: str) -> str:
        return f"CAST({quoted} AS TEXT)"

    def timestamp_text(self, quoted: str) -> str:
        return f"to_char({quoted}, 'YYYY-MM-DD HH24:MI:SS.US')"

    def now_minus(self, millis: int, column_type: str) -> str:
        # A timestamptz compares with CURRENT_TIMESTAMP, a timestamp with LOCALTIMESTAMP.
        now = "CURRENT_TIMESTAMP" if column_type == "timestamp with time zone" else "LOCALTIMESTAMP"
        return f"({now} - INTERVAL '{int(millis)} milliseconds')"

    def column_type(self, field: Any, *, key: bool = False) -> str:
        source = str(field.metadata.get("connect.sql.type", "")).lower()
        if source in _KEEP:
            return _KEEP[source]
        spark = field.dataType.typeName()
        if spark == "decimal":
            return f"numeric({field.dataType.precision},{field.dataType.scale})"
        if spark in _BY_SPARK:
            return _BY_SPARK[spark]
        raise ConfigError(
            f"column `{field.name}` has type {field.dataType.simpleString()}, which the JDBC sink cannot map "
            "to a PostgreSQL column"
        )

    def qualified_table(self, names: tuple[str, ...]) -> str:
        """`schema.table`, schema `public` when the table has none (as `lineage_name`)."""
        return ".".join(("public", *names) if len(names) == 1 else names)

    @classmethod
    def lineage_name(cls, database: str, names: tuple[str, ...]) -> str:
        """`db.schema.table`, schema `public` when the table has none."""
        return ".".join((database, *(("public", *names) if len(names) == 1 else names)))
