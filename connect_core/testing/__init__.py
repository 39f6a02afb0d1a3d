"""Support code for the tests and the benchmarks: throwaway databases and servers to run against.

- `databases`: a database of one's own on the machine's shared PostgreSQL or MariaDB
  (`SERVER_URL`, `MARIADB`), dropped after;
- `metadata`: metadata databases copied from a template migrated once per set of migrations,
  made ahead and dropped behind on a thread of their own (`MetadataDatabases`);
- `servers`: private PostgreSQL (`wal_level=logical`) and MariaDB (row binlog) servers, for
  change-data capture;
- `durations`: the slowest tests of a run, from pytest's JUnit XML report.

It may import the runtime; nothing in connect_core imports it (an import contract in
pyproject.toml). The fault points connectors declare for tests are `connect_core.sdk.testing`.
"""

from connect_core.testing.databases import (
    MARIADB,
    SERVER_URL,
    Database,
    admin_connection,
    mariadb_database,
    pg_database,
    postgres_database,
    unique_database_name,
)
from connect_core.testing.metadata import MetadataDatabases, metadata_database, migrated_template, migrations_digest
from connect_core.testing.servers import (
    PG_BIN,
    MariaDbServer,
    PgServer,
    ServerStartError,
    fresh_db,
    start_binlog_mariadb,
    start_logical_pg,
    unique_name,
)

__all__ = [
    "MARIADB",
    "PG_BIN",
    "SERVER_URL",
    "Database",
    "MariaDbServer",
    "MetadataDatabases",
    "PgServer",
    "ServerStartError",
    "admin_connection",
    "fresh_db",
    "mariadb_database",
    "metadata_database",
    "migrated_template",
    "migrations_digest",
    "pg_database",
    "postgres_database",
    "start_binlog_mariadb",
    "start_logical_pg",
    "unique_database_name",
    "unique_name",
]
