"""Schema contracts and propagation on a real JDBC pipeline: a Postgres table whose columns change
between runs, copied by the JDBC source into a topic and by the JDBC sink into Postgres."""

from __future__ import annotations

from typing import Any

import pytest

from connect_core.runtime.context import Runtime
from connect_core.runtime.execution.runner import TaskRunner
from tests.connectors.jdbc_helpers import (  # noqa: F401  (fixtures)
    Database,
    create_upsert_sink,
    mariadb_target,
    postgres,
    synced,
    target,
)


def _source(runtime: Runtime, postgres: Database, **extra: Any) -> None:  # noqa: F811
    runtime.create_connector(
        "src",
        postgres.source_config(
            mode="incrementing",
            **{"incrementing.column.name": "id", "table.whitelist": "orders", "topic.prefix": "pg-", **extra},
        ),
    )


def _rows(runtime: Runtime, spark: Any, topic: str) -> list[dict[str, Any]]:
    segments = runtime.topics.segments_after({tp: 0 for tp in runtime.topics.owned_partitions([topic], 0, 1)})
    if not segments:
        return []
    rows = [r.asDict() for s in segments for r in spark.read.parquet(s.path).collect()]  # each in its own shape
    return sorted(({k: v for k, v in r.items() if not k.startswith("__")} for r in rows), key=lambda r: r["id"])


def test_freeze_fails_the_run_naming_the_added_column(
    runtime: Runtime,
    runner: TaskRunner,
    postgres: Database,  # noqa: F811
    spark: Any,
) -> None:
    postgres.execute("CREATE TABLE orders (id int PRIMARY KEY, name text)", "INSERT INTO orders VALUES (1, 'a')")
    _source(runtime, postgres, **{"schema.contract": "freeze"})
    synced(runner, "src")  # the first load may create
    postgres.execute("ALTER TABLE orders ADD COLUMN email text", "INSERT INTO orders VALUES (2, 'b', 'b@x')")
    result = runner.run("src", 0)
    assert result.state == "FAILED"
    assert result.error_kind == "data"
    assert "column `email` (string) added" in result.message and "schema.contract.columns=freeze" in result.message
    assert [r["id"] for r in _rows(runtime, spark, "pg-orders")] == [1]


# -- the source's contract: every mode, every change kind --------------------------------------

MODES = ["evolve", "freeze", "discard_row", "discard_value"]
#: each change kind: the DDL between the two runs, the rows the second run reads, and (for a key change)
#: the connector's new config
CHANGES: dict[str, dict[str, Any]] = {
    "added": {
        "ddl": ["ALTER TABLE orders ADD COLUMN email text"],
        "rows": ["(3, 'c', 3, 3.5, 'c@x')", "(4, 'd', 4, 4.5, NULL)"],
    },
    "dropped": {"ddl": ["ALTER TABLE orders DROP COLUMN name"], "rows": ["(3, 3, 3.5)", "(4, 4, 4.5)"]},
    "wider": {
        "ddl": ["ALTER TABLE orders ALTER COLUMN qty TYPE bigint"],
        "rows": ["(3, 'c', 3, 3.5)", "(4, 'd', 5000000000, 4.5)"],
    },
    "narrower": {
        "ddl": ["ALTER TABLE orders ALTER COLUMN amount TYPE int"],
        "rows": ["(3, 'c', 3, 3)", "(4, 'd', 4, 4)"],
    },
    "key": {"ddl": [], "rows": ["(3, 'c', 3, 3.5)", "(4, 'd', 4, 4.5)"], "key": "id,name"},
}


def _key_config(fields: str) -> dict[str, Any]:
    return {"transforms": "key", "transforms.key.type": "ValueToKey", "transforms.key.fields": fields}


def _dead_letters(runtime: Runtime, spark: Any) -> list[dict[str, Any]]:
    segments = runtime.topics.segments_after({tp: 0 for tp in runtime.topics.owned_partitions(["dlq"], 0, 1)})
    if not segments:
        return []
    rows = [r.asDict(recursive=True) for s in segments for r in spark.read.parquet(s.path).collect()]
    return sorted(rows, key=lambda r: r["id"])


def _header(record: dict[str, Any], name: str) -> str | None:
    return next((h["value"] for h in record["__headers"] or [] if h["key"] == f"__connect.errors.{name}"), None)


