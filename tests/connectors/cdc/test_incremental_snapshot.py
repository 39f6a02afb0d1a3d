"""Incremental snapshots of the PostgreSQL CDC source (Debezium's signals, DBLog's watermarks): a
table re-read in chunks by primary key while its changes keep streaming, asked for over REST; the
target (a JDBC replica) equals the source afterwards, and a chunk row never overwrites a change
newer than it."""

from __future__ import annotations

from typing import Any

import pytest

from connect_core.connectors.cdc.postgres import _incremental
from connect_core.runtime.context import Runtime
from connect_core.runtime.management.local import LocalManagement
from connect_core.sdk.errors import ConfigError
from connect_core.sdk.testing import faults
from connect_core.testing.servers import PgServer
from tests.conftest import make_runner
from tests.connectors.cdc._pipelines import pg_capture, replica_sink
from tests.connectors.jdbc_helpers import Database, target  # noqa: F401  (fixtures)
from tests.rest.conftest import make_api  # noqa: F401  (fixture)

_ROWS = "SELECT id, label, qty FROM items ORDER BY id"


def _pipeline(pg_db: PgServer, runtime: Runtime, target: Database, **extra: Any) -> Any:  # noqa: F811
    pg_db.execute(
        "CREATE TABLE items (id int PRIMARY KEY, label text, qty int)",
        "INSERT INTO items SELECT g, 'item ' || g, g FROM generate_series(1, 100) g",
    )
    runtime.create_connector(
        "cdc",
        pg_capture(
            pg_db,
            "public.items",
            **{
                "incremental.snapshot.chunk.size": "7",
                "incremental.snapshot.max.rows.per.run": "30",
                **extra,
            },
        ),
    )
    runtime.create_connector("sink", replica_sink(target.jdbc_url, "srv.public.items"))
    return make_runner(runtime, _SPARK[0])


_SPARK: list[Any] = []  # the session's SparkSession, for `_pipeline`


@pytest.fixture(autouse=True)
def _spark(spark: Any) -> None:
    _SPARK[:] = [spark]


def _sync(runner: Any) -> dict[str, Any]:
    results = {}
    for name in ("cdc", "sink"):
        result = runner.run(name, 0)
        assert result.state == "SUCCEEDED", result.message
        results[name] = result
    return results


def _progress(runtime: Runtime) -> dict[str, Any] | None:
    positions = runtime.connectors.positions("cdc")
    (key,) = list(positions)
    found = dict(positions[key].offset).get(_incremental.STATE)
    return dict(found) if found else None


def _converge(runtime: Runtime, runner: Any, pg_db: PgServer, target: Database) -> None:  # noqa: F811
    """Sync until the incremental snapshot is done; the target then equals the source."""
    while _progress(runtime) is not None:
        _sync(runner)
    assert target.rows(_ROWS) == pg_db.rows(_ROWS)


@pytest.mark.parametrize("parallel", ["1", "3"])
def test_a_lost_table_is_re_read_while_changes_stream(
    pg_db: PgServer,
    runtime: Runtime,
    target: Database,  # noqa: F811
    parallel: str,
) -> None:
    # 3: each run's 5 chunks read by 3 Spark tasks in the run's exported snapshot
    runner = _pipeline(pg_db, runtime, target, **{"incremental.snapshot.parallel.reads": parallel})
    _sync(runner)
    assert target.rows("SELECT count(*) FROM items") == [(100,)]
    target.execute("DELETE FROM items WHERE id % 3 = 0")  # the sink's target lost rows
    sent = LocalManagement(runtime).send_signal(
        "cdc", "resync-1", "execute-snapshot", {"data-collections": ["public.items"], "type": "incremental"}
    )
    assert sent["id"] == "resync-1"
    runs = 0
    while True:
        # changes keep coming between the runs: updates, deletes, a key moved, new rows
        pg_db.execute(
            f"UPDATE items SET qty = qty + 1000 WHERE id % 10 = {runs % 10}",
            f"DELETE FROM items WHERE id = {90 - runs}",
            f"UPDATE items SET id = id + 1000 WHERE id = {50 + runs}",
            f"INSERT INTO items VALUES ({200 + runs}, 'new', 0)",
        )
        _sync(runner)
        runs += 1
        if _progress(runtime) is None:
            break
        assert runs < 20, _progress(runtime)
    assert runs >= 4  # 100 rows in chunks of 7, 30 rows a run
    assert target.rows(_ROWS) == pg_db.rows(_ROWS)
    assert runtime.connectors.signals.pending("cdc") == []  # consumed by the commit


