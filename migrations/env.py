"""Alembic environment of the metadata schema.

Run through `connect db upgrade` (or `connect_core.runtime.store.migrate`), which
passes an open connection in `config.attributes["connection"]`; running the
`alembic` command directly uses `sqlalchemy.url` or CONNECT_DATABASE_URL.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection, create_engine, text

from connect_core.runtime.store.models import SCHEMA, Base

config = context.config
target_metadata = Base.metadata


def _run(connection: Connection) -> None:
    connection.execute(text(f'CREATE SCHEMA IF NOT EXISTS "{SCHEMA}"'))
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        version_table_schema=SCHEMA,
        include_schemas=True,
        include_name=lambda name, type_, _parent: type_ != "schema" or name == SCHEMA,
        compare_type=True,
    )
    with context.begin_transaction():
        # Serialise concurrent upgrades (several workers starting at once).
        connection.execute(text("SELECT pg_advisory_xact_lock(hashtext('connect_core.migrations'))"))
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    import os

    url = os.environ.get("CONNECT_DATABASE_URL") or config.get_main_option("sqlalchemy.url")
    if not url:
        raise SystemExit("set CONNECT_DATABASE_URL or use `connect db upgrade` (it starts the embedded server)")
    engine = create_engine(url)
    with engine.begin() as conn:
        _run(conn)


if context.is_offline_mode():
    raise SystemExit("offline (--sql) migrations are not supported; run against a database")
run_migrations_online()
