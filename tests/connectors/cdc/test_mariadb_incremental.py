"""Incremental snapshots of the MariaDB CDC source (Debezium's signals, DBLog's watermarks, read-only:
the snapshot's own binlog position is the low watermark): a table re-read in chunks by primary key
while its changes keep streaming; the target (a JDBC replica on PostgreSQL) equals the source
afterwards, and a chunk row never overwrites a change newer than it."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from connect_core.connectors.cdc.mariadb import _incremental
from connect_core.runtime.context import Runtime
from connect_core.runtime.management.local import LocalManagement
from connect_core.runtime.topics.segments import read_topics
from connect_core.sdk.errors import ConfigError
from connect_core.sdk.records import TopicPartition
from connect_core.sdk.testing import faults
from connect_core.testing.servers import MariaDbServer
from tests.conftest import make_runner
from tests.connectors.cdc._pipelines import replica_sink
from tests.connectors.jdbc_helpers import Database, target  # noqa: F401  (fixtures)

_ROWS = "SELECT id, label, qty FROM items ORDER BY id"


def _capture(db: MariaDbServer, tables: str, **extra: str) -> dict[str, str]:
    return {
        "connector.class": "io.debezium.connector.mariadb.MariaDbConnector",
        "database.hostname": db.host,
        "database.port": str(db.port),
        "database.user": db.user,
        "database.password": db.password,
        "database.include.list": db.database,
        "table.include.list": tables,
        "topic.prefix": "maria",
        "incremental.snapshot.chunk.size": "7",
        "incremental.snapshot.max.rows.per.run": "30",
        **extra,
    }


def _pipeline(db: MariaDbServer, runtime: Runtime, spark: Any, target: Database) -> Any:  # noqa: F811
    db.execute(
        "CREATE TABLE items (id int PRIMARY KEY, label varchar(40), qty int)",
        "INSERT INTO items SELECT seq, concat('item ', seq), seq FROM seq_1_to_100",
        "CREATE TABLE bare (x int)",  # no primary key
    )
    runtime.create_connector("cdc", _capture(db, rf"{db.database}\.(items|bare)"))
    runtime.create_connector("sink", replica_sink(target.jdbc_url, f"maria.{db.database}.items"))
    return make_runner(runtime, spark)


def _sync(runner: Any, *names: str) -> dict[str, Any]:
    results = {}
    for name in names or ("cdc", "sink"):
        result = runner.run(name, 0)
        assert result.state == "SUCCEEDED", result.message
        results[name] = result
    return results


def _progress(runtime: Runtime) -> dict[str, Any] | None:
    found = runtime.connectors.positions("cdc").offset({"server": "maria"})
    progress = (found or {}).get(_incremental.STATE)
    return dict(progress) if progress else None


def _signal(runtime: Runtime, kind: str, *tables: str) -> None:
    data = {"data-collections": list(tables)} if tables else {}
    LocalManagement(runtime).send_signal("cdc", None, kind, data)


def _events(runtime: Runtime, spark: Any, topic: str) -> list[dict[str, Any]]:
    segments = runtime.topics.segments_after({TopicPartition(topic, 0): 0})
    rows = read_topics(spark, segments)[topic].orderBy("__offset").collect() if segments else []
    return [r.asDict(recursive=True) for r in rows]


def _converge(runtime: Runtime, runner: Any, db: MariaDbServer, target: Database) -> None:  # noqa: F811
    while _progress(runtime) is not None:
        _sync(runner)
    assert target.rows(_ROWS) == db.rows(_ROWS)


def test_a_lost_table_is_re_read_while_changes_stream(
    mariadb_db: MariaDbServer,
    runtime: Runtime,
    spark: Any,
    target: Database,  # noqa: F811
) -> None:
    runner = _pipeline(mariadb_db, runtime, spark, target)
    _sync(runner)
    target.execute("DELETE FROM items WHERE id % 3 = 0")  # the sink's target lost rows
    _signal(runtime, "execute-snapshot", f"{mariadb_db.database}.items")
    runs = 0
    while True:
        # changes keep coming between the runs: updates, deletes, a key moved, new rows
        mariadb_db.execute(
            f"UPDATE items SET qty = qty + 1000 WHERE id % 10 = {runs % 10}",
            f"DELETE FROM items WHERE id = {90 - runs}",
            f"UPDATE items SET id = id + 1000 WHERE id = {50 + runs}",
            f"INSERT INTO items VALUES ({200 + runs}, 'new', 0)",
        )
        stats = _sync(runner)["cdc"].source
        runs += 1
        if _progress(runtime) is None:
            break
        assert stats["CurrentTable"] == f"{mariadb_db.database}.items" and stats["SnapshotRunning"] is True
        assert runs < 20, _progress(runtime)
    assert runs >= 4  # 100 rows in chunks of 7, 30 rows a run
    assert target.rows(_ROWS) == mariadb_db.rows(_ROWS)
    assert runtime.connectors.signals.pending("cdc") == []  # consumed by the commits


def test_a_chunk_row_changed_after_its_snapshot_never_overwrites_the_change(
    mariadb_db: MariaDbServer,
    runtime: Runtime,
    spark: Any,
    target: Database,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    runner = _pipeline(mariadb_db, runtime, spark, target)
    _sync(runner)
    # committed after the previous run, before the chunk's snapshot: older than its rows, kept
    mariadb_db.execute("UPDATE items SET label = 'older' WHERE id IN (1, 2)")
    _signal(runtime, "execute-snapshot", f"{mariadb_db.database}.items")
    read = _incremental.read_chunks

    def then_change(*args: Any, **kwargs: Any) -> Any:
        chunk = read(*args, **kwargs)
        # committed after the chunk's snapshot, before the run's binlog end: newer than the chunk's rows
        mariadb_db.execute(
            "UPDATE items SET label = 'newer' WHERE id IN (2, 5)",
            "DELETE FROM items WHERE id = 3",
            "UPDATE items SET id = 1007 WHERE id = 7",
        )
        return chunk

    monkeypatch.setattr(_incremental, "read_chunks", then_change)
    result = _sync(runner)["cdc"]
    monkeypatch.undo()
    assert result.source["RowsScanned"] == 30 and result.source["ChunksRead"] == 5
    events = _events(runtime, spark, f"maria.{mariadb_db.database}.items")[100:]
    snapshot = [e for e in events if e["op"] == "r"]
    assert all(e["source"]["snapshot"] == "incremental" for e in snapshot)
    read_keys = {e["after"]["id"] for e in snapshot}
    assert read_keys == set(range(1, 31)) - {2, 3, 5, 7}  # per key: every one the stream changed since dropped
    assert events.index(snapshot[0]) > max(i for i, e in enumerate(events) if e["op"] != "r")  # after the stream
    assert {e["after"]["label"] for e in snapshot if e["after"]["id"] == 1} == {"older"}
    assert target.rows("SELECT id, label FROM items WHERE id IN (1, 2, 3, 5, 7, 1007) ORDER BY id") == [
        (1, "older"),
        (2, "newer"),
        (5, "newer"),
        (1007, "item 7"),
    ]
    _converge(runtime, runner, mariadb_db, target)


def test_a_truncate_after_the_chunks_snapshot_drops_its_rows(
    mariadb_db: MariaDbServer,
    runtime: Runtime,
    spark: Any,
    target: Database,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    runner = _pipeline(mariadb_db, runtime, spark, target)
    _sync(runner, "cdc")
    _signal(runtime, "execute-snapshot", f"{mariadb_db.database}.items")
    read = _incremental.read_chunks

    def then_truncate(*args: Any, **kwargs: Any) -> Any:
        chunk = read(*args, **kwargs)
        mariadb_db.execute("TRUNCATE TABLE items", "INSERT INTO items VALUES (4, 'after', 0)")
        return chunk

    monkeypatch.setattr(_incremental, "read_chunks", then_truncate)
    assert _sync(runner, "cdc")["cdc"].source["RowsScanned"] == 30
    events = _events(runtime, spark, f"maria.{mariadb_db.database}.items")[100:]
    assert [(e["op"], e["after"]["id"], e["after"]["label"]) for e in events] == [("c", 4, "after")]


def test_a_run_killed_before_its_commit_reads_the_same_chunk_again(
    mariadb_db: MariaDbServer,
    runtime: Runtime,
    spark: Any,
    target: Database,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    runner = _pipeline(mariadb_db, runtime, spark, target)
    _sync(runner)
    target.execute("DELETE FROM items")
    _signal(runtime, "execute-snapshot", f"{mariadb_db.database}.items")

    def crash(at: str) -> None:
        if at == "before_commit":
            raise RuntimeError("killed before the commit")

    monkeypatch.setattr(faults, "checkpoint", crash)
    assert runner.run("cdc", 0).state == "FAILED"
    monkeypatch.undo()
    assert _progress(runtime) is None and len(runtime.connectors.signals.pending("cdc")) == 1  # nothing moved
    _sync(runner)
    first = _progress(runtime)
    assert first is not None and first["rows"] == 30 and first["last_key"] == [30] and first["max_key"] == [100]
    assert target.rows("SELECT min(id), max(id), count(*) FROM items") == [(1, 30, 30)]
    _converge(runtime, runner, mariadb_db, target)


def test_chunk_values_equal_the_streamed_ones(
    mariadb_db: MariaDbServer, runtime: Runtime, spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A composite key of a decimal, a datetime, a timestamp, a BINARY(n) (the log drops its trailing
    zero bytes) and a CHAR(n) (blanks): every chunk row's key equals its streamed event's, and every
    value the row a query reads equals the log's."""
    mariadb_db.execute(
        "CREATE TABLE vals (d decimal(12,3), at datetime(6), ts timestamp(3), bn binary(4), ch char(4),"
        " flag tinyint(1), yes boolean, nothing int NULL, money decimal(30,10), raw binary(3), note char(5),"
        " bits bit(5), day date, PRIMARY KEY (d, at, ts, bn, ch))",
        "INSERT INTO vals VALUES"
        " (1.5, '2024-01-02 03:04:05.123456', '2024-01-01 08:00:00.250', 'ab', 'x ', 1, true, NULL,"
        " 12345678901234567890.0123456789, 'z', 'pad ', b'101', '2024-05-06'),"
        " (-2.25, '1999-12-31 23:59:59', '2038-01-01 00:00:00', x'00', '', 0, false, NULL, 0, x'000000', '',"
        " b'0', '1970-01-01'),"
        " (3, '2024-01-02 03:04:05', '2024-01-01 08:00:00', 'abcd', 'abcd', 127, NULL, 5, -1.5, 'abc', 'é', NULL,"
        " NULL)",
    )
    runtime.create_connector("cdc", _capture(mariadb_db, rf"{mariadb_db.database}\.vals"))
    runner = make_runner(runtime, spark)
    _sync(runner, "cdc")
    topic = f"maria.{mariadb_db.database}.vals"
    initial = {tuple(e["__key"].values()): e["after"] for e in _events(runtime, spark, topic)}
    assert len(initial) == 3
    _signal(runtime, "execute-snapshot", f"{mariadb_db.database}.vals")
    read, chunks = _incremental.read_chunks, []

    def then_touch(*args: Any, **kwargs: Any) -> Any:
        chunk = read(*args, **kwargs)
        mariadb_db.execute("UPDATE vals SET nothing = 1")  # newer than every chunk row: each must be dropped
        chunks.append(chunk)
        return chunk

    monkeypatch.setattr(_incremental, "read_chunks", then_touch)
    _sync(runner, "cdc")
    monkeypatch.undo()
    assert [len(c.rows) for c in chunks] == [3]
    streamed = _events(runtime, spark, topic)[3:]
    assert [e["op"] for e in streamed] == ["u", "u", "u"]  # the keys compared equal: no chunk row left
    assert {tuple(e["__key"].values()): e["before"] for e in streamed} == initial  # and every value
    _signal(runtime, "execute-snapshot", f"{mariadb_db.database}.vals")
    _sync(runner, "cdc")
    reread = _events(runtime, spark, topic)[6:]
    assert [e["source"]["snapshot"] for e in reread] == ["incremental"] * 3
    assert {tuple(e["__key"].values()): e["after"] for e in reread} == {
        tuple(e["__key"].values()): e["after"] for e in streamed
    }
    assert reread[0]["after"]["bn"] in (b"ab\x00\x00", b"\x00\x00\x00\x00", b"abcd")