@pytest.mark.parametrize("change", list(CHANGES))
@pytest.mark.parametrize("mode", MODES)
def test_each_source_contract_mode_on_each_change(
    runtime: Runtime,
    runner: TaskRunner,
    postgres: Database,  # noqa: F811
    spark: Any,
    mode: str,
    change: str,
) -> None:
    spec = CHANGES[change]
    postgres.execute(
        "CREATE TABLE orders (id int PRIMARY KEY, name text, qty int, amount numeric(12,2))",
        "INSERT INTO orders VALUES (1, 'a', 1, 1.5), (2, 'b', 2, 2.5)",
    )
    extra = {"schema.contract": mode, "errors.deadletterqueue.topic.name": "dlq", **_key_config("id")}
    _source(runtime, postgres, **extra)
    synced(runner, "src")
    postgres.execute(*spec["ddl"], "INSERT INTO orders VALUES " + ", ".join(spec["rows"]))
    if "key" in spec:
        runtime.update_connector("src", {**runtime.connectors.get("src").config, **_key_config(spec["key"])})
    result = runner.run("src", 0)
    rows = _rows(runtime, spark, "pg-orders")
    letters = _dead_letters(runtime, spark)
    if mode == "freeze" or (mode == "discard_value" and change == "key"):
        assert result.state == "FAILED" and result.error_kind == "data", result.message
        assert "schema contract: topic `pg-orders`" in result.message
        assert [r["id"] for r in rows] == [1, 2] and not letters  # nothing of the run landed
        return
    assert result.state == "SUCCEEDED", result.message
    new = [r for r in rows if r["id"] > 2]
    counts = result.counts
    if mode == "evolve":
        assert [r["id"] for r in new] == [3, 4] and not letters
        expected = {
            "added": ("email", ["c@x", None]),
            "dropped": ("name", None),
            "wider": ("qty", [3, 5_000_000_000]),
            "narrower": ("amount", [3, 4]),
            "key": ("name", ["c", "d"]),
        }[change]
        column, values = expected
        if values is None:
            assert all(column not in r for r in new)  # the column is gone from the new rows
        else:
            assert [r[column] for r in new] == values
        return
    if mode == "discard_row":
        kept, aside = {
            "added": ([4], [3]),
            "dropped": ([], [3, 4]),
            "wider": ([3], [4]),
            "narrower": ([3, 4], []),
            "key": ([], [3, 4]),
        }[change]
        assert [r["id"] for r in new] == kept
        assert [r["id"] for r in letters] == aside
        assert counts.get("contract_discarded_rows", 0) == len(aside)
        for letter in letters:
            assert _header(letter, "stage") == "SCHEMA_CONTRACT"
            assert "schema.contract." in (_header(letter, "exception.message") or "")
    if mode == "discard_value":
        assert [r["id"] for r in new] == [3, 4] and not letters
        dropped = {"added": 1, "dropped": 0, "wider": 1, "narrower": 0}[change]
        assert counts.get("contract_discarded_values", 0) == dropped
    # what passed is in the connector's former shape
    for r in new:
        assert "email" not in r
        if change == "dropped":
            assert r["name"] is None
    if change == "wider" and new:
        assert new[0]["qty"] == 3 and (len(new) == 1 or new[1]["qty"] is None)
    if change == "narrower":
        from decimal import Decimal

        assert [r["amount"] for r in new] == [Decimal("3.00"), Decimal("4.00")]


# -- the sink's propagation: every mode, every change kind, into PostgreSQL and MariaDB ------------

PROPAGATIONS = ["ignore", "propagate_columns", "propagate_fully", "pause"]
_TARGET_DDL = {
    "postgresql": "CREATE TABLE orders (id int PRIMARY KEY, name text NOT NULL, qty int, amount numeric(12,2))",
    "mariadb": "CREATE TABLE orders (id int PRIMARY KEY, name varchar(100) NOT NULL, qty int, amount decimal(12,2))",
}


def _columns(db: Database) -> dict[str, tuple[str, bool]]:
    """The target table's columns: (type, nullable)."""
    where = "table_schema = 'public'" if db.kind == "postgresql" else "table_schema = DATABASE()"
    rows = db.rows(
        f"SELECT column_name, data_type, is_nullable FROM information_schema.columns "
        f"WHERE table_name = 'orders' AND {where}"
    )
    return {str(name): (str(kind).lower(), nullable == "YES") for name, kind, nullable in rows}


