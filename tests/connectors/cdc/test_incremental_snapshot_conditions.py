"""Incremental snapshots of the PostgreSQL CDC source with Debezium's options: a keyless table read
by its `surrogate-key`, a filter (`additional-conditions`) that only a plain predicate passes, and
signals checked against the server before they are queued (a 400 naming each bad table, a 503 when
the server does not answer in time)."""

from __future__ import annotations

import socket
import time
from typing import Any

import pytest

from connect_core.connectors.cdc.config import PostgresCdcConfig
from connect_core.connectors.cdc.postgres import PostgresCdcSourceConnector, _incremental
from connect_core.rest.errors import answer_for
from connect_core.runtime.context import Runtime
from connect_core.runtime.management.local import LocalManagement
from connect_core.sdk import Signal
from connect_core.sdk.errors import ConfigError, RetriableError
from connect_core.testing.servers import PgServer
from tests.conftest import make_runner
from tests.connectors.cdc._pipelines import pg_capture, replica_sink
from tests.connectors.jdbc_helpers import Database, target  # noqa: F401  (fixtures)
from tests.rest.conftest import make_api  # noqa: F401  (fixture)

_SPARK: list[Any] = []


@pytest.fixture(autouse=True)
def _spark(spark: Any) -> None:
    _SPARK[:] = [spark]


def _sync(runner: Any) -> None:
    for name in ("cdc", "sink"):
        result = runner.run(name, 0)
        assert result.state == "SUCCEEDED", result.message


def _progress(runtime: Runtime) -> dict[str, Any] | None:
    (offset,) = [dict(p.offset) for p in runtime.connectors.positions("cdc").values()]
    found = offset.get(_incremental.STATE)
    return dict(found) if found else None


def _tables(pg_db: PgServer) -> None:
    pg_db.execute(
        "CREATE TABLE items (id int PRIMARY KEY, label text, qty int)",
        "INSERT INTO items SELECT g, 'item ' || g, g FROM generate_series(1, 60) g",
        # no primary key: read by `code`, its changes carry their old values (REPLICA IDENTITY FULL)
        "CREATE TABLE things (code text NOT NULL, label text, qty int)",
        "CREATE UNIQUE INDEX things_code ON things (code)",
        "ALTER TABLE things REPLICA IDENTITY FULL",
        "INSERT INTO things SELECT 'c' || lpad(g::text, 3, '0'), 'thing ' || g, g FROM generate_series(1, 60) g",
        "CREATE TABLE loose (code text UNIQUE, n int)",  # nullable: no order that reaches every row
        "CREATE TABLE bare (n int)",  # no key, no unique column
        "CREATE TABLE plain (code text NOT NULL UNIQUE, n int)",  # keyless, REPLICA IDENTITY DEFAULT
        "CREATE TABLE elsewhere (id int PRIMARY KEY)",  # not captured
    )


def _connector(pg_db: PgServer, runtime: Runtime, **extra: Any) -> None:
    runtime.create_connector(
        "cdc",
        pg_capture(
            pg_db,
            "public.items,public.things,public.loose,public.bare,public.plain",
            **{"incremental.snapshot.chunk.size": "7", "incremental.snapshot.max.rows.per.run": "20", **extra},
        ),
    )


def _things_sink(jdbc_url: str) -> dict[str, Any]:
    """Keyless events have no record key: upserted by `code` from the value, deletes kept as rows
    marked `__deleted` (a chunk row that revived one would show as a stale live row)."""
    return replica_sink(
        jdbc_url,
        "srv.public.things",
        table="things",
        **{
            "pk.mode": "record_value",
            "pk.fields": "code",
            "delete.enabled": "false",
            "transforms.unwrap.delete.handling.mode": "rewrite",
        },
    )