def test_stop_pause_resume_and_a_table_without_a_key(
    mariadb_db: MariaDbServer,
    runtime: Runtime,
    spark: Any,
    target: Database,  # noqa: F811
    caplog: pytest.LogCaptureFixture,
) -> None:
    runner = _pipeline(mariadb_db, runtime, spark, target)
    db = mariadb_db.database
    mariadb_db.execute("CREATE TABLE more (id int PRIMARY KEY)", "INSERT INTO more SELECT seq FROM seq_1_to_5")
    runtime.update_connector("cdc", _capture(mariadb_db, rf"{db}\.(items|bare|more)"))
    _sync(runner, "cdc")
    with pytest.raises(ConfigError, match="has no key to read it in chunks by") as refused:  # at the door
        _signal(runtime, "execute-snapshot", f"{db}.bare", f"{db}.nope")
    assert "`" + db + ".nope` is not a captured table" in str(refused.value)
    assert runtime.connectors.signals.pending("cdc") == []
    # one that got past the door (queued before the table lost its key): logged and consumed by the run
    runtime.connectors.signals.send("cdc", "s", "execute-snapshot", {"data-collections": [f"{db}.bare"]})
    with caplog.at_level(logging.INFO):
        _sync(runner, "cdc")
    assert f"`{db}.bare` has no key to read it in chunks by" in caplog.text
    assert _progress(runtime) is None and runtime.connectors.signals.pending("cdc") == []  # refused, consumed

    _signal(runtime, "execute-snapshot", f"{db}.items", f"{db}.more")
    _sync(runner, "cdc")
    assert _progress(runtime) == {**(_progress(runtime) or {}), "table": f"{db}.items", "queue": [f"{db}.more"]}
    _signal(runtime, "pause-snapshot")
    paused = _sync(runner, "cdc")["cdc"].source
    assert paused["SnapshotPaused"] is True and paused["RowsScanned"] == 30  # nothing read while paused
    assert paused["RemainingTableCount"] == 2
    _signal(runtime, "resume-snapshot")
    assert _sync(runner, "cdc")["cdc"].source["RowsScanned"] == 60
    _signal(runtime, "stop-snapshot", f"{db}.items")
    _sync(runner, "cdc")  # items stopped: `more` is read, to its end
    assert _progress(runtime) is None
    events = _events(runtime, spark, f"maria.{db}.more")
    assert [e["source"]["snapshot"] for e in events] == ["true"] * 4 + ["last"] + ["incremental"] * 5


