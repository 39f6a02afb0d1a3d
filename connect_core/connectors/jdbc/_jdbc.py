"""Reading a database: small metadata queries, column types, clear errors, and the rows.

Rows are made as Arrow in every Spark partition by the dialect's fast path (`bulk_read`:
PostgreSQL's `COPY … TO STDOUT`, MariaDB's connectorx) or, for column types that path does not
read, go through Spark's JDBC data source. Small queries go through the dialect's Python client
in the driver (psycopg2, PyMySQL) instead of Spark jobs; what differs between databases is the
dialect's (`dialects/`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from connect_core.connectors.jdbc.config import JdbcConnectionConfig
from connect_core.connectors.jdbc.dialects import JdbcDialect, dialect_for
from connect_core.sdk import ArrowRecords
from connect_core.sdk.errors import ConfigError, ConnectError, FatalError, RetriableError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

__all__ = ["Column", "Jdbc", "jdbc_errors"]

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
def jdbc_errors(dialect: JdbcDialect, what: str) -> Iterator[None]:
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
    """One database as seen through Spark's JDBC source (and the dialect's Python client)."""

    def __init__(self, spark: SparkSession | None, config: JdbcConnectionConfig) -> None:
        """`spark` None: only the small queries (`rows`, `columns`), as in a check before any run."""
        self._spark = spark
        self.dialect = dialect_for(config.connection_url, config.connection_user, config.connection_password)
        self.props = {"fetchsize": str(config.fetch_size), **self.dialect.spark_properties}
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
        (or in the driver, for a small result), by the dialect's fast path. None when there is none
        or a column has a type only the JDBC path reads (fields carry each column's `metadata`)."""
        from pyspark.sql.types import StringType, StructField, StructType

        from connect_core.connectors.jdbc import _pgcopy

        bulk = self.dialect.bulk_read(sql, predicates, [c.sql_type for c in columns], self.schema)
        if bulk is None:
            return None
        metadata = {c.name: c.metadata() for c in columns}
        schema = StructType(
            [StructField(f.name, f.dataType, True, metadata.get(f.name) or {}) for f in bulk.schema.fields]
        )
        produce = bulk.reader(_pgcopy.arrow_schema(schema))
        units = StructType([StructField("statement", StringType())])
        return ArrowRecords(self.spark, [(s,) for s in bulk.statements], units, produce, schema, in_driver=in_driver)

    def schema(self, sql: str) -> StructType | None:
        """The Spark schema of a SELECT's result: the dialect's, without a Spark job, where it has
        one (None when a column has a type its fast path does not read); else Spark's JDBC reader's."""
        if self.dialect.describes_queries:
            return self.dialect.describe(sql)
        return self.read(f"SELECT * FROM ({sql}) connect_q WHERE 1=0").schema

    def rows(self, sql: str, what: str) -> list[Any]:
        """A small result, read in the driver by the dialect's client, no Spark job; through Spark's
        JDBC source for a dialect without one."""
        with jdbc_errors(self.dialect, what):
            found = self.dialect.rows(sql)
            return found if found is not None else self.read(sql).collect()

    def columns(self, table: tuple[str, ...]) -> list[Column]:
        """The table's columns in order, from information_schema; a missing table is a ConfigError."""
        name = table[-1]
        found = [
            Column(r["name"], r["sql_type"], r["p"], r["s"])
            for r in self.rows(self.dialect.columns_query(table), f"reading `{name}`'s columns")
        ]
        if not found:
            raise ConfigError(f"table `{'.'.join(table)}` not found at {self.dialect.host}")
        return found

    def primary_key(self, table: tuple[str, ...]) -> list[str]:
        """The table's primary key columns in key order (none: [])."""
        query = self.dialect.primary_key_query(table)
        return [r["name"] for r in self.rows(query, f"reading `{table[-1]}`'s primary key")]
