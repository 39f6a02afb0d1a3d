"""Throwaway databases on the machine's shared PostgreSQL and MariaDB servers.

Each caller gets a database of its own, made on entry and dropped on exit: a test never sees
another test's rows, and a benchmark leaves nothing behind.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg2
import pymysql
from sqlalchemy.engine import make_url

__all__ = [
    "MARIADB",
    "SERVER_URL",
    "Database",
    "admin_connection",
    "mariadb_database",
    "pg_database",
    "postgres_database",
    "unique_database_name",
]

#: The machine's Postgres; CONNECT_TEST_PG_URL overrides it (empty is unset, as scripts/_checks.sh reads it).
SERVER_URL = os.environ.get("CONNECT_TEST_PG_URL") or "postgresql://postgres@127.0.0.1:5432/postgres"

#: The machine's MariaDB (pymysql's connect arguments); CONNECT_TEST_MARIADB_PORT overrides the port.
MARIADB: dict[str, Any] = {
    "host": "127.0.0.1",
    "port": int(os.environ.get("CONNECT_TEST_MARIADB_PORT", "3306")),
    "user": "root",
}


def unique_database_name(prefix: str = "connect_test") -> str:
    """`prefix` and a random suffix: a valid, unquoted database name on both servers."""
    return f"{prefix}_{uuid.uuid4().hex[:12]}"


def admin_connection(server_url: str) -> Any:
    """An autocommit psycopg2 connection to the database of `server_url` (CREATE/DROP DATABASE need one)."""
    conn = psycopg2.connect(make_url(server_url).set(drivername="postgresql").render_as_string(hide_password=False))
    conn.autocommit = True
    return conn


@contextlib.contextmanager
def postgres_database(server_url: str, name: str, *, template: str | None = None) -> Iterator[str]:
    """The URL of a new database `name` on the server of `server_url` (a copy of `template`, if
    given, else empty), dropped on exit with whatever is still connected to it."""
    admin = admin_connection(server_url)
    try:
        with admin.cursor() as cur:
            cur.execute(f'CREATE DATABASE "{name}"' + (f' TEMPLATE "{template}"' if template else ""))
        try:
            yield make_url(server_url).set(database=name).render_as_string(hide_password=False)
        finally:
            with admin.cursor() as cur:
                cur.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        admin.close()


@dataclass
class Database:
    """A database of one's own on a shared server, as a JDBC connector and a test see it."""

    kind: str  # mariadb | postgresql
    name: str
    jdbc_url: str
    connect_args: dict[str, Any]

    def connect(self) -> Any:
        if self.kind == "mariadb":
            return pymysql.connect(**self.connect_args, database=self.name, autocommit=True, charset="utf8mb4")
        conn = psycopg2.connect(**self.connect_args, dbname=self.name)
        conn.autocommit = True
        return conn

    def execute(self, *statements: str, params: Sequence[Any] | None = None) -> None:
        conn = self.connect()
        try:
            with conn.cursor() as cur:
                for statement in statements:
                    cur.execute(statement, params)
        finally:
            conn.close()

    def rows(self, query: str) -> list[tuple[Any, ...]]:
        conn = self.connect()
        try:
            with conn.cursor() as cur:
                cur.execute(query)
                return list(cur.fetchall())
        finally:
            conn.close()

    def source_config(self, **extra: Any) -> dict[str, Any]:
        return {"connector.class": "JdbcSourceConnector", "connection.url": self.jdbc_url, **extra}


@contextlib.contextmanager
def pg_database(server_url: str, name: str) -> Iterator[Database]:
    """A new, empty PostgreSQL database `name` on the server of `server_url`, dropped on exit."""
    url = make_url(server_url)
    args = {"host": url.host or "127.0.0.1", "port": url.port or 5432, "user": url.username or "postgres"}
    with postgres_database(server_url, name):
        yield Database(
            "postgresql", name, f"jdbc:postgresql://{args['host']}:{args['port']}/{name}?user={args['user']}", args
        )


@contextlib.contextmanager
def mariadb_database(name: str | None = None) -> Iterator[Database]:
    """A new, empty MariaDB database (utf8mb4, binary collation) on the machine's server, dropped on
    exit; raises pymysql's OperationalError when the server does not answer."""
    name = name or unique_database_name()
    admin = pymysql.connect(**MARIADB, autocommit=True)
    try:
        with admin.cursor() as cur:
            cur.execute(f"CREATE DATABASE {name} CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
        try:
            yield Database(
                "mariadb", name, f"jdbc:mariadb://127.0.0.1:{MARIADB['port']}/{name}?user=root", dict(MARIADB)
            )
        finally:
            with admin.cursor() as cur:
                cur.execute(f"DROP DATABASE IF EXISTS {name}")
    finally:
        admin.close()
