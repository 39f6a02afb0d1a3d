"""topic_schemas: each topic's schema history (the distinct shapes of its records, numbered)

A run's commit records the schema of what it commits to each topic, in the same transaction as the
segments: a schema the topic had before is that version again, a new one is the topic's latest
version + 1 (made under an advisory lock per topic). `id` numbers the versions of every topic (Confluent
Schema Registry's schema id; `GET /schemas/ids/{id}`). Unique per topic: the version, and the
fingerprint (sha256 of the canonical schema). The rows go with their topic. Topics that exist
already start their history at their next commit: the shapes of segments committed before are not
guessed from their files.

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-08
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "topic_schemas",
        sa.Column("id", sa.BigInteger(), autoincrement=True, nullable=False),
        sa.Column("topic", sa.Text(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("fingerprint", sa.Text(), nullable=False),
        sa.Column("schema", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("run_id", sa.BigInteger(), nullable=False),
        sa.Column("connector", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.ForeignKeyConstraint(
            ["topic"], ["connect.topics.name"], name=op.f("fk_topic_schemas_topic_topics"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_topic_schemas")),
        sa.UniqueConstraint("topic", "fingerprint", name=op.f("uq_topic_schemas_topic_fingerprint")),
        sa.UniqueConstraint("topic", "version", name=op.f("uq_topic_schemas_topic_version")),
        schema="connect",
    )


def downgrade() -> None:
    op.drop_table("topic_schemas", schema="connect")
