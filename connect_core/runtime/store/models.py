"""The metadata schema (Postgres schema `connect`), as SQLAlchemy 2 typed models.

The Alembic migrations in `migrations/` create these tables; the models are
what the runtime reads and writes. Positions and sink offsets deliberately have
no foreign key to `connectors`: as in Kafka Connect, deleting a connector and
creating it again under the same name resumes where it left off.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    DateTime,
    ForeignKey,
    ForeignKeyConstraint,
    Index,
    Integer,
    MetaData,
    Text,
    UniqueConstraint,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from connect_core.runtime.store.states import TargetState

__all__ = [
    "SCHEMA",
    "AssignmentRow",
    "Base",
    "ChangeCounterRow",
    "ClusterRow",
    "ConnectorRow",
    "ConnectorSchemaRow",
    "ConnectorSignalRow",
    "ConnectorStatusRow",
    "PlacementQueueRow",
    "RebalanceLogRow",
    "RebalanceStateRow",
    "SinkOffsetRow",
    "SourcePositionRow",
    "SparkPoolRow",
    "TaskConfigRow",
    "TaskRunRow",
    "TaskRunTotalsRow",
    "TaskStatusRow",
    "TopicPartitionRow",
    "TopicRow",
    "TopicSchemaRow",
    "TopicSegmentRow",
    "UpkeepJobRow",
]

SCHEMA = "connect"

_NAMING = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    metadata = MetaData(schema=SCHEMA, naming_convention=_NAMING)
    type_annotation_map = {dict[str, Any]: JSONB, list[Any]: JSONB, datetime: DateTime(timezone=True)}


def _now() -> Mapped[datetime]:
    return mapped_column(server_default=func.now())


class ConnectorRow(Base):
    __tablename__ = "connectors"

    name: Mapped[str] = mapped_column(Text, primary_key=True)
    connector_class: Mapped[str] = mapped_column(Text)
    type: Mapped[str] = mapped_column(Text)  # "source" | "sink"
    config: Mapped[dict[str, Any]]
    target_state: Mapped[str] = mapped_column(Text, server_default=TargetState.RUNNING)  # a `TargetState`
    config_version: Mapped[int] = mapped_column(Integer, server_default="1")
    created_at: Mapped[datetime] = _now()
    updated_at: Mapped[datetime] = _now()


class TaskConfigRow(Base):
    __tablename__ = "task_configs"

    connector: Mapped[str] = mapped_column(Text, ForeignKey(ConnectorRow.name, ondelete="CASCADE"), primary_key=True)
    task_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    config: Mapped[dict[str, Any]]
    config_version: Mapped[int] = mapped_column(Integer)
    # Fencing epoch: bumped whenever a run takes the task's lease or the task is
    # reassigned. A run may commit only while the generation is still its own.
    generation: Mapped[int] = mapped_column(BigInteger, server_default="0")


class ConnectorStatusRow(Base):
    __tablename__ = "connector_status"

    connector: Mapped[str] = mapped_column(Text, ForeignKey(ConnectorRow.name, ondelete="CASCADE"), primary_key=True)
    state: Mapped[str] = mapped_column(Text)  # a `ConnectorState`
    trace: Mapped[str | None] = mapped_column(Text)
    worker_id: Mapped[str | None] = mapped_column(Text)
    updated_at: Mapped[datetime] = _now()


class TaskStatusRow(Base):
    __tablename__ = "task_status"
    __table_args__ = (
        ForeignKeyConstraint(
            ["connector", "task_id"],
            [TaskConfigRow.connector, TaskConfigRow.task_id],
            ondelete="CASCADE",
        ),
    )

    connector: Mapped[str] = mapped_column(Text, primary_key=True)
    task_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    state: Mapped[str] = mapped_column(Text)  # a `ConnectorState`
    trace: Mapped[str | None] = mapped_column(Text)
    worker_id: Mapped[str | None] = mapped_column(Text)
    last_run_id: Mapped[int | None] = mapped_column(BigInteger)
    #: records failed, skipped, dead-lettered, and retries: summed over the task's runs (Kafka's task-error-metrics)
    errors: Mapped[dict[str, Any]] = mapped_column(JSONB, server_default="{}")
    updated_at: Mapped[datetime] = _now()


class SourcePositionRow(Base):
    __tablename__ = "source_positions"

    connector: Mapped[str] = mapped_column(Text, primary_key=True)
    partition_key: Mapped[str] = mapped_column(Text, primary_key=True)
    partition: Mapped[dict[str, Any]]
    offset: Mapped[dict[str, Any]]
    updated_at: Mapped[datetime] = _now()


class SinkOffsetRow(Base):
    __tablename__ = "sink_offsets"

    connector: Mapped[str] = mapped_column(Text, primary_key=True)
    topic: Mapped[str] = mapped_column(Text, primary_key=True)
    partition: Mapped[int] = mapped_column(Integer, primary_key=True)
    offset: Mapped[int] = mapped_column(BigInteger)
    # Kafka's OffsetAndMetadata: what the sink commits together with the offset.
    metadata_: Mapped[dict[str, Any]] = mapped_column("metadata", JSONB, server_default="{}")
    updated_at: Mapped[datetime] = _now()


class TopicRow(Base):
    __tablename__ = "topics"

    name: Mapped[str] = mapped_column(Text, primary_key=True)
    partitions: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = _now()
    # The topic's own settings (`retention.ms`), migration 0008; missing keys take the defaults.
    config: Mapped[dict[str, Any]] = mapped_column(JSONB, server_default="{}")


class TopicPartitionRow(Base):
    __tablename__ = "topic_partitions"

    topic: Mapped[str] = mapped_column(Text, ForeignKey(TopicRow.name, ondelete="CASCADE"), primary_key=True)
    partition: Mapped[int] = mapped_column(Integer, primary_key=True)
    # Offset the next committed segment starts at; row-locked while committing.
    next_offset: Mapped[int] = mapped_column(BigInteger, server_default="0")
    # Compaction's checkpoint (migration 0011): offsets below it are compacted (Kafka's cleaner offset).
    cleaned_offset: Mapped[int] = mapped_column(BigInteger, server_default="0")


class TaskRunRow(Base):
    __tablename__ = "task_runs"
    __table_args__ = (Index(None, "connector", "task_id", "state"), Index(None, "connector", "id"))  # 2nd: 0009

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    connector: Mapped[str] = mapped_column(Text)
    task_id: Mapped[int] = mapped_column(Integer)
    generation: Mapped[int] = mapped_column(BigInteger)
    # a `RunState`: RUNNING -> SUCCEEDED | FAILED | FENCED | ABANDONED (lease expired, taken over)
    state: Mapped[str] = mapped_column(Text)
    worker_id: Mapped[str | None] = mapped_column(Text)
    started_at: Mapped[datetime] = _now()
    heartbeat_at: Mapped[datetime] = _now()
    lease_expires_at: Mapped[datetime]
    finished_at: Mapped[datetime | None] = mapped_column(index=True)
    stats: Mapped[dict[str, Any]] = mapped_column(JSONB, server_default="{}")
    error: Mapped[str | None] = mapped_column(Text)
    # Paths the run writes to, recorded before writing so that a killed run's
    # files can be found and deleted; cleared once they are committed or gone.
    staged_paths: Mapped[list[Any]] = mapped_column(JSONB, server_default="[]")
    pool: Mapped[str | None] = mapped_column(Text)  # the Spark pool it ran on (migration 0004)


class TaskRunTotalsRow(Base):
    """What the task's pruned runs counted (migration 0010): `/metrics` adds it to the totals of the runs
    left, and history retention adds to it what it deletes, in the same statement."""

    __tablename__ = "task_run_totals"

    connector: Mapped[str] = mapped_column(Text, ForeignKey(ConnectorRow.name, ondelete="CASCADE"), primary_key=True)
    task_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    succeeded: Mapped[int] = mapped_column(BigInteger, server_default="0")
    failed: Mapped[int] = mapped_column(BigInteger, server_default="0")  # FAILED or FENCED
    records: Mapped[int] = mapped_column(BigInteger, server_default="0")  # of committed runs
    errored: Mapped[int] = mapped_column(BigInteger, server_default="0")  # of committed runs
    last_error_at: Mapped[datetime | None]
    # what sinks' committed runs wrote to their targets (migration 0014)
    files_written: Mapped[int] = mapped_column(BigInteger, server_default="0")
    bytes_written: Mapped[int] = mapped_column(BigInteger, server_default="0")
    keys_deleted: Mapped[int] = mapped_column(BigInteger, server_default="0")
    updated_at: Mapped[datetime] = _now()


class ConnectorTopicRow(Base):
    """A topic the connector wrote or read since it was created or its set was reset (Kafka's active
    topics, KIP-558; migration 0012): added by the run commits, emptied by `PUT …/topics/reset`."""

    __tablename__ = "connector_topics"

    connector: Mapped[str] = mapped_column(Text, ForeignKey(ConnectorRow.name, ondelete="CASCADE"), primary_key=True)
    topic: Mapped[str] = mapped_column(Text, primary_key=True)
    since: Mapped[datetime] = _now()


class UpkeepJobRow(Base):
    """The last run of one table-upkeep job of a sink (migration 0015): a job is due when its last
    success (`succeeded_at`) is older than the connector's `upkeep.schedule`."""

    __tablename__ = "upkeep_jobs"

    connector: Mapped[str] = mapped_column(Text, ForeignKey(ConnectorRow.name, ondelete="CASCADE"), primary_key=True)
    job: Mapped[str] = mapped_column(Text, primary_key=True)
    state: Mapped[str] = mapped_column(Text)  # SUCCEEDED | FAILED, of the last run
    started_at: Mapped[datetime]
    finished_at: Mapped[datetime]
    succeeded_at: Mapped[datetime | None]  # the last success's finish, kept through failures
    result: Mapped[dict[str, Any]] = mapped_column(JSONB, server_default="{}")  # what the last run did
    error: Mapped[str | None] = mapped_column(Text)  # the last run's, one line, masked


