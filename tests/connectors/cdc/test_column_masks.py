"""Debezium's column masks on the CDC sources, against a real PostgreSQL (logical replication) and a
real MariaDB (row binlog): hidden in the snapshot and the stream, in `before`, `after` and the key;
the stand-in of an unchanged TOAST value stays; the salt is in no shown config or log line."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from connect_core.runtime.context import Runtime
from connect_core.runtime.lineage import run_lineage
from connect_core.runtime.security import mask_config
from connect_core.runtime.topics.segments import read_topics
from connect_core.sdk.records import TopicPartition
from connect_core.testing.servers import MariaDbServer, PgServer
from tests.conftest import make_runner
from tests.connectors.cdc._pipelines import pg_capture

SALT = "cdc-salt-5e1b77"


def _sha256(value: str) -> str:
    return hashlib.sha256((SALT + value).encode()).hexdigest()


def _events(runtime: Runtime, spark: Any, topic: str) -> list[dict[str, Any]]:
    segments = runtime.topics.segments_after({TopicPartition(topic, 0): 0})
    rows = read_topics(spark, segments)[topic].orderBy("__offset").collect()
    return [r.asDict(recursive=True) for r in rows]


def _rows(events: list[dict[str, Any]], side: str) -> list[Any]:
    return [e[side] and (e[side]["id"], e[side]["email"], e[side]["ssn"], e[side]["zip"]) for e in events]


def test_postgres_snapshot_and_stream_are_hidden_in_before_after_and_key(
    pg_db: PgServer, runtime: Runtime, spark: Any, caplog: pytest.LogCaptureFixture
) -> None:
    pg_db.execute(
        "CREATE TABLE users (id text PRIMARY KEY, email text, ssn text, zip text, bio text)",
        "ALTER TABLE users REPLICA IDENTITY FULL",
        "INSERT INTO users VALUES ('u1', 'alice@example.com', '123-45-6789', '75011', 'short')",
    )
    caplog.set_level("INFO", logger="connect")
    config = pg_capture(
        pg_db,
        "public.users",
        **{
            "heartbeat.interval.ms": "0",
            # Debezium's `<schema>.<table>.<column>`, the key column hashed too
            f"column.mask.hash.SHA-256.with.salt.{SALT}": "public.users.email,public.users.id",
            "column.mask.with.3.chars": "public.users.ssn",
            "column.truncate.to.2.chars": r"public\.users\.(zip|bio)",
        },
    )
    runtime.create_connector("cdc", config)
    runner = make_runner(runtime, spark)
    assert (first := runner.run("cdc", 0)).state == "SUCCEEDED", first.message
    pg_db.execute(
        "UPDATE users SET email = 'alice@new.example', zip = '13001' WHERE id = 'u1'",
        "INSERT INTO users VALUES ('u2', NULL, 'x', NULL, NULL)",
        "DELETE FROM users WHERE id = 'u2'",
    )
    assert (second := runner.run("cdc", 0)).state == "SUCCEEDED", second.message

    events = _events(runtime, spark, "srv.public.users")
    u1, u2 = _sha256("u1"), _sha256("u2")
    assert [e["op"] for e in events] == ["r", "u", "c", "d", None]
    assert _rows(events, "after") == [
        (u1, _sha256("alice@example.com"), "***", "75"),
        (u1, _sha256("alice@new.example"), "***", "13"),
        (u2, None, "***", None),
        None,
        None,
    ]
    assert events[0]["after"]["bio"] == "sh"  # a regex names it too
    assert _rows(events, "before")[1] == (u1, _sha256("alice@example.com"), "***", "75")  # REPLICA IDENTITY FULL
    assert _rows(events, "before")[3] == (u2, None, "***", None)
    assert [e["__key"] for e in events] == [{"id": u1}, {"id": u1}, {"id": u2}, {"id": u2}, {"id": u2}]

    # lineage names the hidden fields of the change events, never the salt
    notes = {m.field: m.how for m in run_lineage(runtime, "cdc", 0).outputs[0].masked}
    assert notes["after.email"] == "hash SHA-256 of salt + value (hex)" and notes["before.ssn"] == "mask with 3 `*`"
    assert notes["__key.id"] == "hash SHA-256 of salt + value (hex)"
    assert SALT not in caplog.text and SALT not in repr(mask_config(runtime.connectors.get("cdc").config))


def test_an_unchanged_toast_value_keeps_its_stand_in(pg_db: PgServer, runtime: Runtime, spark: Any) -> None:
    """PostgreSQL does not send an out-of-line value an update left alone: its stand-in
    (`__debezium_unavailable_value`) stays as it is, so a sink keeps the (hidden) value it has."""
    pg_db.execute(
        "CREATE TABLE docs (id int PRIMARY KEY, body text, n int)",
        "ALTER TABLE docs ALTER COLUMN body SET STORAGE EXTERNAL",  # out of line, uncompressed
        f"INSERT INTO docs VALUES (1, '{'x' * 5000}', 0)",
    )
    config = pg_capture(
        pg_db,
        "public.docs",
        **{
            "heartbeat.interval.ms": "0",
            f"column.mask.hash.SHA-256.with.salt.{SALT}": "public.docs.body",
        },
    )
    runtime.create_connector("cdc", config)
    runner = make_runner(runtime, spark)
    assert runner.run("cdc", 0).state == "SUCCEEDED"
    pg_db.execute("UPDATE docs SET n = 1 WHERE id = 1")
    assert runner.run("cdc", 0).state == "SUCCEEDED"
    snapshot, update = _events(runtime, spark, "srv.public.docs")
    assert snapshot["after"]["body"] == _sha256("x" * 5000)
    assert update["after"]["body"] == "__debezium_unavailable_value" and update["after"]["n"] == 1


def test_mariadb_snapshot_and_stream_are_hidden(mariadb_db: MariaDbServer, runtime: Runtime, spark: Any) -> None:
    db = mariadb_db.database
    mariadb_db.execute(
        f"USE `{db}`",
        "CREATE TABLE users (id int PRIMARY KEY, email varchar(40), ssn varchar(11), zip varbinary(5))",
        "INSERT INTO users VALUES (1, 'bob@example.com', '987-65-4321', x'3130303031')",
    )
    config = {
        "connector.class": "io.debezium.connector.mariadb.MariaDbConnector",
        "database.hostname": mariadb_db.host,
        "database.port": str(mariadb_db.port),
        "database.user": mariadb_db.user,
        "database.password": mariadb_db.password,
        "database.include.list": db,
        "topic.prefix": "maria",
        # Debezium's MySQL form: `<database>.<table>.<column>`
        f"column.mask.hash.SHA-512.with.salt.{SALT}": f"{db}.users.email",
        "column.mask.with.0.chars": f"{db}.users.ssn",
        "column.truncate.to.2.chars": f"{db}.users.zip",
    }
    runtime.create_connector("maria", config)
    runner = make_runner(runtime, spark)
    assert (first := runner.run("maria", 0)).state == "SUCCEEDED", first.message
    mariadb_db.execute(f"USE `{db}`", "UPDATE users SET email = 'bob@new.example' WHERE id = 1")
    assert (second := runner.run("maria", 0)).state == "SUCCEEDED", second.message

    snapshot, update = _events(runtime, spark, f"maria.{db}.users")
    sha512 = {v: hashlib.sha512((SALT + v).encode()).hexdigest() for v in ("bob@example.com", "bob@new.example")}
    assert (snapshot["op"], snapshot["after"]) == (
        "r",
        {"id": 1, "email": sha512["bob@example.com"], "ssn": "", "zip": b"10"},
    )
    assert update["op"] == "u" and update["before"]["email"] == sha512["bob@example.com"]
    assert update["after"] == {"id": 1, "email": sha512["bob@new.example"], "ssn": "", "zip": b"10"}
    assert update["__key"] == {"id": 1}  # not named: the key stays


def test_a_rule_that_names_no_column_of_the_tables_read_is_warned_of_each_run(
    pg_db: PgServer, runtime: Runtime, spark: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """Debezium says nothing of a rule that names no column (`inventory.…` copied from its examples):
    here each run that read tables warns of it, by its key with the salt masked."""
    pg_db.execute(
        "CREATE TABLE users (id int PRIMARY KEY, email text, ssn text)",
        "INSERT INTO users VALUES (1, 'alice@example.com', '123')",
    )
    caplog.set_level("INFO", logger="connect")
    config = pg_capture(
        pg_db,
        "public.users",
        **{
            "heartbeat.interval.ms": "0",
            f"column.mask.hash.SHA-256.with.salt.{SALT}": "inventory.users.email",
            "column.mask.with.3.chars": "public.users.ssn",
        },
    )
    runtime.create_connector("cdc", config)
    runner = make_runner(runtime, spark)

    def warned() -> list[str]:
        return [
            r.getMessage() for r in caplog.records if r.levelname == "WARNING" and "matched no column" in r.getMessage()
        ]

    assert (first := runner.run("cdc", 0)).state == "SUCCEEDED", first.message  # the snapshot
    (warning,) = warned()
    assert "`column.mask.hash.SHA-256.with.salt.********` matched no column of the table(s) read (public.users)" in (
        warning
    )
    caplog.clear()
    pg_db.execute("UPDATE users SET ssn = '456' WHERE id = 1")
    assert (second := runner.run("cdc", 0)).state == "SUCCEEDED", second.message  # the stream
    assert len(warned()) == 1 and "column.mask.with.3.chars" not in warned()[0]
    snapshot, update = _events(runtime, spark, "srv.public.users")
    assert (update["after"]["email"], update["after"]["ssn"]) == ("alice@example.com", "***")
    assert snapshot["after"]["ssn"] == "***" and SALT not in caplog.text