def test_a_stream_cut_short_of_the_chunks_snapshot_reads_the_chunk_again(
    mariadb_db: MariaDbServer,
    runtime: Runtime,
    spark: Any,
    target: Database,  # noqa: F811
) -> None:
    """A run whose stream stops at `max.batch.size` before the chunk's snapshot position keeps no chunk
    row: they would come before changes (older than them) the next run streams."""
    runner = _pipeline(mariadb_db, runtime, spark, target)
    limits = {"max.batch.size": "4", "incremental.snapshot.max.rows.per.run": "100"}
    runtime.update_connector("cdc", _capture(mariadb_db, rf"{mariadb_db.database}\.(items|bare)", **limits))
    _sync(runner)
    target.execute("DELETE FROM items WHERE id <= 10")
    mariadb_db.execute(*(f"UPDATE items SET qty = -qty WHERE id = {i}" for i in range(1, 11)))  # a backlog of 10
    _signal(runtime, "execute-snapshot", f"{mariadb_db.database}.items")
    cut = _sync(runner)["cdc"]
    assert cut.source["RowsScanned"] == 0 and _progress(runtime) is not None  # queued, not read yet
    assert not any(e["op"] == "r" for e in _events(runtime, spark, f"maria.{mariadb_db.database}.items")[100:])
    _converge(runtime, runner, mariadb_db, target)


