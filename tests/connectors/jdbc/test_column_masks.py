"""Debezium's column masks on the JDBC source, against real PostgreSQL and MariaDB: the topic's rows
hold the hidden values (read as Arrow in the driver, in Spark's workers, and by Spark's JDBC
reader alike), a JDBC sink writes them as they are; the salt is in no REST response, log line or
run trace, and lineage says which columns were hidden and how."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from connect_core.rest.app import create_app
from connect_core.rest.auth import bearer_or_loopback
from connect_core.runtime.context import Runtime
from connect_core.runtime.execution.runner import TaskRunner
from connect_core.runtime.lineage import Masked, run_lineage
from connect_core.runtime.topics.segments import read_topics
from connect_core.sdk.records import TopicPartition
from tests.connectors.jdbc_helpers import (  # noqa: F401  (fixtures)
    Database,
    create_upsert_sink,
    mariadb,
    postgres,
    synced,
    target,
)
from tests.rest.conftest import Served, serve

SALT = "pepper-9f2c41d7"
HASH_KEY = f"column.mask.hash.SHA-256.with.salt.{SALT}"


def _sha256(value: str) -> str:
    return hashlib.sha256((SALT + value).encode()).hexdigest()


def _topic(runtime: Runtime, spark: Any, topic: str) -> list[dict[str, Any]]:
    segments = runtime.topics.segments_after({TopicPartition(topic, 0): 0})
    rows = read_topics(spark, segments)[topic].orderBy("__offset").collect()
    return [r.asDict(recursive=True) for r in rows]


def _work_in(where: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if where == "workers":  # even a few rows through Spark's Python workers, as a big window goes
        monkeypatch.setattr("connect_core.connectors.jdbc.source.DRIVER_MAX_ROWS", 0)
        monkeypatch.setattr("connect_core.sdk.records.DRIVER_MAX_ROWS", 0)
        monkeypatch.setattr("connect_core.sdk.records.CONNECT_DRIVER_MAX_ROWS", 0)


@pytest.fixture
def api(runtime: Runtime) -> Iterator[Served]:
    yield from serve(create_app(lambda: runtime, auth=[bearer_or_loopback(None)]))


@pytest.mark.parametrize("path", ["driver", "workers", "jdbc"])
def test_postgres_columns_are_hidden_before_the_topic(
    runtime: Runtime,
    runner: TaskRunner,
    spark: Any,
    postgres: Database,  # noqa: F811
    target: Database,  # noqa: F811
    api: Served,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
    path: str,
) -> None:
    _work_in("workers" if path != "driver" else "driver", monkeypatch)
    postgres.execute(
        "CREATE TABLE users (id int PRIMARY KEY, email varchar(40), ssn text, zip text, name text"
        + (", flag bit(1))" if path == "jdbc" else ")"),  # `bit`: a type only Spark's JDBC reader reads
        "INSERT INTO users (id, email, ssn, zip, name) VALUES (1, 'alice@example.com', '123-45-6789', '75011-Paris', "
        "'Alice'), (2, NULL, NULL, 'é', 'Bob')",
    )
    caplog.set_level("INFO", logger="connect")
    config = postgres.source_config(
        **{
            "table.whitelist": "users",
            "topic.prefix": "pg_",
            HASH_KEY: "public.users.email",  # Debezium's `<schema>.<table>.<column>`
            "column.mask.with.4.chars": r"users\.ssn",  # or the table as `table.whitelist` writes it
            "column.truncate.to.3.chars": "PUBLIC.USERS.ZIP",  # matched ignoring case, as Debezium does
        }
    )
    created = httpx.post(f"{api.url}/connectors", json={"name": "src", "config": config}, timeout=60)
    assert created.status_code == 201, created.text
    create_upsert_sink(runtime, target, "pg_users")
    synced(runner, "src", "sink")
    reader = {"driver": "COPY in the driver", "workers": "COPY in 1 Spark partition", "jdbc": "Spark's JDBC reader"}[
        path
    ]
    assert f"pg_users: reading the window through {reader}" in caplog.text

    rows = _topic(runtime, spark, "pg_users")
    assert [(r["id"], r["email"], r["ssn"], r["zip"], r["name"]) for r in rows] == [
        (1, _sha256("alice@example.com"), "****", "750", "Alice"),
        (2, None, None, "é", "Bob"),
    ]
    assert rows[0]["__key"] == {"id": 1}
    # the sink writes them as the topic has them: a 64-character hash in what was a varchar(40)
    assert target.rows("SELECT email, ssn, zip FROM pg_users ORDER BY id") == [
        (_sha256("alice@example.com"), "****", "750"),
        (None, None, "é"),
    ]

    # lineage: which columns, and how, never the salt; from the table's column it was read from
    found = run_lineage(runtime, "src", 0)
    (topic,) = found.outputs
    (table,) = found.inputs
    assert sorted(topic.masked, key=lambda m: m.field) == [
        Masked("email", "hash SHA-256 of salt + value (hex)", (table.namespace, table.name, "email")),
        Masked("ssn", "mask with 4 `*`", (table.namespace, table.name, "ssn")),
        Masked("zip", "truncate to 3 characters", (table.namespace, table.name, "zip")),
    ]
    assert SALT not in repr(found)

    # the salt: in no REST response, log line, status or run record
    shown = [
        httpx.get(f"{api.url}/connectors/src/config", timeout=30),
        httpx.get(f"{api.url}/connectors/src/tasks", timeout=30),
        httpx.get(f"{api.url}/connectors/src", timeout=30),
        httpx.get(f"{api.url}/connectors/src/status", timeout=30),
    ]
    assert all(r.status_code == 200 for r in shown)
    assert all(SALT not in r.text for r in shown)
    assert shown[0].json()["column.mask.hash.SHA-256.with.salt.********"] == "public.users.email"
    assert SALT not in caplog.text and "hiding `email` (column.mask.hash.SHA-256.with.salt.********)" in caplog.text
    assert SALT not in repr(runtime.connectors.last_runs("src", 5))


def test_mariadb_columns_are_hidden_and_a_failing_rule_names_its_key_not_its_salt(
    runtime: Runtime,
    runner: TaskRunner,
    spark: Any,
    mariadb: Database,  # noqa: F811
    api: Served,
) -> None:
    mariadb.execute(
        "CREATE TABLE people (id int PRIMARY KEY, email varchar(60), card varbinary(16), score double)",
        "INSERT INTO people VALUES (7, 'bob@example.com', X'0102', 0.5)",
    )
    database = mariadb.name
    config = mariadb.source_config(
        **{
            "table.whitelist": "people",
            "topic.prefix": "m_",
            "mode": "incrementing",
            "incrementing.column.name": "id",
            # Debezium's MySQL form: `<database>.<table>.<column>`; the key column hashed too
            f"column.mask.hash.MD5.with.salt.{SALT}": f"{database}.people.email,{database}.people.id",
            "column.truncate.to.1.chars": f"{database}.people.card",
        }
    )
    assert httpx.post(f"{api.url}/connectors", json={"name": "src", "config": config}, timeout=60).status_code == 201
    synced(runner, "src")
    (row,) = _topic(runtime, spark, "m_people")
    md5 = hashlib.md5((SALT + "bob@example.com").encode()).hexdigest()
    hashed_id = hashlib.md5((SALT + "7").encode()).hexdigest()
    assert (row["id"], row["email"], row["card"], row["score"]) == (hashed_id, md5, b"\x01", 0.5)
    assert row["__key"] == {"id": hashed_id}  # the key holds the hash, not the id

    # a double has no text both paths agree on: the run fails, naming the key with its salt masked
    broken = {**config, f"column.mask.hash.MD5.with.salt.{SALT}": f"{database}.people.score"}
    assert httpx.put(f"{api.url}/connectors/src/config", json=broken, timeout=60).status_code == 200
    mariadb.execute("INSERT INTO people VALUES (8, 'c@example.com', NULL, 1.5)")
    failed = runner.run("src", 0)
    assert failed.state == "FAILED" and "column.mask.hash.MD5.with.salt.********" in failed.message
    assert "`score` of type double" in failed.message
    status = httpx.get(f"{api.url}/connectors/src/status", timeout=30).text
    runs = repr(runtime.connectors.last_runs("src", 5))
    assert SALT not in failed.message and SALT not in status and SALT not in runs
    assert "column.mask.hash.MD5.with.salt.********" in runs or "column.mask.hash.MD5.with.salt.********" in status


def test_a_config_read_back_with_its_salt_masked_is_refused_not_stored(
    runtime: Runtime,
    postgres: Database,  # noqa: F811
    api: Served,
) -> None:
    postgres.execute("CREATE TABLE t (id int PRIMARY KEY, email text)")
    config = postgres.source_config(**{"table.whitelist": "t", "topic.prefix": "p.", HASH_KEY: "public.t.email"})
    assert httpx.post(f"{api.url}/connectors", json={"name": "src", "config": config}, timeout=60).status_code == 201
    shown = httpx.get(f"{api.url}/connectors/src/config", timeout=30).json()
    again = httpx.put(f"{api.url}/connectors/src/config", json=shown, timeout=60)
    assert again.status_code == 400 and "write the salt itself" in again.text, again.text
    assert runtime.connectors.get("src").config[HASH_KEY] == "public.t.email"  # unchanged


def test_a_key_debezium_would_ignore_is_refused_and_apply_shows_no_salt(
    runtime: Runtime,
    postgres: Database,  # noqa: F811
    api: Served,
) -> None:
    """Another case, a near miss, a pattern naming no `<schema>.<table>.<column>`: Debezium ignores
    each and the column goes out in clear; here each is a 400 naming the key with its salt masked."""
    postgres.execute("CREATE TABLE t (id int PRIMARY KEY, email text)")
    base = postgres.source_config(**{"table.whitelist": "t", "topic.prefix": "p."})
    refused = {
        f"Column.Mask.Hash.SHA-256.with.salt.{SALT}": ("public.t.email", "Column.Mask.Hash.SHA-256.with.salt.********"),
        f"column.mask.hash.SHA-256.with_salt.{SALT}": ("public.t.email", "column.mask.hash.SHA-256.********"),
        HASH_KEY: ("email", "column.mask.hash.SHA-256.with.salt.********"),
    }
    for key, (columns, shown) in refused.items():
        answer = httpx.post(f"{api.url}/connectors", json={"name": "c", "config": {**base, key: columns}}, timeout=60)
        assert answer.status_code == 400 and f"{shown}: " in answer.json()["message"], answer.text
        assert SALT not in answer.text and SALT.lower() not in answer.text.lower()
    assert runtime.connectors.names() == []

    created = httpx.put(f"{api.url}/connectors/src/apply", json={**base, HASH_KEY: "public.t.email"}, timeout=60)
    assert created.status_code in (200, 201) and SALT not in created.text, created.text
    resalted = {**base, f"{HASH_KEY}-2": "public.t.email", "poll.interval.ms": 1234}
    for dry_run in ("true", "false"):
        answer = httpx.put(f"{api.url}/connectors/src/apply?dryRun={dry_run}", json=resalted, timeout=60)
        assert answer.status_code == 200, answer.text
        assert answer.json()["changed"] == ["column.mask.hash.SHA-256.with.salt.********", "poll.interval.ms"]
        assert SALT not in answer.text


def test_a_rule_that_names_no_column_read_is_warned_of_each_run(
    runtime: Runtime,
    runner: TaskRunner,
    spark: Any,
    postgres: Database,  # noqa: F811
    caplog: pytest.LogCaptureFixture,
) -> None:
    postgres.execute(
        "CREATE TABLE users (id int PRIMARY KEY, email text, ssn text)",
        "INSERT INTO users VALUES (1, 'alice@example.com', '123')",
    )
    caplog.set_level("INFO", logger="connect")
    config = postgres.source_config(
        **{
            "table.whitelist": "users",
            "topic.prefix": "w_",
            "mode": "incrementing",
            "incrementing.column.name": "id",
            HASH_KEY: "inventory.users.email",  # Debezium's example schema, not this one
            "column.mask.with.3.chars": "public.users.ssn",
        }
    )
    runtime.create_connector("src", config)
    synced(runner, "src")
    (row,) = _topic(runtime, spark, "w_users")
    assert (row["email"], row["ssn"]) == ("alice@example.com", "***")  # what the rule missed is in clear…
    warned = [
        r.getMessage() for r in caplog.records if r.levelname == "WARNING" and "matched no column" in r.getMessage()
    ]
    assert len(warned) == 1, warned  # …and said so, by the key with its salt masked
    assert (
        "`column.mask.hash.SHA-256.with.salt.********` matched no column of the table(s) read (public.users)"
        in (warned[0])
    )
    assert "inventory.users.email" in warned[0] and SALT not in caplog.text

    # a run that finds nothing new still reads the table's columns: the rule that names one is no news
    caplog.clear()
    assert runner.run("src", 0).state == "SUCCEEDED"
    warned = [r.getMessage() for r in caplog.records if "matched no column" in r.getMessage()]
    assert len(warned) == 1 and "column.mask.with.3.chars" not in warned[0], warned
