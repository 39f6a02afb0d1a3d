"""task run totals: what pruned runs counted, per task, so that run totals never go down

History retention deletes old task runs; the `/metrics` run totals (runs committed and failed,
records, records set aside, the last error) are a `GROUP BY` over the runs that are left plus this
row, to which the pruning adds the deleted runs' totals in the statement that deletes them. The row
belongs to the connector (deleted with it), not to a task config: a reconfigured task keeps it.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "task_run_totals",
        sa.Column("connector", sa.Text(), nullable=False),
        sa.Column("task_id", sa.Integer(), nullable=False),
        sa.Column("succeeded", sa.BigInteger(), server_default="0", nullable=False),
        sa.Column("failed", sa.BigInteger(), server_default="0", nullable=False),
        sa.Column("records", sa.BigInteger(), server_default="0", nullable=False),
        sa.Column("errored", sa.BigInteger(), server_default="0", nullable=False),
        sa.Column("last_error_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.ForeignKeyConstraint(
            ["connector"],
            ["connect.connectors.name"],
            name=op.f("fk_task_run_totals_connector_connectors"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("connector", "task_id", name=op.f("pk_task_run_totals")),
        schema="connect",
    )


def downgrade() -> None:
    op.drop_table("task_run_totals", schema="connect")