def test_key_values_keep_their_type_in_the_position() -> None:
    """The last key read, as the committed position's JSON holds it, binds as the value it was read as;
    one edited into something else fails the run with the fix."""
    import datetime as dt
    import json
    from decimal import Decimal

    from connect_core.sdk.errors import FatalError

    values = [7, "ab ", Decimal("-1.250"), dt.datetime(2024, 1, 2, 3, 4, 5, 6), dt.date(2024, 5, 6)]
    values += [dt.timedelta(hours=-1, microseconds=5), b"ab\x00\x00", 2.5, None]
    stored = json.loads(json.dumps([_incremental.encode_key(v) for v in values]))
    assert [_incremental.decode_key(v) for v in stored] == values
    for wrong in ([{"decimal": "x"}], [{"bytes": "zz"}], [{"what": 1}], [1, 2], "1"):
        with pytest.raises(FatalError, match="connect snapshot NAME --stop"):
            _incremental._stored_key({"table": "d.t", "last_key": wrong}, "last_key", 1)


def test_a_signal_row_inserted_into_the_signal_table_starts_a_snapshot(
    mariadb_db: MariaDbServer,
    runtime: Runtime,
    spark: Any,
    target: Database,  # noqa: F811
) -> None:
    """The `source` channel: a row of `signal.data.collection` is a signal, streamed from the binlog;
    the table's changes go to no topic."""
    db = mariadb_db.database
    runner = _pipeline(mariadb_db, runtime, spark, target)
    mariadb_db.execute("CREATE TABLE dbz_signal (id varchar(42) PRIMARY KEY, type varchar(32) NOT NULL, data text)")
    channels = {
        "signal.enabled.channels": "rest,source",
        "signal.data.collection": f"{db}.dbz_signal",
        "incremental.snapshot.max.rows.per.run": "100",
    }
    runtime.update_connector("cdc", _capture(mariadb_db, rf"{db}\.(items|dbz_signal)", **channels))
    _sync(runner)
    target.execute("DELETE FROM items WHERE id > 50")
    mariadb_db.execute(
        "INSERT INTO dbz_signal VALUES ('s-1', 'execute-snapshot',"
        f' \'{{"data-collections": ["{db}.items"], "type": "incremental"}}\')'
    )
    _sync(runner)
    assert (_progress(runtime) or {}).get("table") == f"{db}.items"  # acted on by the run that streamed it
    _converge(runtime, runner, mariadb_db, target)
    assert not runtime.topics.partitions(f"maria.{db}.dbz_signal")


