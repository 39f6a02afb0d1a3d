"""cluster id: the metadata database's identity, a random uuid made once

The topic store puts it in the paths of new segments, so that two metadata
databases sharing one topics directory (the embedded default, then a server's
CONNECT_DATABASE_URL) never write to each other's paths: run ids are unique only
within one database. Segments committed before keep their recorded paths.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-24
"""

from __future__ import annotations

import uuid

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    cluster = op.create_table(
        "cluster",
        sa.Column("id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("cluster_id", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_cluster")),
        schema="connect",
    )
    # Made here, in Python, so the id needs no database extension; one row, id 1.
    op.bulk_insert(cluster, [{"id": 1, "cluster_id": str(uuid.uuid4())}])


def downgrade() -> None:
    op.drop_table("cluster", schema="connect")
