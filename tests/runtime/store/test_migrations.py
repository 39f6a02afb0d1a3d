"""The Alembic migrations: upgrade from empty, downgrade, upgrade again."""

from __future__ import annotations

from sqlalchemy import inspect, text

from connect_core.runtime.store import migrate
from connect_core.runtime.store.db import make_engine
from connect_core.runtime.store.models import SCHEMA, Base

TABLES = {
    "connectors",
    "task_configs",
    "connector_status",
    "task_status",
    "source_positions",
    "sink_offsets",
    "topics",
    "topic_partitions",
    "topic_segments",
    "task_runs",
    "task_run_totals",
    "change_counter",
    "spark_pools",
    "assignments",
    "rebalance_log",
    "cluster",
    "rebalance_state",
    "placement_queue",
    "connector_topics",
    "upkeep_jobs",
    "topic_schemas",
    "connector_schemas",
    "connector_signals",
    "topic_resyncs",
}


def _tables(engine) -> set[str]:  # type: ignore[no-untyped-def]
    return set(inspect(engine).get_table_names(schema=SCHEMA)) - {"alembic_version"}


def test_upgrade_downgrade_upgrade(empty_database_url: str) -> None:
    engine = make_engine(empty_database_url)
    assert _tables(engine) == set()

    migrate.upgrade(engine)
    assert _tables(engine) == TABLES == {t.name for t in Base.metadata.sorted_tables}
    migrate.upgrade(engine)  # idempotent: a second upgrade is a no-op

    migrate.downgrade(engine, "base")
    assert _tables(engine) == set()

    migrate.upgrade(engine)
    assert _tables(engine) == TABLES
    with engine.connect() as conn:
        assert (
            conn.execute(text(f"SELECT version_num FROM {SCHEMA}.alembic_version")).scalar() == migrate.head() == "0019"
        )
    engine.dispose()


def test_models_match_migrations(empty_database_url: str) -> None:
    """Autogenerate finds nothing to do: the models and the migrations agree."""
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    engine = make_engine(empty_database_url)
    migrate.upgrade(engine)
    with engine.connect() as conn:
        ctx = MigrationContext.configure(
            conn,
            opts={
                "include_schemas": True,
                "version_table_schema": SCHEMA,
                "include_name": lambda name, type_, _p: type_ != "schema" or name == SCHEMA,
            },
        )
        assert compare_metadata(ctx, Base.metadata) == []
    engine.dispose()
