"""incremental rebalance: a generation counter, the pools of the last full allocation, moves not maps

A rebalance now writes only what changes (KIP-415's idea): placing a new connector touches its own
rows only. So the generation can no longer be read off the assignment rows (most keep an older
one): `rebalance_state` (one row) holds it, with the live pools and capacities the last full
allocation ran over; a full allocation runs again only when those change. `rebalance_log` records
what moved (`moves`: [item, from, to] of each moved or placed item; counts of placed and removed)
instead of the complete old and new maps, which made every log row O(cluster).
`placement_queue` names the connectors whose work changed (created, tasks added or removed) and
that no rebalance has placed since: triggers fill it in the writer's own transaction, so a create
whose rebalance never ran (a crash between the two) is still found, and the rebalance sensor's
check is one index probe, not a scan of every task.
`assignments(pool)` is indexed for the per-pool load the incremental path reads;
`task_runs(finished_at)` for pruning the run history by age.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    state = op.create_table(
        "rebalance_state",
        sa.Column("id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("generation", sa.BigInteger(), server_default="0", nullable=False),
        sa.Column("pools", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.Column("strategy", sa.Text(), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_rebalance_state")),
        schema="connect",
    )
    op.bulk_insert(state, [{"id": 1, "generation": 0}])
    # the generation so far: the newest any assignment or log row has
    op.execute(
        "UPDATE connect.rebalance_state SET generation = GREATEST("
        "(SELECT coalesce(max(generation), 0) FROM connect.assignments),"
        "(SELECT coalesce(max(generation), 0) FROM connect.rebalance_log))"
    )
    op.add_column(
        "rebalance_log",
        sa.Column("moves", postgresql.JSONB(astext_type=sa.Text()), server_default="[]", nullable=False),
        schema="connect",
    )
    op.add_column(
        "rebalance_log", sa.Column("placed", sa.Integer(), server_default="0", nullable=False), schema="connect"
    )
    op.add_column(
        "rebalance_log", sa.Column("removed", sa.Integer(), server_default="0", nullable=False), schema="connect"
    )
    op.drop_column("rebalance_log", "old", schema="connect")
    op.drop_column("rebalance_log", "new", schema="connect")
    op.create_index(op.f("ix_assignments_pool"), "assignments", ["pool"], schema="connect")
    op.create_index(op.f("ix_task_runs_finished_at"), "task_runs", ["finished_at"], schema="connect")
    op.create_table(
        "placement_queue",
        sa.Column("connector", sa.Text(), nullable=False),
        sa.Column("queued_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.PrimaryKeyConstraint("connector", name=op.f("pk_placement_queue")),
        schema="connect",
    )
    # Task rows deleted with their connector (the foreign key's cascade) queue nothing: the
    # assignments go with the connector.
    for function, column in (("queue_placement", "connector"), ("queue_placement_connectors", "name")):
        op.execute(
            f"CREATE FUNCTION connect.{function}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
            f"INSERT INTO connect.placement_queue (connector) SELECT DISTINCT {column} FROM changed ch "
            f"WHERE EXISTS (SELECT 1 FROM connect.connectors c WHERE c.name = ch.{column}) ORDER BY 1 "
            "ON CONFLICT DO NOTHING; RETURN NULL; END $$"
        )
    for table, event, transition, function in (
        ("connectors", "INSERT", "NEW", "queue_placement_connectors"),
        ("task_configs", "INSERT", "NEW", "queue_placement"),
        ("task_configs", "DELETE", "OLD", "queue_placement"),
    ):
        op.execute(
            f"CREATE TRIGGER queue_placement_{event.lower()} AFTER {event} ON connect.{table} "
            f"REFERENCING {transition} TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION connect.{function}()"
        )
    # work an earlier version left unplaced (none, normally): the sensor's next check places it
    op.execute(
        "INSERT INTO connect.placement_queue (connector) "
        "SELECT name FROM connect.connectors c WHERE NOT EXISTS (SELECT 1 FROM connect.assignments a "
        "WHERE a.connector = c.name AND a.task_id = -1) "
        "UNION SELECT connector FROM connect.task_configs t WHERE NOT EXISTS (SELECT 1 FROM connect.assignments a "
        "WHERE a.connector = t.connector AND a.task_id = t.task_id) ON CONFLICT DO NOTHING"
    )


def downgrade() -> None:
    op.execute("DROP TRIGGER IF EXISTS queue_placement_insert ON connect.connectors")
    op.execute("DROP TRIGGER IF EXISTS queue_placement_insert ON connect.task_configs")
    op.execute("DROP TRIGGER IF EXISTS queue_placement_delete ON connect.task_configs")
    op.execute("DROP FUNCTION IF EXISTS connect.queue_placement_connectors()")
    op.execute("DROP FUNCTION IF EXISTS connect.queue_placement()")
    op.drop_table("placement_queue", schema="connect")
    op.drop_index(op.f("ix_task_runs_finished_at"), table_name="task_runs", schema="connect")
    op.drop_index(op.f("ix_assignments_pool"), table_name="assignments", schema="connect")
    for column in ("old", "new"):
        op.add_column(
            "rebalance_log",
            sa.Column(column, postgresql.JSONB(astext_type=sa.Text()), server_default="{}", nullable=False),
            schema="connect",
        )
    op.drop_column("rebalance_log", "removed", schema="connect")
    op.drop_column("rebalance_log", "placed", schema="connect")
    op.drop_column("rebalance_log", "moves", schema="connect")
    op.drop_table("rebalance_state", schema="connect")
