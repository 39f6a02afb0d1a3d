"""`GET /metrics` of an incremental snapshot: a real PostgreSQL CDC source, mid-snapshot after real
runs, scraped over real HTTP; the values are its committed progress, Debezium's names, no key value."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import text

from connect_core.connectors.cdc import _incremental
from connect_core.runtime.context import Runtime
from connect_core.runtime.management.local import LocalManagement
from connect_core.runtime.store.incremental import PROGRESS_KEY
from connect_core.testing.servers import PgServer
from tests.conftest import make_runner
from tests.connectors.cdc._pipelines import pg_capture
from tests.rest.conftest import Served
from tests.rest.test_metrics import scrape

_SNAPSHOT = (
    "kafka_connect_snapshot_running",
    "kafka_connect_snapshot_paused",
    "kafka_connect_snapshot_remaining_table_count",
    "kafka_connect_snapshot_signals_pending",
)


def _progress(runtime: Runtime) -> dict[str, Any]:
    (position,) = runtime.connectors.positions("cdc").values()
    return dict(position.offset[_incremental.STATE])


def _signal(runtime: Runtime, kind: str, **data: Any) -> None:
    LocalManagement(runtime).send_signal("cdc", None, kind, data)


def test_snapshot_metrics_follow_a_postgres_snapshot_mid_read(
    pg_db: PgServer, runtime: Runtime, spark: Any, api: Served
) -> None:
    # text keys that would be recognised anywhere in the scrape: they must appear nowhere
    pg_db.execute(
        "CREATE TABLE items (id text PRIMARY KEY, qty int)",
        "INSERT INTO items SELECT 'key-' || lpad(g::text, 4, '0'), g FROM generate_series(1, 100) g",
        "CREATE TABLE other (id int PRIMARY KEY)",
    )
    config = pg_capture(pg_db, "public.items,public.other")
    config |= {"incremental.snapshot.chunk.size": "7", "incremental.snapshot.max.rows.per.run": "30"}
    runtime.create_connector("cdc", config)
    runtime.connectors.create(  # a source whose plugin takes no signals: no snapshot metrics
        "files", connector_class="FileSourceConnector", type="source", config={}, task_configs=[{}]
    )
    runner = make_runner(runtime, spark)
    assert runner.run("cdc", 0).state == "SUCCEEDED"  # the slot and the initial snapshot

    m = scrape(api)
    for name in _SNAPSHOT:  # a source that acts on signals: 0, not absent
        assert m.value(name, connector="cdc") == 0, name
        assert m.value(name, connector="files") is None, name
        assert m.types[name] == "gauge"
    assert m.labelled("kafka_connect_snapshot_rows_scanned") == []

    _signal(runtime, "execute-snapshot", **{"data-collections": ["public.items", "public.other"]})
    assert scrape(api).value("kafka_connect_snapshot_signals_pending", connector="cdc") == 1
    assert runner.run("cdc", 0).state == "SUCCEEDED"
    progress = _progress(runtime)
    assert progress["table"] == "public.items" and progress["rows"] == 30 and progress["last_key"] == ["key-0030"]

    m = scrape(api)
    table = {"connector": "cdc", "table": "public.items"}
    assert m.value("kafka_connect_snapshot_running", connector="cdc") == 1
    assert m.value("kafka_connect_snapshot_paused", connector="cdc") == 0
    assert m.value("kafka_connect_snapshot_remaining_table_count", connector="cdc") == 2  # items, then other
    assert m.value("kafka_connect_snapshot_signals_pending", connector="cdc") == 0  # the run took it
    assert m.value("kafka_connect_snapshot_rows_scanned", **table) == 30
    assert m.value("kafka_connect_snapshot_chunks_read", **table) == progress["chunks"] > 0
    assert "key-00" not in m.text  # the keys read between are the user's data

    _signal(runtime, "pause-snapshot")
    assert runner.run("cdc", 0).state == "SUCCEEDED"
    m = scrape(api)
    assert m.value("kafka_connect_snapshot_running", connector="cdc") == 0
    assert m.value("kafka_connect_snapshot_paused", connector="cdc") == 1
    assert m.value("kafka_connect_snapshot_rows_scanned", **table) == 30  # paused: nothing read

    _signal(runtime, "resume-snapshot")
    assert runner.run("cdc", 0).state == "SUCCEEDED"
    m = scrape(api)
    assert m.value("kafka_connect_snapshot_running", connector="cdc") == 1
    assert m.value("kafka_connect_snapshot_rows_scanned", **table) == 60 == _progress(runtime)["rows"]

    _signal(runtime, "stop-snapshot")
    assert runner.run("cdc", 0).state == "SUCCEEDED"
    m = scrape(api)
    assert m.value("kafka_connect_snapshot_running", connector="cdc") == 0
    assert m.value("kafka_connect_snapshot_remaining_table_count", connector="cdc") == 0
    assert m.labelled("kafka_connect_snapshot_rows_scanned") == []


def test_an_odd_progress_an_operator_wrote_is_read_for_its_types(runtime: Runtime, api: Served) -> None:
    """A position is JSON anyone with the operator role may write (PATCH offsets): a scrape still
    answers, with what is well typed, and shows no value of it as a label but a table name."""
    runtime.connectors.create("odd", connector_class="FileSourceConnector", type="source", config={}, task_configs=[{}])
    odd = {"table": "x" * 400, "queue": ["t1", 7, None, "t\n2"], "rows": "many", "chunks": -3, "paused": "yes"}
    with runtime.engine.begin() as conn:
        conn.execute(
            text(
                'INSERT INTO connect.source_positions (connector, partition_key, partition, "offset") '
                "VALUES ('odd', 'p', '{}', CAST(:o AS jsonb))"
            ),
            {"o": json.dumps({PROGRESS_KEY: odd, "last_key": ["secret"]})},
        )
    m = scrape(api)
    assert m.value("kafka_connect_snapshot_running", connector="odd") == 0  # no table it could read
    assert m.value("kafka_connect_snapshot_paused", connector="odd") == 0  # "yes" is no boolean
    assert m.value("kafka_connect_snapshot_remaining_table_count", connector="odd") == 4  # the queue's length
    assert m.labelled("kafka_connect_snapshot_rows_scanned") == []
    assert "xxxx" not in m.text and "secret" not in m.text