#: Every mode and change into PostgreSQL; into MariaDB, the cases its DDL decides (a pause is decided
#: before any write, the same whatever the target)
SINK_CASES = [("postgresql", m, c) for m in PROPAGATIONS for c in CHANGES] + [
    ("mariadb", m, c) for m in PROPAGATIONS if m != "pause" for c in ("added", "dropped", "wider")
]


@pytest.mark.parametrize(("kind", "mode", "change"), SINK_CASES)
def test_each_sink_propagation_mode_on_each_change(
    runtime: Runtime,
    runner: TaskRunner,
    postgres: Database,  # noqa: F811
    request: pytest.FixtureRequest,
    kind: str,
    mode: str,
    change: str,
) -> None:
    sink_target: Database = request.getfixturevalue("target" if kind == "postgresql" else "mariadb_target")
    spec = CHANGES[change]
    postgres.execute(
        "CREATE TABLE orders (id int PRIMARY KEY, name text, qty int, amount numeric(12,2))",
        "INSERT INTO orders VALUES (1, 'a', 1, 1.5), (2, 'b', 2, 2.5)",
    )
    sink_target.execute(_TARGET_DDL[sink_target.kind])
    _source(runtime, postgres, **_key_config("id"))
    create_upsert_sink(runtime, sink_target, "pg-orders", **{"table.name.format": "orders", "schema.propagation": mode})
    synced(runner, "src", "sink")
    postgres.execute(*spec["ddl"], "INSERT INTO orders VALUES " + ", ".join(spec["rows"]))
    if "key" in spec:
        runtime.update_connector("src", {**runtime.connectors.get("src").config, **_key_config(spec["key"])})
    synced(runner, "src")
    result = runner.run("sink", 0)
    pauses = mode == "pause" or (mode != "ignore" and change in ("narrower", "key"))
    if pauses:
        assert result.state == "FAILED" and result.error_kind == "data", result.message
        assert "the connector paused on" in result.message and "connect schema accept sink" in result.message
        status = runtime.connectors.status("sink")
        assert status.state == "PAUSED" and "schema change" in (status.trace or "")
        assert [r[0] for r in sink_target.rows("SELECT id FROM orders ORDER BY id")] == [1, 2]  # nothing written
        pending = runtime.connectors.schemas.of("sink")["pg-orders"].pending
        assert pending is not None and not pending.accepted
        assert runner.run("sink", 0).state == "SKIPPED"  # paused: no run until accepted
        from connect_core.runtime.management.local import LocalManagement

        accepted = LocalManagement(runtime).accept_schema("sink")
        assert accepted["accepted"] == ["pg-orders"]
        assert runtime.connectors.status("sink").state == "RUNNING"
        result = runner.run("sink", 0)
    if mode == "ignore" and change in ("dropped", "wider"):
        # the table keeps its columns: its NOT NULL `name` and its int `qty` refuse the new rows, plainly
        assert result.state == "FAILED" and result.error_kind == "data", result.message
        assert ("name" if change == "dropped" else "qty") in result.message
        assert [r[0] for r in sink_target.rows("SELECT id FROM orders ORDER BY id")] == [1, 2]
        return
    assert result.state == "SUCCEEDED", result.message
    assert [r[0] for r in sink_target.rows("SELECT id FROM orders ORDER BY id")] == [1, 2, 3, 4]
    assert runtime.connectors.schemas.of("sink")["pg-orders"].pending is None
    columns = _columns(sink_target)
    propagates = mode != "ignore"
    if change == "added":
        assert ("email" in columns) == propagates
        if propagates:
            assert sink_target.rows("SELECT email FROM orders WHERE id = 3") == [("c@x",)]
    if change == "dropped":
        assert ("name" in columns) == (mode != "propagate_fully")
        if "name" in columns:
            assert columns["name"][1] == propagates  # made nullable when propagated
            assert sink_target.rows("SELECT name FROM orders WHERE id >= 3") == [(None,), (None,)]
    if change == "wider":
        assert columns["qty"][0] == (
            "bigint" if propagates else ("integer" if sink_target.kind == "postgresql" else "int")
        )
        if propagates:
            assert sink_target.rows("SELECT qty FROM orders WHERE id = 4") == [(5_000_000_000,)]
    if change == "narrower":  # never narrowed in the target, accepted or not
        assert columns["amount"][0] in ("numeric", "decimal")