def test_a_chunk_row_changed_after_its_snapshot_never_overwrites_the_change(
    pg_db: PgServer,
    runtime: Runtime,
    target: Database,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    runner = _pipeline(pg_db, runtime, target)
    _sync(runner)
    LocalManagement(runtime).send_signal("cdc", None, "execute-snapshot", {"data-collections": ["public.items"]})
    read = _incremental.read_chunks

    def then_change(*args: Any, **kwargs: Any) -> Any:
        chunk = read(*args, **kwargs)
        # committed after the chunk's snapshot, before the run's WAL end: newer than the chunk's rows
        pg_db.execute("UPDATE items SET label = 'newer' WHERE id IN (2, 5)", "DELETE FROM items WHERE id = 3")
        return chunk

    monkeypatch.setattr(_incremental, "read_chunks", then_change)
    result = _sync(runner)["cdc"]
    monkeypatch.undo()
    assert result.source["RowsScanned"] == 30  # the chunks were read with the change streamed
    assert target.rows("SELECT id, label FROM items WHERE id IN (2, 3, 5) ORDER BY id") == [(2, "newer"), (5, "newer")]
    _converge(runtime, runner, pg_db, target)


def test_a_run_killed_before_its_commit_reads_the_same_chunk_again(
    pg_db: PgServer,
    runtime: Runtime,
    target: Database,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    runner = _pipeline(pg_db, runtime, target)
    _sync(runner)
    target.execute("DELETE FROM items")
    LocalManagement(runtime).send_signal("cdc", None, "execute-snapshot", {"data-collections": ["public.items"]})

    def crash(at: str) -> None:
        if at == "before_commit":
            raise RuntimeError("killed before the commit")

    monkeypatch.setattr(faults, "checkpoint", crash)
    assert runner.run("cdc", 0).state == "FAILED"
    monkeypatch.undo()
    assert _progress(runtime) is None and len(runtime.connectors.signals.pending("cdc")) == 1  # nothing moved
    _sync(runner)
    first = _progress(runtime)
    assert first is not None and first["rows"] == 30 and first["last_key"] == ["30"]
    _converge(runtime, runner, pg_db, target)


def test_signals_are_checked_before_they_are_queued(
    pg_db: PgServer,
    runtime: Runtime,
    target: Database,  # noqa: F811
) -> None:
    _pipeline(pg_db, runtime, target)
    manage = LocalManagement(runtime)
    for kind, data, wrong in (
        ("execute-snapshot", {}, "data.data-collections"),
        ("execute-snapshot", {"data-collections": ["public.items"], "type": "blocking"}, "data.type"),
        ("execute-snapshot", {"data-collections": "public.items"}, "data.data-collections"),
        ("explode", {}, "type"),
    ):
        with pytest.raises(ConfigError) as refused:
            manage.send_signal("cdc", None, kind, data)
        assert wrong in refused.value.errors
    with pytest.raises(ConfigError, match="does not act on signals"):
        manage.send_signal("sink", None, "execute-snapshot", {"data-collections": ["public.items"]})


def test_signals_over_rest_and_the_cli(
    pg_db: PgServer,
    runtime: Runtime,
    target: Database,  # noqa: F811
    make_api: Any,  # noqa: F811
) -> None:
    import httpx

    from connect_core.rest.client import RestClient

    _pipeline(pg_db, runtime, target)
    api = make_api()
    with httpx.Client(base_url=api.url, timeout=30) as client:
        body = {"id": "s-1", "type": "execute-snapshot", "data": {"data-collections": ["public.items"]}}
        sent = client.post("/connectors/cdc/signals", json=body)
        assert sent.status_code == 202 and sent.json() == {"name": "cdc", "id": "s-1", "type": "execute-snapshot"}
        assert client.post("/connectors/nope/signals", json=body).status_code == 404
        refused = client.post(
            "/connectors/cdc/signals", json={"type": "execute-snapshot", "data": {"type": "blocking"}}
        )
        assert refused.status_code == 400 and "data.type" in refused.text and "data.data-collections" in refused.text
        assert client.post("/connectors/sink/signals", json=body).status_code == 400
        assert client.post("/connectors/cdc/signals", json={**body, "extra": 1}).status_code in (400, 422)
    # the CLI's own command, through the REST client
    RestClient(api.url).send_signal("cdc", None, "pause-snapshot", {})
    assert [s.type for _, s in runtime.connectors.signals.pending("cdc")] == ["execute-snapshot", "pause-snapshot"]


def test_several_transactions_after_the_chunks_snapshot_all_win(
    pg_db: PgServer,
    runtime: Runtime,
    target: Database,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Transactions with ids past the snapshot's `xmax` (not only the one at it) are newer than its rows."""
    runner = _pipeline(pg_db, runtime, target)
    pg_db.execute("CREATE TABLE other (x int)")
    _sync(runner)
    LocalManagement(runtime).send_signal("cdc", None, "execute-snapshot", {"data-collections": ["public.items"]})
    read = _incremental.read_chunks

    def then_change(*args: Any, **kwargs: Any) -> Any:
        chunk = read(*args, **kwargs)
        pg_db.execute(
            "INSERT INTO other VALUES (1)",
            "INSERT INTO other VALUES (2)",
            "UPDATE items SET label = 'newer' WHERE id = 2",
            "TRUNCATE other",
            "DELETE FROM items WHERE id = 4",
        )
        return chunk

    monkeypatch.setattr(_incremental, "read_chunks", then_change)
    _sync(runner)
    monkeypatch.undo()
    assert target.rows("SELECT id, label FROM items WHERE id BETWEEN 2 AND 4 ORDER BY id") == [
        (2, "newer"),
        (3, "item 3"),
    ]


def test_values_keep_their_output_form_in_both_snapshots(
    pg_db: PgServer,
    runtime: Runtime,
    target: Database,  # noqa: F811
) -> None:
    """A boolean, a char(n) with its blanks, an inet: as the stream carries them, whichever snapshot read them."""
    pg_db.execute(
        "CREATE TABLE flags (id int PRIMARY KEY, on_ bool, code char(4), addr inet)",
        "INSERT INTO flags VALUES (1, true, 'ab', '10.0.0.1'), (2, false, 'abcd', '::1')",
    )
    runtime.create_connector(
        "cdc",
        pg_capture(pg_db, "public.flags"),
    )
    runtime.create_connector("sink", replica_sink(target.jdbc_url, "srv.public.flags", table="flags"))
    runner = make_runner(runtime, _SPARK[0])
    _sync(runner)
    expected = [(1, True, "ab  ", "10.0.0.1"), (2, False, "abcd", "::1")]
    query = "SELECT id, on_, code, addr FROM flags ORDER BY id"
    assert target.rows(query) == expected  # the initial snapshot
    target.execute("UPDATE flags SET on_ = NOT on_, code = 'zz'")
    LocalManagement(runtime).send_signal("cdc", None, "execute-snapshot", {"data-collections": ["public.flags"]})
    _sync(runner)
    assert target.rows(query) == expected  # the incremental one


def test_a_signal_row_inserted_at_the_source_starts_a_snapshot(
    pg_db: PgServer,
    runtime: Runtime,
    target: Database,  # noqa: F811
) -> None:
    """Debezium's `source` channel: a row of the signal table, streamed from the log, is the signal;
    the table's changes go to no topic, and a malformed row is skipped without failing the run."""
    pg_db.execute("CREATE TABLE debezium_signal (id varchar(42) PRIMARY KEY, type varchar(32) NOT NULL, data text)")
    runner = _pipeline(
        pg_db,
        runtime,
        target,
        **{
            "table.include.list": "public.items,public.debezium_signal",
            "signal.enabled.channels": "source",
            "signal.data.collection": "public.debezium_signal",
        },
    )
    _sync(runner)
    target.execute("DELETE FROM items WHERE id > 50")
    pg_db.execute(
        "INSERT INTO debezium_signal VALUES ('bad-1', 'execute-snapshot', '{not json')",
        "INSERT INTO debezium_signal VALUES ('bad-2', 'explode', '{}')",
        """INSERT INTO debezium_signal VALUES ('s-1', 'execute-snapshot',
           '{"data-collections": ["public.items"], "type": "incremental"}')""",
    )
    _sync(runner)  # streams the signal: the snapshot is queued with this run's position
    progress = _progress(runtime)
    assert progress is not None and progress["table"] == "public.items"
    _converge(runtime, runner, pg_db, target)
    topics = runtime.topics.topics()
    assert "srv.public.debezium_signal" not in topics  # signals are no data
    with pytest.raises(ConfigError, match=r"signal\.enabled\.channels"):
        LocalManagement(runtime).send_signal("cdc", None, "pause-snapshot", {})  # `rest` is not enabled


def test_a_signal_table_that_is_not_captured_fails_the_run_with_the_fix(
    pg_db: PgServer,
    runtime: Runtime,
    target: Database,  # noqa: F811
) -> None:
    runner = _pipeline(
        pg_db,
        runtime,
        target,
        **{"signal.enabled.channels": "rest,source", "signal.data.collection": "public.debezium_signal"},
    )
    result = runner.run("cdc", 0)
    assert result.state == "FAILED"
    assert "signal table `public.debezium_signal` is not captured" in result.message
