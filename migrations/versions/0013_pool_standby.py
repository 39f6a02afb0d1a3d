"""pool standby: a pool that gets work only while no preferred pool is alive

`connect airflow up` starts a warm pool and makes the classic `local` pool its standby: the
allocation sees the standby pools only while every other pool is dead or failing its probe
(docs/adr/0008-warm-pool-by-default.md).

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column(
        "spark_pools",
        sa.Column("standby", sa.Boolean(), server_default=sa.text("false"), nullable=False),
        schema="connect",
    )


def downgrade() -> None:
    op.drop_column("spark_pools", "standby", schema="connect")
