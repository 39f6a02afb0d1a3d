"""The MariaDB CDC source through the runner: a consistent snapshot, then inserts, updates and
deletes from the row binlog, in Debezium's envelope, resumed by GTID; server settings checked."""

from __future__ import annotations

import datetime as dt
import time
from decimal import Decimal
from typing import Any

import pytest

from connect_core.connectors.cdc.config import MariaDbCdcConfig
from connect_core.connectors.cdc.mariadb import MariaDbCdcSourceConnector
from connect_core.runtime.context import Runtime
from connect_core.runtime.topics.segments import read_topics
from connect_core.sdk.records import TopicPartition
from connect_core.testing.servers import MariaDbServer
from tests.conftest import make_runner
from tests.connectors.cdc._pipelines import replica_sink
from tests.connectors.jdbc_helpers import Database, target  # noqa: F401  (fixtures)


def _events(runtime: Runtime, spark: Any, topic: str, after: int = 0) -> list[dict[str, Any]]:
    segments = runtime.topics.segments_after({TopicPartition(topic, 0): after})
    if not segments:
        return []
    rows = read_topics(spark, segments)[topic].orderBy("__offset").collect()
    return [r.asDict(recursive=True) for r in rows]


def _config(db: MariaDbServer, **extra: str) -> dict[str, str]:
    return {
        "connector.class": "io.debezium.connector.mariadb.MariaDbConnector",
        "database.hostname": db.host,
        "database.port": str(db.port),
        "database.user": db.user,
        "database.password": db.password,
        "database.include.list": db.database,
        "table.include.list": rf"{db.database}\.(orders|notes)",
        "topic.prefix": "maria",
        **extra,
    }


@pytest.fixture
def source(mariadb_db: MariaDbServer, runtime: Runtime) -> dict[str, str]:
    mariadb_db.execute(
        f"USE `{mariadb_db.database}`",
        "CREATE TABLE orders (id int PRIMARY KEY, label varchar(20), amount decimal(10,2), at timestamp(3) NULL,"
        " made datetime NULL, raw varbinary(8), big bigint unsigned, tags set('a','b','c'), doc json)",
        "CREATE TABLE notes (id int PRIMARY KEY, body text)",
        "CREATE TABLE skipped (id int PRIMARY KEY)",
        "INSERT INTO orders VALUES (1, 'one', 1.50, '2024-01-01 08:00:00.250', '2024-01-02 03:04:05', x'0102',"
        " 18446744073709551615, 'c,a', '{\"k\": 1}'), (2, 'two', NULL, NULL, NULL, NULL, NULL, NULL, NULL),"
        " (3, 'trois é', 3.00, NULL, NULL, NULL, 7, '', NULL)",
        "INSERT INTO notes VALUES (1, 'a'), (2, 'b')",
    )
    config = _config(mariadb_db)
    runtime.create_connector("maria", config)
    return config


def _db(runtime: Runtime, mariadb_db: MariaDbServer) -> str:
    return f"maria.{mariadb_db.database}"


