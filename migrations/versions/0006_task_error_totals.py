"""task error totals: each task's records failed, skipped, dead-lettered and retries, summed over its runs

Kafka Connect keeps these as task metrics (`task-error-metrics`); here they are a column of the
task's status row, added to in the transaction that ends each run, and shown with the task's state.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column(
        "task_status",
        sa.Column("errors", postgresql.JSONB(), server_default=sa.text("'{}'::jsonb"), nullable=False),
        schema="connect",
    )


def downgrade() -> None:
    op.drop_column("task_status", "errors", schema="connect")
