"""task runs by connector: an index on `task_runs(connector, id)`, so a connector's last runs are
read without scanning its whole history (the Connect view polls them for every connector)

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-25
"""

from __future__ import annotations

from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index(op.f("ix_task_runs_connector_id"), "task_runs", ["connector", "id"], schema="connect")


def downgrade() -> None:
    op.drop_index(op.f("ix_task_runs_connector_id"), table_name="task_runs", schema="connect")
