"""pool probes: how a pool is probed, what the last probe said, and which pool ran a run

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("spark_pools", sa.Column("probe_url", sa.Text(), nullable=True), schema="connect")
    op.add_column(
        "spark_pools",
        sa.Column("probe", postgresql.JSONB(astext_type=sa.Text()), server_default="{}", nullable=False),
        schema="connect",
    )
    op.add_column("task_runs", sa.Column("pool", sa.Text(), nullable=True), schema="connect")


def downgrade() -> None:
    op.drop_column("task_runs", "pool", schema="connect")
    op.drop_column("spark_pools", "probe", schema="connect")
    op.drop_column("spark_pools", "probe_url", schema="connect")
