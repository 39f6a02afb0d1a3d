"""What differs between databases: identifier quoting, the JDBC driver, literals, errors.

Identifiers from configs are checked against a strict pattern and then quoted,
never pasted: `x; DROP TABLE y` is a config error, not SQL.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, quote, urlsplit

from connect_core.connectors.jdbc._url import check_jdbc_url
from connect_core.sdk.config import is_placeholder
from connect_core.sdk.connector import LineageDataset
from connect_core.sdk.errors import ConfigError

__all__ = ["Dialect", "dialect_for", "driver_jars", "lineage_datasets", "parse_identifier"]

# A table or column name: letters, digits, `_`, `$` (not first); optionally schema-qualified.
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_$]{0,62}$")


def parse_identifier(value: str, what: str) -> tuple[str, ...]:
    """`schema.table` or `table` (or a column) as its parts; anything else is a ConfigError."""
    parts = tuple(value.strip().split("."))
    if not 1 <= len(parts) <= 2 or not all(_NAME.match(p) for p in parts):
        raise ConfigError(
            f"{what} `{value}` is not a plain SQL name (letters, digits, `_`, `$`; `schema.table` at most)"
        )
    return parts


@dataclass(frozen=True)
class Dialect:
    name: str  # postgresql | mariadb
    url: str
    driver: str | None
    default_jars: tuple[str, ...]
    quote_char: str

    @property
    def host(self) -> str:
        """`host:port` of the URL, for error messages."""
        rest = self.url.split("://", 1)[1] if "://" in self.url else self.url
        netloc = urlsplit("//" + rest).netloc.rsplit("@", 1)[-1]
        return netloc or rest.split("/", 1)[0]

    @property
    def spark_url(self) -> str:
        """The URL handed to Spark: it picks its SQL dialect (quoting, type mapping) by the URL's
        prefix and knows MySQL's, not MariaDB's; MariaDB's driver takes `jdbc:mysql:` URLs too."""
        if self.name == "mariadb" and self.url.startswith("jdbc:mariadb:"):
            return "jdbc:mysql:" + self.url[len("jdbc:mariadb:") :]
        return self.url

    def quote(self, parts: tuple[str, ...] | str) -> str:
        if isinstance(parts, str):
            parts = parse_identifier(parts, "name")
        q = self.quote_char
        return ".".join(f"{q}{p}{q}" for p in parts)

    def _server(self, user: str | None, password: str | None) -> tuple[Any, str | None, str | None]:
        """The URL's parts, and the login: the config's user/password, else the URL's `?user=&password=`."""
        parts = urlsplit("//" + self.url.split("://", 1)[1])
        query = dict(parse_qsl(parts.query))
        return parts, user or query.get("user"), password or query.get("password")

    def libpq_dsn(self, user: str | None, password: str | None) -> dict[str, str]:
        """psycopg2 connection arguments of a PostgreSQL JDBC URL."""
        parts, user, password = self._server(user, password)
        args = {"host": parts.hostname or "127.0.0.1", "port": str(parts.port or 5432)}
        args["dbname"] = parts.path.strip("/") or "postgres"
        if user:
            args["user"] = user
        if password:
            args["password"] = password
        return args

    def mysql_args(self, user: str | None, password: str | None) -> dict[str, Any]:
        """PyMySQL connection arguments of a MariaDB/MySQL JDBC URL."""
        parts, user, password = self._server(user, password)
        return {
            "host": parts.hostname or "127.0.0.1",
            "port": parts.port or 3306,
            "database": parts.path.strip("/") or None,
            "user": user,
            "password": password or "",
        }

    def mysql_url(self, user: str | None, password: str | None) -> str:
        """The same as a `mysql://user:password@host:port/db` URL (connectorx's)."""
        a = self.mysql_args(user, password)
        login = ""
        if a["user"]:
            login = quote(a["user"], safe="") + (f":{quote(a['password'], safe='')}" if a["password"] else "") + "@"
        return f"mysql://{login}{a['host']}:{a['port']}/{a['database'] or ''}"


_POSTGRES_JARS = ("/usr/share/java/postgresql.jar",)
_MARIADB_JARS = ("/usr/share/java/mariadb-java-client.jar", "/usr/share/java/mysql-connector-java.jar")


def dialect_for(url: str) -> Dialect:
    """The dialect of a PostgreSQL or MariaDB/MySQL URL; a ConfigError for any other URL, or one with
    a parameter that is not allowed (see `_url`). Every connection's URL comes through here, once
    its config providers' placeholders are resolved, so it is checked where the task runs too."""
    if check_jdbc_url(url) == "postgresql":
        return Dialect("postgresql", url, "org.postgresql.Driver", _POSTGRES_JARS, '"')
    return Dialect("mariadb", url, "org.mariadb.jdbc.Driver", _MARIADB_JARS, "`")


def lineage_datasets(url: str, tables: list[str]) -> list[LineageDataset]:
    """`tables` of the database `url` names, as OpenLineage names them: `postgres://host:port` with
    `db.schema.table` (schema `public` when the table has none), `mysql://host:port` with
    `db.table`. From the URL's host, port and path only: never its user or password."""
    kind = url[len("jdbc:") :].split(":", 1)[0].lower() if url.startswith("jdbc:") else ""
    if kind not in ("postgresql", "mariadb", "mysql"):
        return []
    parts = urlsplit(url[len("jdbc:") :])
    postgres = kind == "postgresql"
    try:
        port = parts.port or (5432 if postgres else 3306)
    except ValueError:
        return []
    namespace = f"{'postgres' if postgres else 'mysql'}://{parts.hostname or 'localhost'}:{port}"
    database = parts.path.strip("/").split("/")[0]
    out = []
    for table in tables:
        names = parse_identifier(table, "table")
        if postgres:
            names = ("public", *names) if len(names) == 1 else names
            out.append(LineageDataset(namespace, ".".join((database, *names))))
        else:
            out.append(
                LineageDataset(namespace, ".".join((names[0], names[1]) if len(names) == 2 else (database, names[0])))
            )
    return out


def driver_jars(url: str, configured: str | None) -> list[str]:
    """The JDBC driver jars a run needs: `configured` (a checked real path), else the URL's driver's, or,
    while the URL is a config provider's placeholder (resolved only where the task runs), both built-in
    drivers'."""
    if configured:
        return [configured]
    if is_placeholder(url):  # (no `dialect_for` of a hostless URL: `_url` refuses it)
        return _installed(_POSTGRES_JARS) + _installed(_MARIADB_JARS)
    return _installed(dialect_for(url).default_jars)


def _installed(jars: tuple[str, ...]) -> list[str]:
    """The built-in driver's jars found on this machine (none: the first, for a clear error from Spark)."""
    return [j for j in jars if Path(j).exists()] or list(jars[:1])
