"""`connect resync --mode replace` end to end, JDBC → topic → JDBC (PostgreSQL and MariaDB targets):
the target keeps its old rows while the re-read arrives in several runs, then holds exactly the
source's rows (those deleted at the source since the last read are gone), in one swap; the other
table, read by the same source, keeps its position and its rows. Under `retain` the deleted rows stay."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from connect_core.runtime.context import Runtime
from connect_core.runtime.management.local import LocalManagement
from connect_core.sdk.errors import ConflictError
from tests.conftest import make_runner
from tests.connectors.jdbc_helpers import (  # noqa: F401  (fixtures)
    Database,
    mariadb_target,
    postgres,
    sink_target,
    synced,
    target,
)

_A = "SELECT id, v FROM p_a ORDER BY id"


def _pipeline(runtime: Runtime, spark: Any, source: Database, sink: Database) -> Any:
    source.execute(
        "CREATE TABLE a (id bigint PRIMARY KEY, v text)",
        "CREATE TABLE b (id bigint PRIMARY KEY, v text)",
        "INSERT INTO a SELECT g, 'a' || g FROM generate_series(1, 12) g",
        "INSERT INTO b SELECT g, 'b' || g FROM generate_series(1, 3) g",
    )
    runtime.create_connector(
        "src",
        source.source_config(
            mode="incrementing",
            **{
                "incrementing.column.name": "id",
                "table.whitelist": "a,b",
                "topic.prefix": "p_",
                "batch.max.rows": 5,
            },
        ),
    )
    runtime.create_connector(
        "sink",
        {
            "connector.class": "JdbcSinkConnector",
            "connection.url": sink.jdbc_url,
            "topics": "p_a,p_b",
            "insert.mode": "upsert",
            "pk.mode": "record_value",
            "pk.fields": "id",
            "auto.create": True,
        },
    )
    runner = make_runner(runtime, spark)
    for _ in range(3):  # a: 5 + 5 + 2 rows
        synced(runner, "src", "sink")
    return runner


def test_a_replace_re_read_swaps_in_exactly_the_source_rows(
    runtime: Runtime,
    spark: Any,
    postgres: Database,  # noqa: F811
    sink_target: Database,  # noqa: F811
) -> None:
    runner = _pipeline(runtime, spark, postgres, sink_target)
    assert len(sink_target.rows(_A)) == 12
    # rows the incrementing mode never sees go: deleted and changed in place
    postgres.execute("DELETE FROM a WHERE id IN (2, 7, 11)", "UPDATE a SET v = 'changed' WHERE id = 3")
    before = sink_target.rows(_A)

    LocalManagement(runtime).resync("src", "a", "replace")
    synced(runner, "src", "sink")  # the re-read's first window: into the copy, the target unchanged
    assert sink_target.rows(_A) == before
    postgres.execute("INSERT INTO b VALUES (4, 'b4')")
    while runtime.connectors.positions("src") and any(
        "resync" in p.offset for p in runtime.connectors.positions("src").values()
    ):
        synced(runner, "src", "sink")
    synced(runner, "src", "sink")  # the sink is told the end (if its last batch was not)

    assert sink_target.rows(_A) == postgres.rows("SELECT id, v FROM a ORDER BY id")
    assert sink_target.rows("SELECT id, v FROM p_b ORDER BY id") == [(1, "b1"), (2, "b2"), (3, "b3"), (4, "b4")]
    here = "table_catalog = current_database()" if "postgresql" in sink_target.jdbc_url else "table_schema = database()"
    tables = [t for (t,) in sink_target.rows(f"SELECT table_name FROM information_schema.tables WHERE {here}")]
    assert sorted(t for t in tables if t.startswith("p_")) == ["p_a", "p_b"], "the copy was swapped in: none is left"

    # the next rows stream into the swapped-in table as usual
    postgres.execute("INSERT INTO a VALUES (13, 'a13')")
    synced(runner, "src", "sink")
    assert sink_target.rows(_A)[-1] == (13, "a13")


def test_a_retain_re_read_upserts_and_keeps_the_rows_deleted_since(
    runtime: Runtime,
    spark: Any,
    postgres: Database,  # noqa: F811
    target: Database,  # noqa: F811
) -> None:
    runner = _pipeline(runtime, spark, postgres, target)
    postgres.execute("DELETE FROM a WHERE id = 2", "UPDATE a SET v = 'changed' WHERE id = 3")
    LocalManagement(runtime).resync("src", "a", "retain")
    for _ in range(4):
        synced(runner, "src", "sink")
    rows = dict(target.rows(_A))
    assert rows[3] == "changed" and rows[2] == "a2" and len(rows) == 12


def test_a_source_deleted_mid_re_read_leaves_no_sink_waiting(
    runtime: Runtime,
    spark: Any,
    postgres: Database,  # noqa: F811
    target: Database,  # noqa: F811
) -> None:
    """The re-read can never end: it is abandoned with its source, and a new source writing the
    topic streams into the target, not into a copy no swap will ever bring in."""
    runner = _pipeline(runtime, spark, postgres, target)
    LocalManagement(runtime).resync("src", "a", "replace")
    synced(runner, "src")  # the re-read begins
    config = runtime.connectors.get("src").config
    LocalManagement(runtime).delete("src")
    (found,) = runtime.topics.resyncs.all("p_a")
    assert found.mode == "abandoned" and found.end is not None
    runtime.create_connector("src2", config)
    postgres.execute("INSERT INTO a VALUES (13, 'a13')")
    for _ in range(4):
        synced(runner, "src2", "sink")
    assert target.rows(_A)[-1] == (13, "a13")


def test_two_admins_asking_at_once_queue_one_re_read(
    runtime: Runtime,
    spark: Any,
    postgres: Database,  # noqa: F811
    target: Database,  # noqa: F811
) -> None:
    _pipeline(runtime, spark, postgres, target)
    manage = LocalManagement(runtime)
    barrier = threading.Barrier(4)

    def ask(mode: str) -> str:
        barrier.wait()
        try:
            manage.resync("src", "a", mode)
            return "queued"
        except ConflictError:
            return "conflict"

    with ThreadPoolExecutor(4) as pool:
        answers = sorted(pool.map(ask, ["replace", "retain", "replace", "retain"]))
    assert answers == ["conflict", "conflict", "conflict", "queued"]
    assert len(runtime.connectors.signals.pending("src")) == 1
