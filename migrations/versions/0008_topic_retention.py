"""topic retention: each topic's config (Kafka's `retention.ms`), and the runs its segments came from

`topics.config` holds a topic's own settings (`retention.ms`; missing keys take the runtime's
defaults). Segments past retention and committed by every sink that reads them are deleted
(`runtime.topics.retention`); the run history's pruning keeps a run while a segment refers to
it, so `topic_segments(run_id)` is indexed for that check.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column(
        "topics",
        sa.Column("config", postgresql.JSONB(), server_default=sa.text("'{}'::jsonb"), nullable=False),
        schema="connect",
    )
    op.create_index(op.f("ix_topic_segments_run_id"), "topic_segments", ["run_id"], schema="connect")


def downgrade() -> None:
    op.drop_index(op.f("ix_topic_segments_run_id"), table_name="topic_segments", schema="connect")
    op.drop_column("topics", "config", schema="connect")
