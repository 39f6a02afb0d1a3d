"""connector topics: Kafka's active topics (KIP-558), the topics each connector has written or read

A run's commit adds the topics it wrote segments to (a source) or committed offsets of (a sink),
if not there yet; `PUT /connectors/{name}/topics/reset` empties the connector's set. Filled here
from what the metadata already shows: the segments of the connector's runs and its sink offsets.

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "connector_topics",
        sa.Column("connector", sa.Text(), nullable=False),
        sa.Column("topic", sa.Text(), nullable=False),
        sa.Column("since", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.ForeignKeyConstraint(
            ["connector"],
            ["connect.connectors.name"],
            name=op.f("fk_connector_topics_connector_connectors"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("connector", "topic", name=op.f("pk_connector_topics")),
        schema="connect",
    )
    op.execute(
        """
        INSERT INTO connect.connector_topics (connector, topic)
        SELECT DISTINCT r.connector, g.topic
        FROM connect.topic_segments g
        JOIN connect.task_runs r ON r.id = g.run_id
        JOIN connect.connectors c ON c.name = r.connector
        UNION
        SELECT DISTINCT o.connector, o.topic
        FROM connect.sink_offsets o
        JOIN connect.connectors c ON c.name = o.connector
        ON CONFLICT DO NOTHING
        """
    )


def downgrade() -> None:
    op.drop_table("connector_topics", schema="connect")
