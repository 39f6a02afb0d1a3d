"""change counter: a transactional count of changes to connectors and their status

Readers (the REST API) keep a snapshot of every connector's info and status and
rebuild it when this counter moves; triggers bump it in the writer's own
transaction and NOTIFY `connect_changes` at commit, so readers learn of a change
without a query per request.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-21
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

TABLES = ("connectors", "task_configs", "connector_status", "task_status")


def upgrade() -> None:
    op.create_table(
        "change_counter",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("n", sa.BigInteger(), server_default="0", nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_change_counter")),
        schema="connect",
    )
    op.execute("INSERT INTO connect.change_counter (id, n) VALUES (1, 0)")
    op.execute(
        """
        CREATE FUNCTION connect.bump_change_counter() RETURNS trigger LANGUAGE plpgsql AS $$
        DECLARE v bigint;
        BEGIN
            UPDATE connect.change_counter SET n = n + 1 WHERE id = 1 RETURNING n INTO v;
            PERFORM pg_notify('connect_changes', v::text);  -- delivered at commit
            RETURN NULL;
        END $$
        """
    )
    for table in TABLES:
        op.execute(
            f"CREATE TRIGGER bump_change_counter AFTER INSERT OR UPDATE OR DELETE ON connect.{table} "
            "FOR EACH STATEMENT EXECUTE FUNCTION connect.bump_change_counter()"
        )


def downgrade() -> None:
    for table in TABLES:
        op.execute(f"DROP TRIGGER IF EXISTS bump_change_counter ON connect.{table}")
    op.execute("DROP FUNCTION IF EXISTS connect.bump_change_counter()")
    op.drop_table("change_counter", schema="connect")
