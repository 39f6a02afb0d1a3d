"""Schema contracts on change events: the PostgreSQL CDC source's topic holds Debezium envelopes,
and a column added, dropped or retyped in the table (or its primary key changed) between runs is a
change of the rows in their `before`/`after`, judged column by column where the events enter the
topic; the JDBC sink (`schema.propagation=propagate_columns`) then replicates what passed."""

from __future__ import annotations

from typing import Any

import pytest

from connect_core.runtime.context import Runtime
from connect_core.testing.servers import PgServer
from tests.conftest import make_runner
from tests.connectors.cdc._pipelines import pg_capture, replica_sink
from tests.connectors.jdbc_helpers import Database, target  # noqa: F401  (fixtures)

MODES = ["evolve", "freeze", "discard_row", "discard_value"]
#: each change kind: the DDL between the two runs, and the rows inserted after it
CHANGES: dict[str, tuple[list[str], list[str]]] = {
    "added": (["ALTER TABLE items ADD COLUMN email text"], ["(3, 'c', 3, 3.5, 'c@x')", "(4, 'd', 4, 4.5, NULL)"]),
    "dropped": (["ALTER TABLE items DROP COLUMN label"], ["(3, 3, 3.5)", "(4, 4, 4.5)"]),
    "wider": (["ALTER TABLE items ALTER COLUMN qty TYPE bigint"], ["(3, 'c', 3, 3.5)", "(4, 'd', 5000000000, 4.5)"]),
    "narrower": (["ALTER TABLE items ALTER COLUMN amount TYPE int"], ["(3, 'c', 3, 3)", "(4, 'd', 4, 4)"]),
    "key": (
        ["ALTER TABLE items DROP CONSTRAINT items_pkey", "ALTER TABLE items ADD PRIMARY KEY (id, label)"],
        ["(3, 'c', 3, 3.5)", "(4, 'd', 4, 4.5)"],
    ),
}
#: which of the rows 3 and 4 reach the target, by mode and change
KEPT = {
    "discard_row": {"added": [4], "dropped": [], "wider": [3], "narrower": [3, 4], "key": []},
    "discard_value": {"added": [3, 4], "dropped": [3, 4], "wider": [3, 4], "narrower": [3, 4]},
}


@pytest.mark.parametrize("change", list(CHANGES))
@pytest.mark.parametrize("mode", MODES)
def test_each_contract_mode_on_each_change_of_a_captured_table(
    pg_db: PgServer,
    runtime: Runtime,
    spark: Any,
    target: Database,  # noqa: F811
    mode: str,
    change: str,
) -> None:
    pg_db.execute(
        "CREATE TABLE items (id int PRIMARY KEY, label text, qty int, amount numeric(10,2))",
        "INSERT INTO items VALUES (1, 'a', 1, 1.5), (2, 'b', 2, 2.5)",
    )
    runtime.create_connector(
        "cdc",
        pg_capture(
            pg_db,
            "public.items",
            **{
                "schema.contract": mode,
                "errors.deadletterqueue.topic.name": "dlq",
            },
        ),
    )
    runtime.create_connector(
        "sink", replica_sink(target.jdbc_url, "srv.public.items", **{"schema.propagation": "propagate_columns"})
    )
    runner = make_runner(runtime, spark)
    for name in ("cdc", "sink"):
        assert runner.run(name, 0).state == "SUCCEEDED"
    ddl, rows = CHANGES[change]
    pg_db.execute(*ddl, "INSERT INTO items VALUES " + ", ".join(rows))
    result = runner.run("cdc", 0)
    if mode == "freeze" or (mode == "discard_value" and change == "key"):
        assert result.state == "FAILED" and result.error_kind == "data", result.message
        assert "schema contract: topic `srv.public.items`" in result.message
        return
    assert result.state == "SUCCEEDED", result.message
    sink = runner.run("sink", 0)
    if mode == "evolve" and change in ("narrower", "key"):
        # a breaking change passed the source's contract: the sink pauses on it until accepted
        assert sink.state == "FAILED" and "the connector paused on a breaking change" in sink.message
        from connect_core.runtime.management.local import LocalManagement

        LocalManagement(runtime).accept_schema("sink")
        sink = runner.run("sink", 0)
        if change == "key":  # the target's primary key is still (id): upserts by (id, label) have no unique index
            assert sink.state == "SUCCEEDED" or "id, label" in sink.message or "unique" in sink.message, sink.message
            return
    assert sink.state == "SUCCEEDED", sink.message
    ids = [r[0] for r in target.rows("SELECT id FROM items ORDER BY id")]
    kept = [3, 4] if mode == "evolve" else KEPT[mode][change]
    assert ids == [1, 2, *kept]
    columns = {
        r[0] for r in target.rows("SELECT column_name FROM information_schema.columns WHERE table_name = 'items'")
    }
    assert ("email" in columns) == (mode == "evolve" and change == "added")
    if change == "wider" and mode == "discard_value":
        assert target.rows("SELECT qty FROM items WHERE id >= 3 ORDER BY id") == [(3,), (None,)]
    if change == "wider" and mode == "evolve":
        assert target.rows("SELECT qty FROM items WHERE id = 4") == [(5_000_000_000,)]
    aside = {"added": 1, "dropped": 2, "wider": 1, "narrower": 0, "key": 2}[change] if mode == "discard_row" else 0
    assert result.counts.get("contract_discarded_rows", 0) == aside
    dead = runtime.topics.segments_after({tp: 0 for tp in runtime.topics.owned_partitions(["dlq"], 0, 1)})
    assert sum(s.row_count for s in dead) == aside
