"""The change-data-capture tests' servers (a pytest plugin, registered by tests/conftest.py, so the
end-to-end tests share them): a PostgreSQL with `wal_level=logical` and a MariaDB with a row
binlog, each started once per test session (see `connect_core.testing.servers`), and a fresh
database per test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from connect_core.testing.servers import (
    MariaDbServer,
    PgServer,
    ServerStartError,
    fresh_db,
    start_binlog_mariadb,
    start_logical_pg,
)


@pytest.fixture(scope="session")
def logical_pg() -> Iterator[PgServer]:
    """A PostgreSQL of the session's own, ready for `pgoutput` logical replication, on its database
    `cdc`; fails (never skips) when it does not start."""
    try:
        with start_logical_pg() as server:
            yield server
    except ServerStartError as exc:
        pytest.fail(str(exc))


@pytest.fixture(scope="session")
def binlog_mariadb() -> Iterator[MariaDbServer]:
    """A MariaDB of the session's own, writing a full-image row binlog, on its database `cdc` as the
    capture user `cdc`; fails (never skips) when it does not start."""
    try:
        with start_binlog_mariadb() as server:
            yield server
    except ServerStartError as exc:
        pytest.fail(str(exc))


@pytest.fixture
def pg_db(logical_pg: PgServer) -> Iterator[PgServer]:
    """`logical_pg` on a new database of the test's own; dropped after, with its replication slots."""
    with fresh_db(logical_pg) as db:
        yield db


@pytest.fixture
def mariadb_db(binlog_mariadb: MariaDbServer) -> Iterator[MariaDbServer]:
    """`binlog_mariadb` on a new database of the test's own; dropped after."""
    with fresh_db(binlog_mariadb) as db:
        yield db