class ChangeCounterRow(Base):
    """One row; triggers on connectors, task_configs and the status tables bump `n` (migration 0002)."""

    __tablename__ = "change_counter"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    n: Mapped[int] = mapped_column(BigInteger, server_default="0")


class SparkPoolRow(Base):
    """A named Spark execution target (the Connect "worker"); alive while it heartbeats."""

    __tablename__ = "spark_pools"

    name: Mapped[str] = mapped_column(Text, primary_key=True)
    master: Mapped[str] = mapped_column(Text)
    conf: Mapped[dict[str, Any]] = mapped_column(JSONB, server_default="{}")
    capacity: Mapped[int] = mapped_column(Integer, server_default="1")
    labels: Mapped[dict[str, Any]] = mapped_column(JSONB, server_default="{}")
    heartbeat_at: Mapped[datetime] = _now()
    created_at: Mapped[datetime] = _now()
    # How the pool is probed (a standalone master's /json, any URL answering 2xx) and
    # what the last probe said (migration 0004).
    probe_url: Mapped[str | None] = mapped_column(Text)
    probe: Mapped[dict[str, Any]] = mapped_column(JSONB, server_default="{}")
    # A standby pool gets work only while no other pool is alive (migration 0013, ADR 0008).
    standby: Mapped[bool] = mapped_column(Boolean, server_default=text("false"))


