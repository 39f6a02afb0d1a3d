"""initial metadata schema

Revision ID: 0001
Revises:
Create Date: 2026-11-21
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = '0001'
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('connectors',
    sa.Column('name', sa.Text(), nullable=False),
    sa.Column('connector_class', sa.Text(), nullable=False),
    sa.Column('type', sa.Text(), nullable=False),
    sa.Column('config', postgresql.JSONB(astext_type=sa.Text()), nullable=False),
    sa.Column('target_state', sa.Text(), server_default='RUNNING', nullable=False),
    sa.Column('config_version', sa.Integer(), server_default='1', nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.PrimaryKeyConstraint('name', name=op.f('pk_connectors')),
    schema='connect'
    )
    op.create_table('sink_offsets',
    sa.Column('connector', sa.Text(), nullable=False),
    sa.Column('topic', sa.Text(), nullable=False),
    sa.Column('partition', sa.Integer(), nullable=False),
    sa.Column('offset', sa.BigInteger(), nullable=False),
    sa.Column('metadata', postgresql.JSONB(astext_type=sa.Text()), server_default='{}', nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.PrimaryKeyConstraint('connector', 'topic', 'partition', name=op.f('pk_sink_offsets')),
    schema='connect'
    )
    op.create_table('source_positions',
    sa.Column('connector', sa.Text(), nullable=False),
    sa.Column('partition_key', sa.Text(), nullable=False),
    sa.Column('partition', postgresql.JSONB(astext_type=sa.Text()), nullable=False),
    sa.Column('offset', postgresql.JSONB(astext_type=sa.Text()), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.PrimaryKeyConstraint('connector', 'partition_key', name=op.f('pk_source_positions')),
    schema='connect'
    )
    op.create_table('task_runs',
    sa.Column('id', sa.BigInteger(), autoincrement=True, nullable=False),
    sa.Column('connector', sa.Text(), nullable=False),
    sa.Column('task_id', sa.Integer(), nullable=False),
    sa.Column('generation', sa.BigInteger(), nullable=False),
    sa.Column('state', sa.Text(), nullable=False),
    sa.Column('worker_id', sa.Text(), nullable=True),
    sa.Column('started_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.Column('heartbeat_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.Column('lease_expires_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('finished_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('stats', postgresql.JSONB(astext_type=sa.Text()), server_default='{}', nullable=False),
    sa.Column('error', sa.Text(), nullable=True),
    sa.Column('staged_paths', postgresql.JSONB(astext_type=sa.Text()), server_default='[]', nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_task_runs')),
    schema='connect'
    )
    op.create_index(op.f('ix_task_runs_connector_task_id_state'), 'task_runs', ['connector', 'task_id', 'state'], unique=False, schema='connect')
    op.create_table('topics',
    sa.Column('name', sa.Text(), nullable=False),
    sa.Column('partitions', sa.Integer(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.PrimaryKeyConstraint('name', name=op.f('pk_topics')),
    schema='connect'
    )
    op.create_table('connector_status',
    sa.Column('connector', sa.Text(), nullable=False),
    sa.Column('state', sa.Text(), nullable=False),
    sa.Column('trace', sa.Text(), nullable=True),
    sa.Column('worker_id', sa.Text(), nullable=True),
    sa.Column('updated_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.ForeignKeyConstraint(['connector'], ['connect.connectors.name'], name=op.f('fk_connector_status_connector_connectors'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('connector', name=op.f('pk_connector_status')),
    schema='connect'
    )
    op.create_table('task_configs',
    sa.Column('connector', sa.Text(), nullable=False),
    sa.Column('task_id', sa.Integer(), nullable=False),
    sa.Column('config', postgresql.JSONB(astext_type=sa.Text()), nullable=False),
    sa.Column('config_version', sa.Integer(), nullable=False),
    sa.Column('generation', sa.BigInteger(), server_default='0', nullable=False),
    sa.ForeignKeyConstraint(['connector'], ['connect.connectors.name'], name=op.f('fk_task_configs_connector_connectors'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('connector', 'task_id', name=op.f('pk_task_configs')),
    schema='connect'
    )
    op.create_table('topic_partitions',
    sa.Column('topic', sa.Text(), nullable=False),
    sa.Column('partition', sa.Integer(), nullable=False),
    sa.Column('next_offset', sa.BigInteger(), server_default='0', nullable=False),
    sa.ForeignKeyConstraint(['topic'], ['connect.topics.name'], name=op.f('fk_topic_partitions_topic_topics'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('topic', 'partition', name=op.f('pk_topic_partitions')),
    schema='connect'
    )
    op.create_table('task_status',
    sa.Column('connector', sa.Text(), nullable=False),
    sa.Column('task_id', sa.Integer(), nullable=False),
    sa.Column('state', sa.Text(), nullable=False),
    sa.Column('trace', sa.Text(), nullable=True),
    sa.Column('worker_id', sa.Text(), nullable=True),
    sa.Column('last_run_id', sa.BigInteger(), nullable=True),
    sa.Column('updated_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.ForeignKeyConstraint(['connector', 'task_id'], ['connect.task_configs.connector', 'connect.task_configs.task_id'], name=op.f('fk_task_status_connector_task_configs'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('connector', 'task_id', name=op.f('pk_task_status')),
    schema='connect'
    )
    op.create_table('topic_segments',
    sa.Column('id', sa.BigInteger(), autoincrement=True, nullable=False),
    sa.Column('topic', sa.Text(), nullable=False),
    sa.Column('partition', sa.Integer(), nullable=False),
    sa.Column('start_offset', sa.BigInteger(), nullable=False),
    sa.Column('end_offset', sa.BigInteger(), nullable=False),
    sa.Column('row_count', sa.BigInteger(), nullable=False),
    sa.Column('path', sa.Text(), nullable=False),
    sa.Column('run_id', sa.BigInteger(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.ForeignKeyConstraint(['run_id'], ['connect.task_runs.id'], name=op.f('fk_topic_segments_run_id_task_runs')),
    sa.ForeignKeyConstraint(['topic', 'partition'], ['connect.topic_partitions.topic', 'connect.topic_partitions.partition'], name=op.f('fk_topic_segments_topic_topic_partitions'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_topic_segments')),
    sa.UniqueConstraint('topic', 'partition', 'start_offset', name=op.f('uq_topic_segments_topic_partition_start_offset')),
    schema='connect'
    )


def downgrade() -> None:
    op.drop_table('topic_segments', schema='connect')
    op.drop_table('task_status', schema='connect')
    op.drop_table('topic_partitions', schema='connect')
    op.drop_table('task_configs', schema='connect')
    op.drop_table('connector_status', schema='connect')
    op.drop_table('topics', schema='connect')
    op.drop_index(op.f('ix_task_runs_connector_task_id_state'), table_name='task_runs', schema='connect')
    op.drop_table('task_runs', schema='connect')
    op.drop_table('source_positions', schema='connect')
    op.drop_table('sink_offsets', schema='connect')
    op.drop_table('connectors', schema='connect')
