"""Reading a database: small metadata queries, column types, clear errors, and the rows.

Rows are made as Arrow in every Spark partition — from PostgreSQL by `COPY … TO STDOUT`
(`_pgcopy`), from MariaDB/MySQL by connectorx (`_mariadb`) — or, for column types those
paths do not read, go through Spark's JDBC data source. PostgreSQL's small queries go
through psycopg2 in the driver instead of Spark jobs.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from connect_core.connectors.jdbc.config import JdbcConnectionConfig
from connect_core.connectors.jdbc.dialect import Dialect, dialect_for
from connect_core.sdk import ArrowRecords
from connect_core.sdk.errors import ConfigError, ConnectError, FatalError, RetriableError

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

__all__ = ["Column", "Jdbc", "jdbc_errors"]

#: Connector/J properties (MariaDB's and MySQL's names) Spark's JDBC reader always sets: no local
#: files for the server, no Java objects from it. The URL cannot set them (`_url` refuses them).
_SAFE_MYSQL_PROPERTIES = {
    "allowLocalInfile": "false",
    "allowLoadLocalInfile": "false",
    "allowUrlInLocalInfile": "false",
    "autoDeserialize": "false",
}

_AUTH = ("password authentication failed", "access denied", "authentication failed", "no password")
_UNREACHABLE = (
    "connection refused",
    "could not connect",
    "unknownhostexception",
    "connect timed out",
    "no route to host",
    "communications link failure",
    "socket fail to connect",
    "could not open connection",
    "can't connect",
    "name or service not known",
)


@contextmanager
def jdbc_errors(dialect: Dialect, what: str) -> Iterator[None]:
    """JDBC failures as errors that name the host and what we were doing, never the password."""
    try:
        yield
    except ConnectError:
        raise
    except Exception as exc:
        text = _with_causes(exc)
        lower = text.lower()
        if any(s in lower for s in _AUTH):
            raise FatalError(f"{dialect.host} refused the login ({what}): wrong user or password") from None
        if any(s in lower for s in _UNREACHABLE):
            raise RetriableError(f"cannot reach the database at {dialect.host} ({what})") from None
        if "no suitable driver" in lower or "classnotfoundexception" in lower:
            raise FatalError(
                f"no JDBC driver for `{dialect.name}` on the classpath ({what}): install "
                "libpostgresql-jdbc-java / libmariadb-java or set `connection.jar`"
            ) from None
        first = next((line for line in text.splitlines() if "Exception" in line or "ERROR" in line), text[:300])
        raise FatalError(f"{dialect.host}: {what} failed: {first.strip()[:500]}") from None


def _with_causes(exc: BaseException) -> str:
    """The message and its Java causes (Spark wraps a driver's "access denied" in FAILED_JDBC.CONNECTION)."""
    parts = [str(exc)]
    origin = getattr(exc, "_origin", None)
    try:
        for _ in range(10):
            if origin is None:
                break
            parts.append(str(origin.toString()))
            origin = origin.getCause()
    except Exception:  # py4j gone: the Python message is all there is
        pass
    return "\n".join(parts)


class Column:
    """A source column: its name, the database's type name, precision/scale."""

    def __init__(self, name: str, sql_type: str, precision: int | None = None, scale: int | None = None) -> None:
        self.name, self.sql_type, self.precision, self.scale = name, sql_type.lower(), precision, scale

    def metadata(self) -> dict[str, Any]:
        meta: dict[str, Any] = {"connect.sql.type": self.sql_type}
        if self.precision is not None:
            meta["connect.sql.precision"] = self.precision
        if self.scale is not None:
            meta["connect.sql.scale"] = self.scale
        return meta

    @property
    def as_text(self) -> bool:
        """Types Spark's JDBC reader would change (TIME → timestamp, PostgreSQL's uuid/interval/…)."""
        return (self.sql_type.startswith("time") and not self.sql_type.startswith("timestamp")) or self.sql_type in (
            "interval",
            "uuid",
            "inet",
            "cidr",
            "macaddr",
            "money",
            "xml",
            "user-defined",
            "year",
        )


class Jdbc:
    """One database as seen through Spark's JDBC source (and psycopg2 for PostgreSQL)."""

    def __init__(self, spark: SparkSession | None, config: JdbcConnectionConfig) -> None:
        """`spark` None: only the small queries (`rows`, `columns`), as in a check before any run."""
        self._spark = spark
        self.dialect = dialect_for(config.connection_url)
        self.pg_dsn = (
            self.dialect.libpq_dsn(config.connection_user, config.connection_password)
            if self.dialect.name == "postgresql"
            else None
        )
        self.mysql_url = (
            self.dialect.mysql_url(config.connection_user, config.connection_password)
            if self.dialect.name == "mariadb"
            else None
        )
        self.mysql_args = (
            self.dialect.mysql_args(config.connection_user, config.connection_password)
            if self.dialect.name == "mariadb"
            else None
        )
        self.props = {"fetchsize": str(config.fetch_size)}
        if self.dialect.name == "mariadb":
            self.props.update(_SAFE_MYSQL_PROPERTIES)
        if self.dialect.driver:
            self.props["driver"] = self.dialect.driver
        if config.connection_user:
            self.props["user"] = config.connection_user
        if config.connection_password:
            self.props["password"] = config.connection_password

    @property
    def spark(self) -> SparkSession:
        assert self._spark is not None, "reading rows needs a SparkSession"
        return self._spark

    def read(self, sql: str, predicates: list[str] | None = None) -> DataFrame:
        """The rows of a SELECT (as a subquery), in parallel over `predicates` when given."""
        reader = self.spark.read.option("preferTimestampNTZ", "true")
        table = f"({sql}) connect_q"
        if predicates:
            return reader.jdbc(self.dialect.spark_url, table, predicates=predicates, properties=self.props)
        return reader.jdbc(self.dialect.spark_url, table, properties=self.props)

    def arrow_read(
        self, sql: str, predicates: list[str] | None, columns: list[Column], *, in_driver: bool = False
    ) -> ArrowRecords | None:
        """The rows of a SELECT as Arrow made in the Spark workers, one slice per predicate and partition
        (or in the driver, for a small result): PostgreSQL by `COPY … TO STDOUT`, MariaDB/MySQL by
        connectorx. None when a column has a type only the JDBC path reads (fields carry each
        column's `metadata`)."""
        from pyspark.sql.types import StringType, StructField, StructType

        from connect_core.connectors.jdbc import _mariadb, _pgcopy

        reader: Callable[[pa.Schema], Any]
        if self.pg_dsn is not None:
            schema = self.schema(sql)
            if schema is None:
                return None
            statements = [
                f"COPY (SELECT * FROM ({sql}) connect_q WHERE {p}) TO STDOUT WITH (FORMAT csv)"
                for p in predicates or ["TRUE"]
            ]
            reader = functools.partial(_pgcopy.copy_reader, self.pg_dsn, self.dialect.host)
        elif self.mysql_url is not None and all(c.sql_type in _mariadb.READABLE for c in columns):
            schema = self.schema(sql)  # as Spark's JDBC reader types it
            select = _mariadb.select_list(schema, self.dialect.quote) if schema is not None else None
            if schema is None or select is None:
                return None
            statements = [f"SELECT {select} FROM ({sql}) connect_q WHERE {p}" for p in predicates or ["1=1"]]
            reader = functools.partial(_mariadb.reader, self.mysql_url, self.dialect.host)
        else:
            return None
        metadata = {c.name: c.metadata() for c in columns}
        schema = StructType([StructField(f.name, f.dataType, True, metadata.get(f.name) or {}) for f in schema.fields])
        produce = reader(_pgcopy.arrow_schema(schema))
        units = StructType([StructField("statement", StringType())])
        return ArrowRecords(self.spark, [(s,) for s in statements], units, produce, schema, in_driver=in_driver)

    def schema(self, sql: str) -> StructType | None:
        """The Spark schema of a SELECT's result (PostgreSQL: from psycopg2, no Spark job; None when a
        column has a type the COPY path does not read)."""
        if self.pg_dsn is None:
            return self.read(f"SELECT * FROM ({sql}) connect_q WHERE 1=0").schema
        from connect_core.connectors.jdbc import _pgcopy

        conn = _pgcopy.connect(self.pg_dsn, self.dialect.host)
        try:
            with conn.cursor() as cur:
                cur.execute(f"SELECT * FROM ({sql}) connect_q LIMIT 0")
                return _pgcopy.spark_schema(cur.description)
        finally:
            conn.close()

    def rows(self, sql: str, what: str) -> list[Any]:
        """A small result, read in the driver (metadata, bounds) by psycopg2 or PyMySQL, no Spark job;
        through Spark's JDBC source for other databases."""
        with jdbc_errors(self.dialect, what):
            if self.mysql_args is not None:
                return self._mysql_rows(sql)
            if self.pg_dsn is None:
                return self.read(sql).collect()
            import psycopg2.extras

            from connect_core.connectors.jdbc import _pgcopy

            conn = _pgcopy.connect(self.pg_dsn, self.dialect.host)
            try:
                with conn.cursor(cursor_factory=psycopg2.extras.RealDictCursor) as cur:
                    cur.execute(sql)
                    return list(cur.fetchall())
            finally:
                conn.close()

    def _mysql_rows(self, sql: str) -> list[Any]:
        import pymysql.cursors

        from connect_core.connectors.jdbc._mysql import guarded_connect

        assert self.mysql_args is not None
        conn = guarded_connect(  # no local data: a server asking for a file gets none
            **self.mysql_args, charset="utf8mb4", connect_timeout=10, cursorclass=pymysql.cursors.DictCursor
        )
        try:
            with conn.cursor() as cur:
                cur.execute(sql)
                return list(cur.fetchall())
        finally:
            conn.close()

    def columns(self, table: tuple[str, ...]) -> list[Column]:
        """The table's columns in order, from information_schema; a missing table is a ConfigError."""
        name = table[-1]
        if self.dialect.name == "mariadb":
            schema = f"'{table[0]}'" if len(table) == 2 else "DATABASE()"
            type_col = "CASE WHEN column_type = 'tinyint(1)' THEN 'boolean' ELSE data_type END"
            text, number = "CHAR(128)", "SIGNED"
        else:
            schema = f"'{table[0]}'" if len(table) == 2 else "current_schema()"
            type_col = "data_type"
            text, number = "TEXT", "INTEGER"
        # Explicit casts: drivers describe information_schema columns in odd ways.
        sql = (
            f"SELECT CAST(column_name AS {text}) AS name, CAST({type_col} AS {text}) AS sql_type, "
            f"CAST(numeric_precision AS {number}) AS p, CAST(numeric_scale AS {number}) AS s "
            f"FROM information_schema.columns WHERE table_schema = {schema} AND table_name = '{name}' "
            "ORDER BY ordinal_position"
        )
        found = [
            Column(r["name"], r["sql_type"], r["p"], r["s"]) for r in self.rows(sql, f"reading `{name}`'s columns")
        ]
        if not found:
            raise ConfigError(f"table `{'.'.join(table)}` not found at {self.dialect.host}")
        return found

    def primary_key(self, table: tuple[str, ...]) -> list[str]:
        """The table's primary key columns in key order (none: [])."""
        name = table[-1]
        if self.dialect.name == "mariadb":
            schema = f"'{table[0]}'" if len(table) == 2 else "DATABASE()"
            sql = (
                "SELECT CAST(column_name AS CHAR(128)) AS name FROM information_schema.key_column_usage "
                f"WHERE table_schema = {schema} AND table_name = '{name}' AND constraint_name = 'PRIMARY' "
                "ORDER BY ordinal_position"
            )
        else:
            qualified = ".".join(f'"{part}"' for part in table).replace("'", "''")
            sql = (
                "SELECT CAST(a.attname AS TEXT) AS name FROM pg_index i "
                "JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey) "
                f"WHERE i.indrelid = to_regclass('{qualified}') AND i.indisprimary "
                "ORDER BY array_position(i.indkey, a.attnum)"
            )
        return [r["name"] for r in self.rows(sql, f"reading `{name}`'s primary key")]

    def text_cast(self, quoted: str) -> str:
        return f"CAST({quoted} AS CHAR)" if self.dialect.name == "mariadb" else f"CAST({quoted} AS TEXT)"

    def timestamp_text(self, quoted: str) -> str:
        """A timestamp as `YYYY-MM-DD HH:MM:SS.ffffff` text, exactly as the database holds it."""
        if self.dialect.name == "mariadb":
            return f"DATE_FORMAT({quoted}, '%Y-%m-%d %H:%i:%s.%f')"
        return f"to_char({quoted}, 'YYYY-MM-DD HH24:MI:SS.US')"

    def now_minus(self, millis: int, with_zone: bool) -> str:
        if self.dialect.name == "mariadb":
            return f"(NOW(6) - INTERVAL {int(millis) * 1000} MICROSECOND)"
        now = "CURRENT_TIMESTAMP" if with_zone else "LOCALTIMESTAMP"
        return f"({now} - INTERVAL '{int(millis)} milliseconds')"

    def limit(self, n: int) -> str:
        return f" LIMIT {int(n)}"