def test_snapshot_then_stream_with_deletes(
    mariadb_db: MariaDbServer, runtime: Runtime, spark: Any, source: dict[str, str]
) -> None:
    runner = make_runner(runtime, spark)
    first = runner.run("maria", 0)
    assert first.state == "SUCCEEDED", first.message
    topic = f"{_db(runtime, mariadb_db)}.orders"
    orders = _events(runtime, spark, topic)
    assert [(e["op"], e["after"]["id"]) for e in orders] == [("r", 1), ("r", 2), ("r", 3)]
    one = orders[0]["after"]
    assert one["amount"] == Decimal("1.50") and one["raw"] == b"\x01\x02" and one["big"] == Decimal(2**64 - 1)
    assert one["at"] == dt.datetime(2024, 1, 1, 8, 0, 0, 250000) and one["made"] == dt.datetime(2024, 1, 2, 3, 4, 5)
    assert one["tags"] == "a,c" and one["doc"] == '{"k": 1}'
    assert orders[2]["after"]["label"] == "trois é" and orders[2]["source"]["snapshot"] == "last"
    assert orders[0]["__key"] == {"id": 1} and orders[0]["source"]["connector"] == "mariadb"
    assert len(_events(runtime, spark, f"{_db(runtime, mariadb_db)}.notes")) == 2
    assert not runtime.topics.partitions(f"{_db(runtime, mariadb_db)}.skipped")
    snapshot = runtime.connectors.positions("maria").offset({"server": "maria"})
    assert snapshot is not None and snapshot["gtid"] and snapshot["file"].startswith("binlog.")

    mariadb_db.execute(
        f"USE `{mariadb_db.database}`",
        "INSERT INTO orders (id, label, amount, big, tags) VALUES (4, 'four', 4.00, 5, 'b,a')",
        "UPDATE orders SET label = 'ONE', tags = 'b' WHERE id = 1",
        "DELETE FROM orders WHERE id = 2",
        "UPDATE notes SET body = 'B' WHERE id = 2",
        "DELETE FROM notes WHERE id = 1",
        "INSERT INTO skipped VALUES (1)",
        "UPDATE orders SET id = 30 WHERE id = 3",  # the key changes: a delete and a create
    )
    second = runner.run("maria", 0)
    assert second.state == "SUCCEEDED", second.message
    assert runtime.connectors.last_runs("maria", 1)[0]["stats"]["source"]["binlog_behind_bytes"] > 0
    events = _events(runtime, spark, topic)[3:]
    ops = [(e["op"], (e["after"] or e["before"] or {}).get("id"), e["__tombstone"]) for e in events]
    assert ops == [
        ("c", 4, False),
        ("u", 1, False),
        ("d", 2, False),
        (None, None, True),
        ("d", 3, False),
        (None, None, True),
        ("c", 30, False),
    ]
    insert, update, delete = events[:3]
    assert insert["after"]["tags"] == "a,b" and insert["source"]["gtid"] and insert["source"]["snapshot"] == "false"
    assert update["before"]["label"] == "one" and update["after"]["label"] == "ONE"  # full row image
    assert delete["before"]["label"] == "two" and events[3]["__key"] == {"id": 2}
    notes = _events(runtime, spark, f"{_db(runtime, mariadb_db)}.notes")[2:]
    assert [e["op"] for e in notes] == ["u", "d", None]
    position = runtime.connectors.positions("maria").offset({"server": "maria"})
    assert position is not None and position["gtid"] != snapshot["gtid"]

    # nothing new: the run reads nothing and the position stays
    assert runner.run("maria", 0).state == "SUCCEEDED"
    assert len(_events(runtime, spark, topic)) == 10


