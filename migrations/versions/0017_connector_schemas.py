"""connector_schemas: the shape each connector last let through for each of its topics

A schema contract (`schema.contract.*`) and a sink's propagation (`schema.propagation`) compare the
records of a run with the shape the connector carried before for that topic: a source's into the
topic, a sink's out of it. The row is written by the run's commit, in the same transaction as its
data and positions or offsets. `pending` holds a change a sink paused on (`schema.propagation`),
until it is accepted or reset. Keyed by the connector's name with no foreign key, as positions and
offsets are: they stay when the connector is deleted, so a connector created again under that name
resumes with them, and go with `DELETE /connectors/{name}/offsets`.

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-10
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "connector_schemas",
        sa.Column("connector", sa.Text(), nullable=False),
        sa.Column("topic", sa.Text(), nullable=False),
        sa.Column("fingerprint", sa.Text(), nullable=False),
        sa.Column("schema", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("run_id", sa.BigInteger(), nullable=True),
        sa.Column("pending", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.PrimaryKeyConstraint("connector", "topic", name=op.f("pk_connector_schemas")),
        schema="connect",
    )


def downgrade() -> None:
    op.drop_table("connector_schemas", schema="connect")
