"""Real databases for the JDBC tests: a fresh MariaDB database and a fresh Postgres database per test
(made by `connect_core.testing.databases`, which the benchmarks use too)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pymysql
import pytest
from sqlalchemy.engine import make_url

from connect_core.testing.databases import MARIADB, Database, mariadb_database, pg_database

__all__ = ["Database", "create_upsert_sink", "mariadb", "mariadb_target", "postgres", "sink_target", "synced", "target"]


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
    with contextlib.ExitStack() as stack:
        try:
            database = stack.enter_context(mariadb_database())
        except pymysql.err.OperationalError as exc:
            pytest.fail(f"no MariaDB at 127.0.0.1:{MARIADB['port']}: {exc}")
        yield database


def _pg_database(database_url: str, suffix: str) -> Iterator[Database]:
    """A database named after the test's metadata database and `suffix`, on its server."""
    with pg_database(database_url, f"{make_url(database_url).database}_{suffix}") as database:
        yield database


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
