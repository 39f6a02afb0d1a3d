"""spark pools, assignments and the rebalance log

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-21
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "spark_pools",
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("master", sa.Text(), nullable=False),
        sa.Column("conf", postgresql.JSONB(astext_type=sa.Text()), server_default="{}", nullable=False),
        sa.Column("capacity", sa.Integer(), server_default="1", nullable=False),
        sa.Column("labels", postgresql.JSONB(astext_type=sa.Text()), server_default="{}", nullable=False),
        sa.Column("heartbeat_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_spark_pools")),
        schema="connect",
    )
    op.create_table(
        "assignments",
        sa.Column("connector", sa.Text(), nullable=False),
        sa.Column("task_id", sa.Integer(), nullable=False),  # -1: the connector itself
        sa.Column("pool", sa.Text(), nullable=False),
        sa.Column("generation", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["connector"], ["connect.connectors.name"], name=op.f("fk_assignments_connector_connectors"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("connector", "task_id", name=op.f("pk_assignments")),
        schema="connect",
    )
    op.create_table(
        "rebalance_log",
        sa.Column("id", sa.BigInteger(), autoincrement=True, nullable=False),
        sa.Column("generation", sa.BigInteger(), nullable=False),
        sa.Column("strategy", sa.Text(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("moved", sa.Integer(), nullable=False),
        sa.Column("old", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("new", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_rebalance_log")),
        schema="connect",
    )
    # Out of the box: one pool, the machine itself.
    op.execute("INSERT INTO connect.spark_pools (name, master, capacity) VALUES ('local', 'local[*]', 2)")


def downgrade() -> None:
    op.drop_table("rebalance_log", schema="connect")
    op.drop_table("assignments", schema="connect")
    op.drop_table("spark_pools", schema="connect")
