"""task_run_totals: what sinks wrote to their targets (files, bytes, keys deleted)

A sink reports what its committed runs wrote (`connect_core.sdk.WRITE_REPORT`); `/metrics` sums
it per task, and history retention folds a pruned run's share into these columns as it does the
records'.

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

_COLUMNS = ("files_written", "bytes_written", "keys_deleted")


def upgrade() -> None:
    for name in _COLUMNS:
        op.add_column(
            "task_run_totals",
            sa.Column(name, sa.BigInteger(), server_default=sa.text("0"), nullable=False),
            schema="connect",
        )


def downgrade() -> None:
    for name in reversed(_COLUMNS):
        op.drop_column("task_run_totals", name, schema="connect")