def test_a_run_that_fails_before_its_commit_is_read_again(
    mariadb_db: MariaDbServer, runtime: Runtime, spark: Any, source: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    runner = make_runner(runtime, spark)
    assert runner.run("maria", 0).state == "SUCCEEDED"
    mariadb_db.execute(
        f"USE `{mariadb_db.database}`",
        "INSERT INTO orders (id, label) VALUES (10, 'ten')",
        "DELETE FROM orders WHERE id = 3",
    )

    def refused(*_: Any, **__: Any) -> None:
        raise RuntimeError("metadata store gone mid-commit")

    with monkeypatch.context() as patch:
        patch.setattr(runtime.runs, "commit", refused)
        assert make_runner(runtime, spark).run("maria", 0).state == "FAILED"
    topic = f"{_db(runtime, mariadb_db)}.orders"
    assert len(_events(runtime, spark, topic)) == 3

    again = make_runner(runtime, spark).run("maria", 0)
    assert again.state == "SUCCEEDED", again.message
    ops = [(e["op"], (e["after"] or e["before"] or {}).get("id")) for e in _events(runtime, spark, topic)]
    assert ops[3:] == [("c", 10), ("d", 3), (None, None)]  # read again, once


def test_a_purged_binlog_is_an_error_that_names_the_fix(
    mariadb_db: MariaDbServer, runtime: Runtime, spark: Any, source: dict[str, str]
) -> None:
    runner = make_runner(runtime, spark)
    assert runner.run("maria", 0).state == "SUCCEEDED"
    mariadb_db.execute(f"INSERT INTO `{mariadb_db.database}`.orders (id) VALUES (20)", "FLUSH BINARY LOGS")
    (current,) = [row[0] for row in mariadb_db.rows("SHOW MASTER STATUS")]
    deadline = time.monotonic() + 20
    while len(mariadb_db.rows("SHOW BINARY LOGS")) > 1:  # kept until InnoDB's checkpoint passes it
        assert time.monotonic() < deadline, "the server kept the old binlog"
        mariadb_db.execute(f"PURGE BINARY LOGS TO '{current}'")
        time.sleep(0.2)
    lost = runner.run("maria", 0)
    assert lost.state == "FAILED" and "purged" in lost.message and "offsets reset" in lost.message


def test_server_settings_are_checked_at_validation(mariadb_db: MariaDbServer) -> None:
    connector = MariaDbCdcSourceConnector()
    config = MariaDbCdcConfig.model_validate({"name": "m", **_config(mariadb_db)})
    assert connector.validate(config) == {}
    mariadb_db.execute("SET GLOBAL binlog_format = 'MIXED'", "SET GLOBAL binlog_row_image = 'MINIMAL'")
    try:
        problems = connector.validate(config)["database.hostname"]
    finally:
        mariadb_db.execute("SET GLOBAL binlog_format = 'ROW'", "SET GLOBAL binlog_row_image = 'FULL'")
    assert any("binlog_format is MIXED: set binlog_format=ROW" in p for p in problems)
    assert any("binlog_row_image is MINIMAL: set binlog_row_image=FULL" in p for p in problems)

    wrong = MariaDbCdcConfig.model_validate({"name": "m", **_config(mariadb_db), "database.password": "nope"})
    assert "access denied" in connector.validate(wrong)["database.password"][0]
    gone = MariaDbCdcConfig.model_validate({"name": "m", **_config(mariadb_db), "database.port": "1"})
    assert "cannot reach" in connector.validate(gone)["database.hostname"][0]


def test_mariadb_to_postgresql_converges_deletes_included(
    mariadb_db: MariaDbServer,
    runtime: Runtime,
    spark: Any,
    target: Database,  # noqa: F811
) -> None:
    table = "SELECT id, label, amount FROM {} ORDER BY id"
    db = mariadb_db.database
    mariadb_db.execute(
        f"CREATE TABLE `{db}`.items (id int PRIMARY KEY, label varchar(40) NOT NULL, amount decimal(10,2))",
        f"INSERT INTO `{db}`.items SELECT seq, concat('item ', seq), seq * 1.25 FROM seq_1_to_50",
    )
    runtime.create_connector("maria", {**_config(mariadb_db), "table.include.list": rf"{db}\.items"})
    runtime.create_connector("sink", replica_sink(target.jdbc_url, f"maria.{db}.items"))
    runner = make_runner(runtime, spark)
    changes = [
        "INSERT INTO {t} VALUES (51, 'new', 1), (52, 'short-lived', 2)",
        "UPDATE {t} SET label = 'changed', amount = NULL WHERE id BETWEEN 1 AND 5",
        "DELETE FROM {t} WHERE id IN (10, 11, 12, 52)",
        "DELETE FROM {t} WHERE id = 20",
        "INSERT INTO {t} VALUES (20, 'reborn', 20)",
        "UPDATE {t} SET label = concat(label, '+') WHERE id = 1",
        "UPDATE {t} SET id = 300 WHERE id = 30",
    ]
    for step in ([], changes, ["DELETE FROM {t} WHERE id > 25"]):
        mariadb_db.execute(*(s.format(t=f"`{db}`.items") for s in step))
        for name in ("maria", "sink"):
            result = runner.run(name, 0)
            assert result.state == "SUCCEEDED", result.message
        expected = [(i, label, amount) for i, label, amount in mariadb_db.rows(table.format(f"`{db}`.items"))]
        assert target.rows(table.format("items")) == expected


def test_columns_added_and_dropped_between_runs_follow_the_log(
    mariadb_db: MariaDbServer, runtime: Runtime, spark: Any, source: dict[str, str]
) -> None:
    runner = make_runner(runtime, spark)
    assert runner.run("maria", 0).state == "SUCCEEDED"
    notes = f"`{mariadb_db.database}`.notes"
    mariadb_db.execute(
        f"INSERT INTO {notes} VALUES (10, 'before')",
        f"ALTER TABLE {notes} ADD COLUMN score int",
        f"INSERT INTO {notes} VALUES (11, 'added', 7)",
        f"ALTER TABLE {notes} DROP COLUMN body",
        f"INSERT INTO {notes} VALUES (12, 8)",
    )
    result = runner.run("maria", 0)
    assert result.state == "SUCCEEDED", result.message
    events = _events(runtime, spark, f"{_db(runtime, mariadb_db)}.notes")[2:]
    # each row as the log wrote it (the binlog's own column names), in the union of the columns
    assert [e["after"] for e in events] == [
        {"id": 10, "score": None, "body": "before"},
        {"id": 11, "score": 7, "body": "added"},
        {"id": 12, "score": 8, "body": None},
    ]
