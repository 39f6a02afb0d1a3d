"""topic_resyncs: where each re-read of a source table (`connect resync`) begins and ends in a topic

A JDBC source re-reading a table (`connect resync NAME --table T`) marks the rows of its batches
(`SourceBatch.resyncs`); the commit of each such run records, per topic partition, the offset the
re-read's first row got (`begin_offset`) and, once it ends, the offset after its last row
(`end_offset`), in the same transaction as the segments. Sinks cut their batches at these offsets
and learn when a `replace` re-read is whole (then they swap their copy in). Rows go with their
topic partition (ON DELETE CASCADE).

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-14
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "topic_resyncs",
        sa.Column("topic", sa.Text(), nullable=False),
        sa.Column("partition", sa.Integer(), nullable=False),
        sa.Column("generation", sa.Integer(), nullable=False),
        sa.Column("mode", sa.Text(), nullable=False),
        sa.Column("connector", sa.Text(), nullable=False),
        sa.Column("begin_offset", sa.BigInteger(), nullable=False),
        sa.Column("end_offset", sa.BigInteger(), nullable=True),
        sa.Column("begin_run", sa.BigInteger(), nullable=False),
        sa.Column("end_run", sa.BigInteger(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.ForeignKeyConstraint(
            ["topic", "partition"],
            ["connect.topic_partitions.topic", "connect.topic_partitions.partition"],
            name=op.f("fk_topic_resyncs_topic_topic_partitions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("topic", "partition", "generation", name=op.f("pk_topic_resyncs")),
        schema="connect",
    )


def downgrade() -> None:
    op.drop_table("topic_resyncs", schema="connect")
