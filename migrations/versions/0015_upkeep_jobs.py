"""upkeep_jobs: the last run of each table-upkeep job of a sink (compaction, expiry, vacuum …)

A sink that declares upkeep jobs (`SinkConnector.upkeep`) and has an `upkeep.schedule` gets one
Airflow task per job; the task runs the job when its last success here is older than the schedule,
and records the run: when, what it did (JSON) or its error. One row per connector and job, so the
table stays as small as the connectors; it goes with its connector.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "upkeep_jobs",
        sa.Column("connector", sa.Text(), nullable=False),
        sa.Column("job", sa.Text(), nullable=False),
        sa.Column("state", sa.Text(), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("succeeded_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("result", postgresql.JSONB(astext_type=sa.Text()), server_default="{}", nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["connector"],
            ["connect.connectors.name"],
            name=op.f("fk_upkeep_jobs_connector_connectors"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("connector", "job", name=op.f("pk_upkeep_jobs")),
        schema="connect",
    )


def downgrade() -> None:
    op.drop_table("upkeep_jobs", schema="connect")
