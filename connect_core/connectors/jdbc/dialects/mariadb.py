"""MariaDB and MySQL: `jdbc:mariadb://` (`jdbc:mysql://` too), PyMySQL for small queries, connectorx
for rows (`_mariadb`).

Column types on the way into MariaDB/MySQL (`column_type`): a string or binary key column needs a
bounded type (an index has a length limit); a timestamp is DATETIME(6) in UTC (TIMESTAMP would stop
at 2038).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from connect_core.connectors.jdbc.dialects import BulkRead, JdbcDialect, checked_identifier, register
from connect_core.sdk.errors import ConfigError

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

__all__ = ["MariaDbDialect"]

#: Harmless URL parameters, lower-case (Connector/J reads keys case-insensitively or not at all:
#: compared lower-case, a key in another case is no way around this list).
_PARAMETERS = frozenset(
    s.lower()
    for s in (
        "user",
        "password",
        "useSSL",
        "requireSSL",
        "sslMode",
        "verifyServerCertificate",
        "enabledSslProtocolSuites",
        "enabledSslCipherSuites",
        "connectTimeout",
        "socketTimeout",
        "tcpKeepAlive",
        "tcpNoDelay",
        "useCompression",
        "characterEncoding",
        "useUnicode",
        "serverTimezone",
        "connectionTimeZone",
        "useServerPrepStmts",
        "rewriteBatchedStatements",
        "useBulkStmts",
        "useBatchMultiSend",
        "cachePrepStmts",
        "prepStmtCacheSize",
        "prepStmtCacheSqlLimit",
        "defaultFetchSize",
        "useCursorFetch",
        "zeroDateTimeBehavior",
        "tinyInt1isBit",
        "transformedBitIsBoolean",
        "yearIsDateType",
        "useAffectedRows",
        "permitMysqlScheme",
        "restrictedAuth",
    )
)

#: Connector/J properties (MariaDB's and MySQL's names) Spark's JDBC reader always sets: no local
#: files for the server, no Java objects from it. The URL cannot set them (`_url` refuses them).
_SAFE_PROPERTIES = {
    "allowLocalInfile": "false",
    "allowLoadLocalInfile": "false",
    "allowUrlInLocalInfile": "false",
    "autoDeserialize": "false",
}

_BY_SPARK = {
    "byte": "TINYINT",
    "short": "SMALLINT",
    "integer": "INT",
    "long": "BIGINT",
    "float": "FLOAT",
    "double": "DOUBLE",
    "string": "LONGTEXT",
    "boolean": "BOOLEAN",
    "date": "DATE",
    "timestamp_ntz": "DATETIME(6)",
    "timestamp": "DATETIME(6)",  # UTC (the sink's session time zone); TIMESTAMP would stop at 2038
    "binary": "LONGBLOB",
}
_KEYS = {"string": "VARCHAR(255)", "binary": "VARBINARY(255)"}
_KEEP = {"json": "JSON", "jsonb": "JSON", "time": "TIME(6)", "time without time zone": "TIME(6)"}


@register
class MariaDbDialect(JdbcDialect):
    name = "mariadb"
    schemes = ("mariadb", "mysql")
    url_form = "jdbc:mariadb://host[:port]/db (jdbc:mysql:// too)"
    url_parameters = _PARAMETERS
    driver = "org.mariadb.jdbc.Driver"
    default_jars = ("/usr/share/java/mariadb-java-client.jar", "/usr/share/java/mysql-connector-java.jar")
    default_port = 3306
    quote_char = "`"
    lineage_scheme = "mysql"
    spark_properties = _SAFE_PROPERTIES
    bulk_reader = "connectorx"

    @property
    def spark_url(self) -> str:
        """Spark picks its SQL dialect (quoting, type mapping) by the URL's prefix and knows MySQL's,
        not MariaDB's; MariaDB's driver takes `jdbc:mysql:` URLs too."""
        if self.url.startswith("jdbc:mariadb:"):
            return "jdbc:mysql:" + self.url[len("jdbc:mariadb:") :]
        return self.url

    def mysql_args(self) -> dict[str, Any]:
        """PyMySQL's connection arguments."""
        parts, user, password = self.server()
        return {
            "host": parts.hostname or "127.0.0.1",
            "port": parts.port or 3306,
            "database": parts.path.strip("/") or None,
            "user": user,
            "password": password or "",
        }

    def mysql_url(self) -> str:
        """The same as a `mysql://user:password@host:port/db` URL (connectorx's)."""
        a = self.mysql_args()
        login = ""
        if a["user"]:
            login = quote(a["user"], safe="") + (f":{quote(a['password'], safe='')}" if a["password"] else "") + "@"
        return f"mysql://{login}{a['host']}:{a['port']}/{a['database'] or ''}"

    def rows(self, sql: str) -> list[Any] | None:
        import pymysql.cursors

        from connect_core.connectors.jdbc._mysql import guarded_connect

        conn = guarded_connect(  # no local data: a server asking for a file gets none
            **self.mysql_args(), charset="utf8mb4", connect_timeout=10, cursorclass=pymysql.cursors.DictCursor
        )
        try:
            with conn.cursor() as cur:
                cur.execute(sql)
                return list(cur.fetchall())
        finally:
            conn.close()

    def bulk_read(
        self,
        sql: str,
        predicates: list[str] | None,
        column_types: list[str],
        schema: Callable[[str], StructType | None],
    ) -> BulkRead | None:
        """connectorx in each Spark partition, typed as Spark's JDBC reader types the result (`_mariadb`)."""
        from connect_core.connectors.jdbc import _mariadb

        if not all(t in _mariadb.READABLE for t in column_types):
            return None
        found = schema(sql)
        select = _mariadb.select_list(found, self.quote) if found is not None else None
        if found is None or select is None:
            return None
        statements = [f"SELECT {select} FROM ({sql}) connect_q WHERE {p}" for p in predicates or ["1=1"]]
        return BulkRead(found, statements, functools.partial(_mariadb.reader, self.mysql_url(), self.host))

    def columns_query(self, table: tuple[str, ...]) -> str:
        table = checked_identifier(table)  # into string literals below: plain names only
        schema = f"'{table[0]}'" if len(table) == 2 else "DATABASE()"
        # Explicit casts: drivers describe information_schema columns in odd ways.
        return (
            "SELECT CAST(column_name AS CHAR(128)) AS name, "
            "CAST(CASE WHEN column_type = 'tinyint(1)' THEN 'boolean' ELSE data_type END AS CHAR(128)) AS sql_type, "
            "CAST(numeric_precision AS SIGNED) AS p, CAST(numeric_scale AS SIGNED) AS s "
            f"FROM information_schema.columns WHERE table_schema = {schema} AND table_name = '{table[-1]}' "
            "ORDER BY ordinal_position"
        )

    def primary_key_query(self, table: tuple[str, ...]) -> str:
        table = checked_identifier(table)  # into string literals below: plain names only
        schema = f"'{table[0]}'" if len(table) == 2 else "DATABASE()"
        return (
            "SELECT CAST(column_name AS CHAR(128)) AS name FROM information_schema.key_column_usage "
            f"WHERE table_schema = {schema} AND table_name = '{table[-1]}' AND constraint_name = 'PRIMARY' "
            "ORDER BY ordinal_position"
        )

    def text_cast(self, quoted: str) -> str:
        return f"CAST({quoted} AS CHAR)"

    def timestamp_text(self, quoted: str) -> str:
        return f"DATE_FORMAT({quoted}, '%Y-%m-%d %H:%i:%s.%f')"

    def now_minus(self, millis: int, column_type: str) -> str:
        return f"(NOW(6) - INTERVAL {int(millis) * 1000} MICROSECOND)"

    def column_type(self, field: Any, *, key: bool = False) -> str:
        spark = field.dataType.typeName()
        if key and spark in _KEYS:
            return _KEYS[spark]
        source = str(field.metadata.get("connect.sql.type", "")).lower()
        if source in _KEEP and spark == "string":
            return _KEEP[source]
        if spark == "decimal":
            if field.dataType.precision > 65:
                raise ConfigError(
                    f"column `{field.name}`: DECIMAL({field.dataType.precision}) exceeds MariaDB's 65 digits"
                )
            return f"DECIMAL({field.dataType.precision},{field.dataType.scale})"
        if spark in _BY_SPARK:
            return _BY_SPARK[spark]
        raise ConfigError(
            f"column `{field.name}` has type {field.dataType.simpleString()}, which the JDBC sink cannot map "
            "to a MariaDB column"
        )

    def qualified_table(self, names: tuple[str, ...]) -> str:
        """`db.table`, the URL's database when the table has none (Debezium's MySQL form)."""
        return ".".join(names if len(names) == 2 else (self.mysql_args()["database"] or "", names[0]))

    @classmethod
    def lineage_name(cls, database: str, names: tuple[str, ...]) -> str:
        """`db.table` (a qualified name's schema is its database)."""
        return ".".join(names if len(names) == 2 else (database, names[0]))
