"""Real databases for the JDBC tests: a fresh MariaDB database and a fresh Postgres database per test."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg2
import pymysql
import pytest
from sqlalchemy.engine import make_url

MARIADB = {"host": "127.0.0.1", "port": int(os.environ.get("CONNECT_TEST_MARIADB_PORT", "3306")), "user": "root"}


@dataclass
class Database:
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


@pytest.fixture
def mariadb() -> Iterator[Database]:
    """A fresh MariaDB database (as a JDBC source, mostly)."""
    yield from _mariadb_database()


@pytest.fixture
def mariadb_target() -> Iterator[Database]:
    """Another fresh MariaDB database, as the JDBC sink's target."""
    yield from _mariadb_database()


@pytest.fixture(params=["postgresql", "mariadb"])
def sink_target(request: pytest.FixtureRequest) -> Database:
    """The JDBC sink's target: a fresh PostgreSQL, then a fresh MariaDB database."""
    return request.getfixturevalue("target" if request.param == "postgresql" else "mariadb_target")


def _mariadb_database() -> Iterator[Database]:
    name = f"connect_test_{uuid.uuid4().hex[:10]}"
    try:
        admin = pymysql.connect(**MARIADB, autocommit=True)
    except pymysql.err.OperationalError as exc:
        pytest.fail(f"no MariaDB at 127.0.0.1:{MARIADB['port']}: {exc}")
    with admin.cursor() as cur:
        cur.execute(f"CREATE DATABASE {name} CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
    yield Database(
        "mariadb",
        name,
        f"jdbc:mariadb://127.0.0.1:{MARIADB['port']}/{name}?user=root",
        dict(MARIADB),
    )
    with admin.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS {name}")
    admin.close()


def _pg_database(database_url: str, suffix: str) -> Iterator[Database]:
    url = make_url(database_url)
    name = f"{url.database}_{suffix}"
    args = {"host": url.host or "127.0.0.1", "port": url.port or 5432, "user": url.username or "postgres"}
    admin = psycopg2.connect(**args, dbname=url.database)
    admin.autocommit = True
    with admin.cursor() as cur:
        cur.execute(f'CREATE DATABASE "{name}"')
    yield Database(
        "postgresql", name, f"jdbc:postgresql://{args['host']}:{args['port']}/{name}?user={args['user']}", args
    )
    with admin.cursor() as cur:
        cur.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    admin.close()


@pytest.fixture
def postgres(database_url: str) -> Iterator[Database]:
    """A fresh Postgres database (apart from the metadata store's) as a JDBC source."""
    yield from _pg_database(database_url, "src")


@pytest.fixture
def target(database_url: str) -> Iterator[Database]:
    """A fresh Postgres database as the JDBC sink's target."""
    yield from _pg_database(database_url, "dst")


def create_upsert_sink(runtime: Any, target: Database, topic: str, **extra: Any) -> None:
    """A JDBC sink `sink` upserting `topic` by `id` into `target` (the table made if missing)."""
    runtime.create_connector(
        "sink",
        {
            "connector.class": "JdbcSinkConnector",
            "connection.url": target.jdbc_url,
            "topics": topic,
            "insert.mode": "upsert",
            "pk.mode": "record_value",
            "pk.fields": "id",
            "auto.create": True,
            **extra,
        },
    )


def synced(runner: Any, *connectors: str) -> list[Any]:
    """One run of task 0 of each connector, in order; each must succeed."""
    results = [runner.run(c, 0) for c in connectors]
    for r in results:
        assert r.state == "SUCCEEDED", r.message
    return results