class AssignmentRow(Base):
    """Which pool runs a connector (task_id -1) or task, as of which rebalance generation."""

    __tablename__ = "assignments"

    connector: Mapped[str] = mapped_column(Text, ForeignKey(ConnectorRow.name, ondelete="CASCADE"), primary_key=True)
    task_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    pool: Mapped[str] = mapped_column(Text, index=True)
    generation: Mapped[int] = mapped_column(BigInteger)


class RebalanceStateRow(Base):
    """One row: the latest rebalance generation, and the live pools (name → capacity) and strategy
    the last full allocation ran with; while they hold, a rebalance places only what is new
    (migration 0007)."""

    __tablename__ = "rebalance_state"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    generation: Mapped[int] = mapped_column(BigInteger, server_default="0")
    pools: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    strategy: Mapped[str | None] = mapped_column(Text)
    updated_at: Mapped[datetime] = _now()


class PlacementQueueRow(Base):
    """A connector whose work changed (created; tasks added or removed) since a rebalance last
    placed it: filled by triggers in the writer's transaction, emptied by the rebalance (0007)."""

    __tablename__ = "placement_queue"

    connector: Mapped[str] = mapped_column(Text, primary_key=True)
    queued_at: Mapped[datetime] = _now()


class RebalanceLogRow(Base):
    __tablename__ = "rebalance_log"

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    generation: Mapped[int] = mapped_column(BigInteger)
    strategy: Mapped[str] = mapped_column(Text)
    reason: Mapped[str] = mapped_column(Text)
    moved: Mapped[int] = mapped_column(Integer)
    # [item, from pool or null, to pool] of each item placed or moved; counts (migration 0007)
    moves: Mapped[list[Any]] = mapped_column(JSONB, server_default="[]")
    placed: Mapped[int] = mapped_column(Integer, server_default="0")
    removed: Mapped[int] = mapped_column(Integer, server_default="0")
    created_at: Mapped[datetime] = _now()


class TopicSegmentRow(Base):
    __tablename__ = "topic_segments"
    __table_args__ = (
        UniqueConstraint("topic", "partition", "start_offset"),
        ForeignKeyConstraint(
            ["topic", "partition"],
            [TopicPartitionRow.topic, TopicPartitionRow.partition],
            ondelete="CASCADE",
        ),
    )

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    topic: Mapped[str] = mapped_column(Text)
    partition: Mapped[int] = mapped_column(Integer)
    start_offset: Mapped[int] = mapped_column(BigInteger)
    end_offset: Mapped[int] = mapped_column(BigInteger)  # exclusive
    row_count: Mapped[int] = mapped_column(BigInteger)
    path: Mapped[str] = mapped_column(Text)
    run_id: Mapped[int] = mapped_column(BigInteger, ForeignKey(TaskRunRow.id), index=True)  # migration 0008
    created_at: Mapped[datetime] = _now()
    # Bytes of its files (migration 0011); NULL for a segment committed before, until the cleaner measures it.
    size_bytes: Mapped[int | None] = mapped_column(BigInteger)


