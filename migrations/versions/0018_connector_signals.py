"""connector_signals: signals sent to a connector over REST (Debezium's signals, the `rest` channel)

`POST /connectors/{name}/signals` (or `connect snapshot`) adds a row; the connector's next run gets
the signals not consumed yet and its commit marks them consumed (`consumed_run`), in the same
transaction as the positions they changed (an incremental snapshot's progress): a run that fails
leaves them for the next. Keyed by the connector's name without a foreign key, as its positions.

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-12
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "connector_signals",
        sa.Column("id", sa.BigInteger(), autoincrement=True, nullable=False),
        sa.Column("connector", sa.Text(), nullable=False),
        sa.Column("signal_id", sa.Text(), nullable=False),
        sa.Column("type", sa.Text(), nullable=False),
        sa.Column("data", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("consumed_run", sa.BigInteger(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_connector_signals")),
        schema="connect",
    )
    op.create_index(
        "ix_connector_signals_pending",
        "connector_signals",
        ["connector", "id"],
        schema="connect",
        postgresql_where=sa.text("consumed_run IS NULL"),
    )


def downgrade() -> None:
    op.drop_index("ix_connector_signals_pending", table_name="connector_signals", schema="connect")
    op.drop_table("connector_signals", schema="connect")
