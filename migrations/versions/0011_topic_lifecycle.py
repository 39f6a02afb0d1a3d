"""topic lifecycle: `topic_segments.size_bytes` (the bytes of a segment's files) and
`topic_partitions.cleaned_offset` (compaction's checkpoint)

Kafka's `retention.bytes` and the merging of small segments weigh segments by their size. The
size is measured once, when the segment is committed (or rewritten by compaction or a merge), so
that a retention pass reads numbers instead of listing every file of every topic. Segments
committed before this migration have none (NULL): the cleaner measures their files once, on its
next pass. `cleaned_offset` is Kafka's cleaner checkpoint: a partition's offsets below it are
compacted, so a compaction pass picks the partitions with new records past it.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("topic_segments", sa.Column("size_bytes", sa.BigInteger(), nullable=True), schema="connect")
    op.add_column(
        "topic_partitions",
        sa.Column("cleaned_offset", sa.BigInteger(), server_default="0", nullable=False),
        schema="connect",
    )


def downgrade() -> None:
    op.drop_column("topic_partitions", "cleaned_offset", schema="connect")
    op.drop_column("topic_segments", "size_bytes", schema="connect")
