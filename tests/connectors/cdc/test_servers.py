"""The change-data-capture tests' own servers: configured for log-based capture, a fresh database per
test that leaves nothing behind, and a start-up failure that says why."""

from __future__ import annotations

import pytest
from psycopg2.extras import LogicalReplicationConnection

from connect_core.testing.servers import (
    MariaDbServer,
    PgServer,
    ServerStartError,
    fresh_db,
    start_logical_pg,
    unique_name,
)


def test_logical_pg_is_set_up_for_logical_replication(logical_pg: PgServer) -> None:
    settings = "current_database(), current_setting('wal_level'), current_setting('max_replication_slots')"
    assert logical_pg.rows(f"SELECT {settings}") == [("cdc", "logical", "10")]

    replication = LogicalReplicationConnection(logical_pg.replication_dsn)
    try:
        with replication.cursor() as cur:
            cur.execute("IDENTIFY_SYSTEM")
            (_system_id, _timeline, _xlogpos, dbname) = cur.fetchone()
            assert dbname == "cdc"
    finally:
        replication.close()


def test_a_fresh_pg_database_is_dropped_with_its_slots_even_a_streaming_one(logical_pg: PgServer) -> None:
    slot = unique_name("slot")
    with fresh_db(logical_pg) as db:
        assert db.database != logical_pg.database
        db.execute(f"SELECT pg_create_logical_replication_slot('{slot}', 'pgoutput')", "CREATE PUBLICATION pub")
        replication = LogicalReplicationConnection(db.dsn)
        options = {"proto_version": "1", "publication_names": "pub"}
        replication.cursor().start_replication(slot_name=slot, decode=False, options=options)
        assert db.rows("SELECT active FROM pg_replication_slots WHERE slot_name = %s", slot) == [(True,)]

    try:
        assert logical_pg.rows("SELECT 1 FROM pg_database WHERE datname = %s", db.database) == []
        assert logical_pg.rows("SELECT 1 FROM pg_replication_slots WHERE slot_name = %s", slot) == []
    finally:
        replication.close()


def test_binlog_mariadb_writes_a_full_row_binlog_the_capture_user_can_read(binlog_mariadb: MariaDbServer) -> None:
    # all as the capture user `cdc`, with its password
    settings = "@@log_bin, @@binlog_format, @@binlog_row_image, @@server_id, current_user()"
    assert binlog_mariadb.rows(f"SELECT {settings}") == [(1, "ROW", "FULL", 1, "cdc@%")]
    [(file, position, *_)] = binlog_mariadb.rows("SHOW MASTER STATUS")
    [gtid_before] = binlog_mariadb.rows("SELECT @@gtid_binlog_pos")

    with fresh_db(binlog_mariadb) as db:
        db.execute("CREATE TABLE t (id INT PRIMARY KEY, note VARCHAR(20))", "INSERT INTO t VALUES (1, 'x')")
        assert db.rows("SELECT * FROM t") == [(1, "x")]  # the capture user reads every database (to snapshot it)
        assert db.rows("SELECT @@gtid_binlog_pos") != [gtid_before]  # GTIDs are on
        events = {row[2] for row in db.rows(f"SHOW BINLOG EVENTS IN '{file}' FROM {position}")}
        assert {"Gtid", "Table_map", "Write_rows_v1"} <= events  # the INSERT, as a row event


def test_a_fresh_mariadb_database_is_dropped_after(binlog_mariadb: MariaDbServer) -> None:
    with fresh_db(binlog_mariadb) as db:
        db.execute("CREATE TABLE t (id INT PRIMARY KEY)")
    assert binlog_mariadb.rows("SELECT 1 FROM information_schema.schemata WHERE schema_name = %s", db.database) == []


def test_a_server_that_does_not_start_says_why() -> None:
    failure = r"(?s)exited with 1.*invalid value for parameter \"wal_level\""
    with pytest.raises(ServerStartError, match=failure), start_logical_pg("wal_level=bogus"):
        pass