def test_a_keyless_table_is_re_read_by_its_surrogate_key_while_changes_stream(
    pg_db: PgServer,
    runtime: Runtime,
    target: Database,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _tables(pg_db)
    _connector(pg_db, runtime)
    runtime.create_connector("sink", _things_sink(target.jdbc_url))
    runner = make_runner(runtime, _SPARK[0])
    _sync(runner)
    live = "SELECT code, label, qty FROM things WHERE NOT coalesce(__deleted::boolean, false) ORDER BY code"
    source = "SELECT code, label, qty FROM things ORDER BY code"
    assert target.rows(live) == pg_db.rows(source)
    target.execute("DELETE FROM things WHERE qty % 4 = 0")  # the target lost rows
    LocalManagement(runtime).send_signal(
        "cdc", "k-1", "execute-snapshot", {"data-collections": ["public.things"], "surrogate-key": "code"}
    )
    read = _incremental.read_chunks
    races = iter(range(100))

    def then_change(*args: Any, **kwargs: Any) -> Any:
        chunk = read(*args, **kwargs)
        n = next(races)
        # committed after the chunk's snapshot: newer than its rows (a key move is left out: upserting
        # by a value column, the sink cannot apply one)
        pg_db.execute(
            f"UPDATE things SET label = 'newer {n}' WHERE qty = {3 + n * 10}",
            f"DELETE FROM things WHERE qty = {5 + n * 10}",
            f"INSERT INTO things VALUES ('n{n}', 'new', 0)",
        )
        return chunk

    monkeypatch.setattr(_incremental, "read_chunks", then_change)
    runs = 0
    while True:
        _sync(runner)
        runs += 1
        progress = _progress(runtime)
        if progress is None:
            break
        assert progress["key"] == ["code"] and progress["options"]["public.things"] == {"surrogate-key": "code"}
        assert runs < 10, progress
    monkeypatch.undo()
    assert 3 <= runs <= 4  # 60 rows (less the deleted), 20 a run; a run ending on the last row finds the end next
    assert target.rows(live) == pg_db.rows(source)  # no stale row, none missing
    newer = "SELECT count(*) FROM things WHERE label LIKE 'newer%'"
    assert target.rows(newer + " AND NOT __deleted::boolean") == pg_db.rows(newer) == [(runs,)]  # each race won


def test_a_filter_reads_only_the_rows_it_matches(
    pg_db: PgServer,
    runtime: Runtime,
    target: Database,  # noqa: F811
) -> None:
    _tables(pg_db)
    _connector(pg_db, runtime)
    runtime.create_connector("sink", replica_sink(target.jdbc_url, "srv.public.items"))
    runner = make_runner(runtime, _SPARK[0])
    _sync(runner)
    target.execute("DELETE FROM items")
    LocalManagement(runtime).send_signal(
        "cdc",
        "f-1",
        "execute-snapshot",
        {
            "data-collections": ["public.items"],
            "additional-conditions": [
                {"data-collection": "public.items", "filter": "qty > 40 AND label LIKE 'item %' OR id IN (1, 2)"}
            ],
        },
    )
    _sync(runner)
    progress = _progress(runtime)
    assert progress is not None
    # kept as checked and written back, so a restarted run reads the same rows
    assert progress["options"]["public.items"]["filter"] == '"qty" > 40 AND "label" LIKE \'item %\' OR "id" IN (1, 2)'
    while _progress(runtime) is not None:
        _sync(runner)
    query = "SELECT id, label, qty FROM items ORDER BY id"
    assert target.rows(query) == [r for r in pg_db.rows(query) if r[2] > 40 or r[0] in (1, 2)]


_HOSTILE = [
    ("1=1; DROP TABLE items", "no `;`"),
    ("pg_sleep(10) > 0", "functions are not allowed"),
    ("(SELECT 1) = 1", "subqueries"),
    ("id IN (SELECT id FROM elsewhere)", "subqueries"),
    ("id = 1 -- comment", "comment"),
    ("id = 1 /* comment */", "comment"),
    ("ctid > '(0,0)'", "system column"),
    ("elsewhere.id = 1", "names another table"),
    ("nope = 1", "`nope` is not a column"),
    ("qty > 'many'", "does not run on the server"),
    ("id > '1'::regclass", "not allowed"),
    ("x" * 10_000, "at most 2000"),
]


def test_a_hostile_filter_is_refused_and_nothing_queued(
    pg_db: PgServer,
    runtime: Runtime,
    make_api: Any,  # noqa: F811
) -> None:
    import httpx

    _tables(pg_db)
    _connector(pg_db, runtime)
    api = make_api()
    with httpx.Client(base_url=api.url, timeout=30) as client:
        for text, reason in _HOSTILE:
            condition = {"data-collection": "public.items", "filter": text}
            body = {
                "type": "execute-snapshot",
                "data": {"data-collections": ["public.items"], "additional-conditions": [condition]},
            }
            refused = client.post("/connectors/cdc/signals", json=body)
            assert refused.status_code == 400, (text, refused.text)
            assert reason in refused.json()["message"], (text, refused.text)
    assert runtime.connectors.signals.pending("cdc") == []
    assert pg_db.rows("SELECT count(*) FROM items") == [(60,)]


def test_tables_the_snapshot_cannot_read_are_named_at_the_door(pg_db: PgServer, runtime: Runtime) -> None:
    _tables(pg_db)
    _connector(pg_db, runtime)
    manage = LocalManagement(runtime)
    with pytest.raises(ConfigError) as refused:
        manage.send_signal(
            "cdc",
            None,
            "execute-snapshot",
            {"data-collections": ["public.items", "public.nope", "public.elsewhere", "public.bare", "public.things"]},
        )
    message = str(refused.value)
    assert "`public.nope` does not exist" in message
    assert "`public.elsewhere` is not captured" in message
    assert "`public.bare` has no primary key" in message and "`public.things` has no primary key" in message
    assert "public.items" not in message
    for surrogate, table, why in (
        ("code", "public.loose", "may hold NULLs"),  # a NULL sorts apart: those rows would be skipped
        ("n", "public.bare", "no unique index over `n`"),
        ("code", "public.plain", "REPLICA IDENTITY FULL"),
        ("nope", "public.things", "has no column `nope`"),
    ):
        with pytest.raises(ConfigError, match=why) as refused:
            manage.send_signal(
                "cdc", None, "execute-snapshot", {"data-collections": [table], "surrogate-key": surrogate}
            )
        assert "data.surrogate-key" in refused.value.errors
    assert runtime.connectors.signals.pending("cdc") == []
    # a surrogate key a table with a primary key is read by: taken
    manage.send_signal("cdc", None, "execute-snapshot", {"data-collections": ["public.items"], "surrogate-key": "id"})
    assert len(runtime.connectors.signals.pending("cdc")) == 1


def test_a_surrogate_key_that_loses_not_null_mid_snapshot_stops_its_read(
    pg_db: PgServer,
    runtime: Runtime,
    target: Database,  # noqa: F811
) -> None:
    """Rows with a NULL key would be skipped by the chunks' key order: the read stops instead."""
    _tables(pg_db)
    _connector(pg_db, runtime)
    runtime.create_connector("sink", _things_sink(target.jdbc_url))
    runner = make_runner(runtime, _SPARK[0])
    _sync(runner)
    LocalManagement(runtime).send_signal(
        "cdc", None, "execute-snapshot", {"data-collections": ["public.things"], "surrogate-key": "code"}
    )
    _sync(runner)
    progress = _progress(runtime)
    assert progress is not None and progress["last_key"] == ["c020"]
    pg_db.execute("ALTER TABLE things ALTER COLUMN code DROP NOT NULL")
    _sync(runner)
    assert _progress(runtime) is None  # given up, logged; not read with rows missing


def test_a_server_that_does_not_answer_is_a_bounded_503() -> None:
    """A host that takes the connection and never answers: the signal waits `probe.timeout.ms`, no more."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)  # never accepted: connects, and no answer ever comes
        port = silent.getsockname()[1]
        config = PostgresCdcConfig.model_validate(
            {
                "name": "cdc",
                "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
                "database.hostname": "127.0.0.1",
                "database.port": str(port),
                "database.user": "postgres",
                "database.dbname": "test",
                "topic.prefix": "srv",
                "probe.timeout.ms": "1000",
            }
        )
        started = time.monotonic()
        with pytest.raises(RetriableError, match="did not answer within 1000 ms") as failed:
            PostgresCdcSourceConnector().check_signal(
                config, Signal("s", "execute-snapshot", {"data-collections": ["public.items"]})
            )
        assert time.monotonic() - started < 5
    assert answer_for(failed.value).status == 503


def _cdc(runner: Any) -> None:
    result = runner.run("cdc", 0)
    assert result.state == "SUCCEEDED", result.message


def _items(pg_db: PgServer, runtime: Runtime, **extra: str) -> Any:
    pg_db.execute(
        "CREATE TABLE items (id int PRIMARY KEY, label text, ssn text)",
        "INSERT INTO items SELECT g, 'item ' || g, '123-45-678' || (g % 10) FROM generate_series(1, 30) g",
        "UPDATE items SET label = '7' WHERE id = 1",
    )
    runtime.create_connector(
        "cdc", pg_capture(pg_db, "public.items", **{"incremental.snapshot.chunk.size": "7", **extra})
    )
    runner = make_runner(runtime, _SPARK[0])
    _cdc(runner)
    return runner


def _filtered(where: str) -> dict[str, Any]:
    return {
        "data-collections": ["public.items"],
        "additional-conditions": [{"data-collection": "public.items", "filter": where}],
    }


def test_a_filter_may_not_read_a_masked_column(pg_db: PgServer, runtime: Runtime) -> None:
    """Its result would tell the masked values, a row at a time (or in a failed cast's message)."""
    _items(pg_db, runtime, **{"column.mask.with.3.chars": "public.items.ssn"})
    for where in ("id = 2 AND CAST(ssn AS INT) > 0", "ssn LIKE '1%'"):
        with pytest.raises(ConfigError, match="is masked") as refused:
            LocalManagement(runtime).send_signal("cdc", None, "execute-snapshot", _filtered(where))
        assert "123-45" not in str(refused.value)
    assert runtime.connectors.signals.pending("cdc") == []


def test_a_filter_that_fails_on_a_row_gives_the_table_up_and_the_stream_goes_on(
    pg_db: PgServer, runtime: Runtime, caplog: pytest.LogCaptureFixture
) -> None:
    runner = _items(pg_db, runtime)
    # planned fine (EXPLAIN evaluates no row), fails on the first label that is no number
    LocalManagement(runtime).send_signal("cdc", None, "execute-snapshot", _filtered("CAST(label AS INT) > 0"))
    pg_db.execute("INSERT INTO items VALUES (100, 'streamed', 'x')")
    _cdc(runner)
    assert _progress(runtime) is None  # given up, not failing every run
    assert "failed on a row" in caplog.text and "item 2" not in caplog.text
    pg_db.execute("INSERT INTO items VALUES (101, 'streamed', 'x')")
    _cdc(runner)  # the stream goes on


def test_a_signal_row_nested_past_the_parser_is_skipped(pg_db: PgServer, runtime: Runtime) -> None:
    pg_db.execute("CREATE TABLE dbz_signal (id varchar(42) PRIMARY KEY, type varchar(32) NOT NULL, data varchar(2048))")
    runner = _items(
        pg_db,
        runtime,
        **{
            "table.include.list": "public.items,public.dbz_signal",
            "signal.enabled.channels": "source",
            "signal.data.collection": "public.dbz_signal",
        },
    )
    pg_db.execute(f"INSERT INTO dbz_signal VALUES ('deep', 'execute-snapshot', '{'[' * 2000}')")
    _cdc(runner)
    _cdc(runner)
    assert _progress(runtime) is None


def test_a_surrogate_key_whose_index_compares_otherwise_is_refused(pg_db: PgServer, runtime: Runtime) -> None:
    """A case-insensitive column with a case-sensitive unique index: `code > 'a'` would skip 'A'."""
    pg_db.execute(
        "CREATE COLLATION ci (provider = icu, locale = 'und-u-ks-level2', deterministic = false)",
        "CREATE TABLE cz (code text COLLATE ci NOT NULL, n int)",
        'CREATE UNIQUE INDEX cz_code ON cz (code COLLATE "C")',
        "ALTER TABLE cz REPLICA IDENTITY FULL",
        "INSERT INTO cz VALUES ('a', 1), ('A', 2)",
    )
    runtime.create_connector("cdc", pg_capture(pg_db, "public.cz"))
    _cdc(make_runner(runtime, _SPARK[0]))
    with pytest.raises(ConfigError, match=r"surrogate-key|unique index"):
        LocalManagement(runtime).send_signal(
            "cdc", None, "execute-snapshot", {"data-collections": ["public.cz"], "surrogate-key": "code"}
        )