@pytest.mark.parametrize(
    ("ddl", "rows"),
    [
        # a query gives a float rounded (16777217 reads back as 16777200): `k > last` would skip rows
        ("CREATE TABLE fz (k FLOAT PRIMARY KEY, n int)", "INSERT INTO fz SELECT 16777000 + seq, seq FROM seq_1_to_20"),
        # an enum sorts by its position in the list, but `k > 'm'` compares text
        (
            "CREATE TABLE fz (k ENUM('z','a','m','b') PRIMARY KEY, n int)",
            "INSERT INTO fz VALUES ('z',1),('a',2),('m',3)",
        ),
    ],
    ids=["float", "enum"],
)
def test_a_key_whose_order_no_query_follows_is_not_read_in_chunks(
    mariadb_db: MariaDbServer, runtime: Runtime, spark: Any, ddl: str, rows: str, caplog: pytest.LogCaptureFixture
) -> None:
    mariadb_db.execute(ddl, rows)
    runtime.create_connector("cdc", _capture(mariadb_db, rf"{mariadb_db.database}\.fz"))
    runner = make_runner(runtime, spark)
    _sync(runner, "cdc")
    with pytest.raises(ConfigError, match="has no key to read it in chunks by"):  # at the door
        _signal(runtime, "execute-snapshot", f"{mariadb_db.database}.fz")
    # and by the run, for one that got past it (the source channel's are checked only there)
    runtime.connectors.signals.send("cdc", "s", "execute-snapshot", {"data-collections": [f"{mariadb_db.database}.fz"]})
    _sync(runner, "cdc")
    assert _progress(runtime) is None  # refused, not read with rows skipped
    assert "has no key to read it in chunks by" in caplog.text