class TopicSchemaRow(Base):
    """One version of a topic's schema (migration 0016): a distinct shape of its records, numbered per
    topic, with the run whose commit introduced it (`runtime.topics.schema_history`). `id` is unique
    over every topic (Confluent Schema Registry's schema id). `run_id` has no foreign key: history
    retention deletes old runs, and the version keeps the number."""

    __tablename__ = "topic_schemas"
    __table_args__ = (UniqueConstraint("topic", "version"), UniqueConstraint("topic", "fingerprint"))

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    topic: Mapped[str] = mapped_column(Text, ForeignKey(TopicRow.name, ondelete="CASCADE"))
    version: Mapped[int] = mapped_column(Integer)
    fingerprint: Mapped[str] = mapped_column(Text)  # sha256 (hex) of the canonical `schema`
    schema: Mapped[dict[str, Any]]  # {"columns": [{"name", "type", "nullable"}…], "key": […]}
    run_id: Mapped[int] = mapped_column(BigInteger)
    connector: Mapped[str | None] = mapped_column(Text)  # the run's connector, kept after it is deleted
    created_at: Mapped[datetime] = _now()


class ConnectorSchemaRow(Base):
    """The shape a connector last let through for one topic (migration 0017): a source's into it, a
    sink's out of it; what its schema contract and propagation compare a run's records with. `pending`:
    the change a sink paused on, until accepted or reset. No foreign key: it stays with the positions
    and offsets when the connector is deleted (`runtime.store.connector_schemas`)."""

    __tablename__ = "connector_schemas"

    connector: Mapped[str] = mapped_column(Text, primary_key=True)
    topic: Mapped[str] = mapped_column(Text, primary_key=True)
    fingerprint: Mapped[str] = mapped_column(Text)
    schema: Mapped[dict[str, Any]]
    run_id: Mapped[int | None] = mapped_column(BigInteger)
    pending: Mapped[dict[str, Any] | None] = mapped_column(JSONB(none_as_null=True))  # None: SQL NULL
    updated_at: Mapped[datetime] = _now()


class ConnectorSignalRow(Base):
    """A signal sent to a connector over REST (migration 0018): consumed by the commit of the run
    that got it (`runtime.store.signals`)."""

    __tablename__ = "connector_signals"
    __table_args__ = (
        Index(
            "ix_connector_signals_pending",
            "connector",
            "id",
            postgresql_where=text("consumed_run IS NULL"),
        ),
    )

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    connector: Mapped[str] = mapped_column(Text)
    signal_id: Mapped[str] = mapped_column(Text)
    type: Mapped[str] = mapped_column(Text)
    data: Mapped[dict[str, Any]]
    consumed_run: Mapped[int | None] = mapped_column(BigInteger)
    created_at: Mapped[datetime] = _now()


#: The mode of a re-read that will never end (its source's positions were reset or the source deleted
#: midway, or another writer wrote into it): its rows are ordinary writes, no sink is told its end.
RESYNC_ABANDONED = "abandoned"


class TopicResyncRow(Base):
    """Where one re-read of a source table (`connect resync`, migration 0019) begins and ends in a topic
    partition: offsets [begin_offset, end_offset), end_offset NULL while it runs. Recorded by the
    source runs' commits (`runtime.topics.resyncs`); sinks read it to cut their batches there and to
    know when a `replace` re-read is whole. `generation` numbers the topic's re-reads."""

    __tablename__ = "topic_resyncs"
    __table_args__ = (
        ForeignKeyConstraint(
            ["topic", "partition"],
            [TopicPartitionRow.topic, TopicPartitionRow.partition],
            ondelete="CASCADE",
        ),
    )

    topic: Mapped[str] = mapped_column(Text, primary_key=True)
    partition: Mapped[int] = mapped_column(Integer, primary_key=True)
    generation: Mapped[int] = mapped_column(Integer, primary_key=True)
    mode: Mapped[str] = mapped_column(Text)  # replace | retain | RESYNC_ABANDONED
    connector: Mapped[str] = mapped_column(Text)
    begin_offset: Mapped[int] = mapped_column(BigInteger)
    end_offset: Mapped[int | None] = mapped_column(BigInteger)  # exclusive; NULL: not ended yet
    begin_run: Mapped[int] = mapped_column(BigInteger)
    end_run: Mapped[int | None] = mapped_column(BigInteger)
    created_at: Mapped[datetime] = _now()


class ClusterRow(Base):
    """The metadata database's identity: one row (id 1), made by migration 0005."""

    __tablename__ = "cluster"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    cluster_id: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = _now()
