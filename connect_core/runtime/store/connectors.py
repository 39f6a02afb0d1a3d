"""Connectors, their task configs, status, source positions and sink offsets.

Every method that changes state is one transaction. Locks are taken in one order by every
writer (the connector row, then its task rows by id, then, through the triggers of migration
0002, the change counter), the order the task runner and the rebalance use too, so concurrent
changes wait for each other instead of deadlocking.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from sqlalchemy import Engine, delete, func, select, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session

from connect_core.runtime.store._connector_model import (
    ConnectorExistsError,
    ConnectorInfo,
    ConnectorOverview,
    ConnectorStatus,
    Listing,
    Page,
    TaskStatus,
)
from connect_core.runtime.store._connector_reads import ConnectorReads
from connect_core.runtime.store.connector_schemas import ConnectorSchemas
from connect_core.runtime.store.db import check_storable
from connect_core.runtime.store.models import (
    RESYNC_ABANDONED,
    ConnectorRow,
    ConnectorStatusRow,
    ConnectorTopicRow,
    SinkOffsetRow,
    SourcePositionRow,
    TaskConfigRow,
    TaskStatusRow,
    TopicPartitionRow,
    TopicResyncRow,
)
from connect_core.runtime.store.signals import SignalStore
from connect_core.runtime.store.states import TARGET_STATES, ConnectorState, TargetState
from connect_core.sdk.errors import NotFoundError
from connect_core.sdk.records import SourcePosition, TopicPartition, partition_key

__all__ = [
    "TARGET_STATES",
    "ConnectorExistsError",
    "ConnectorInfo",
    "ConnectorOverview",
    "ConnectorStatus",
    "ConnectorStore",
    "Listing",
    "Page",
    "TaskStatus",
]


class ConnectorStore(ConnectorReads):
    """Connectors and what belongs to them: the reads (`ConnectorReads`), and the writes, each one
    transaction."""

    def __init__(self, engine: Engine) -> None:
        super().__init__(engine)
        #: the shape each connector last let through per topic (schema contracts, propagation)
        self.schemas = ConnectorSchemas(engine)
        #: signals sent to connectors over REST, waiting for a run to consume them
        self.signals = SignalStore(engine)

    # -- connectors ---------------------------------------------------------

    def create(
        self,
        name: str,
        *,
        connector_class: str,
        type: str,
        config: Mapping[str, Any],
        task_configs: Sequence[Mapping[str, Any]],
        target_state: str = TargetState.RUNNING,
    ) -> ConnectorInfo:
        _check_storable(name, config, task_configs)
        with self._sessions.begin() as s:
            # ON CONFLICT: of concurrent creates of one name, the first commits and the others
            # wait for it on the key, then insert nothing (a check-then-insert would let two
            # through to a unique violation).
            created = s.execute(
                insert(ConnectorRow)
                .values(
                    name=name,
                    connector_class=connector_class,
                    type=type,
                    config=dict(config),
                    target_state=target_state,
                    config_version=1,
                )
                .on_conflict_do_nothing(index_elements=["name"])
                .returning(ConnectorRow.name)
            ).scalar()
            if created is None:
                raise ConnectorExistsError(f"connector `{name}` already exists; delete it first or update its config")
            s.add(ConnectorStatusRow(connector=name, state=target_state))
            s.flush()
            self._replace_tasks(s, name, task_configs, config_version=1)
        # What this transaction wrote, not a read after it: a concurrent delete may already have
        # removed the row, and the create still succeeded (its answer is 201, never 404).
        return ConnectorInfo(
            name=name,
            connector_class=connector_class,
            type=type,
            config=dict(config),
            target_state=target_state,
            config_version=1,
            tasks=tuple(dict(c) for c in task_configs),
        )

    def update_config(
        self,
        name: str,
        *,
        connector_class: str,
        type: str,
        config: Mapping[str, Any],
        task_configs: Sequence[Mapping[str, Any]],
    ) -> ConnectorInfo:
        """Replace the config and task configs; bumps the config version (fencing running tasks)."""
        new = {"connector_class": connector_class, "type": type, "config": config, "task_configs": task_configs}
        return self.modify_config(name, lambda _current: new)

    def modify_config(self, name: str, change: Callable[[dict[str, Any]], Mapping[str, Any]]) -> ConnectorInfo:
        """Read-modify-write of a connector's config under its row lock, in one transaction.

        `change` gets the current config and returns the new `connector_class`, `type`, `config`
        and `task_configs` (it validates: a ConfigError leaves everything as it was). Concurrent
        changes of one connector wait for each other, so none is lost (a PATCH that read the
        config before another PATCH committed would otherwise overwrite it).
        """
        with self._sessions.begin() as s:
            row = self._lock(s, name)
            new = change(dict(row.config))
            _check_storable(name, new["config"], new["task_configs"])
            row.connector_class, row.type = new["connector_class"], new["type"]
            row.config = dict(new["config"])
            row.config_version += 1
            row.updated_at = func.now()
            self._replace_tasks(s, name, new["task_configs"], config_version=row.config_version)
            # As committed by this transaction (a read after it could meet a concurrent delete).
            info = ConnectorInfo(
                name=name,
                connector_class=row.connector_class,
                type=row.type,
                config=dict(new["config"]),
                target_state=row.target_state,
                config_version=row.config_version,
                tasks=tuple(dict(c) for c in new["task_configs"]),
            )
        return info

    def _replace_tasks(
        self, s: Session, name: str, task_configs: Sequence[Mapping[str, Any]], *, config_version: int
    ) -> None:
        existing = {t.task_id: t for t in s.scalars(select(TaskConfigRow).where(TaskConfigRow.connector == name))}
        for task_id, cfg in enumerate(task_configs):
            task = existing.pop(task_id, None)
            if task is None:
                s.add(TaskConfigRow(connector=name, task_id=task_id, config=dict(cfg), config_version=config_version))
                s.add(TaskStatusRow(connector=name, task_id=task_id, state=ConnectorState.UNASSIGNED))
            else:
                # A new config is a new generation: a run of the old config must not commit.
                task.config, task.config_version, task.generation = dict(cfg), config_version, task.generation + 1
        for gone in existing.values():
            s.delete(gone)

    def _lock(self, s: Session, name: str, *, for_delete: bool = False) -> ConnectorRow:
        """Lock the connector's row, then its task rows by id: the lock order of every writer.

        FOR NO KEY UPDATE (not FOR UPDATE) unless deleting: a rebalance holds the connector
        rows FOR KEY SHARE while it writes assignments, and must not wait for a config change.
        """
        query = select(ConnectorRow).where(ConnectorRow.name == name)
        row = s.scalars(query.with_for_update(key_share=not for_delete)).one_or_none()
        if row is None:
            raise NotFoundError(f"connector `{name}` not found")
        # Task rows now, before any write fires the change-counter trigger: a runner locks its task
        # row before the counter, so taking a task row after the counter could deadlock with it.
        s.execute(
            select(TaskConfigRow.task_id)
            .where(TaskConfigRow.connector == name)
            .order_by(TaskConfigRow.task_id)
            .with_for_update()
        )
        return row

    def delete(self, name: str) -> None:
        """Delete the connector, its tasks and status. Positions and offsets stay, as in Kafka Connect."""
        with self._sessions.begin() as s:
            self._lock(s, name, for_delete=True)
            s.execute(delete(ConnectorRow).where(ConnectorRow.name == name))
            _abandon_resyncs(s, name)

    def set_target_state(self, name: str, state: str, reason: str | None = None) -> None:
        """Set what the connector should be doing; `reason` is shown as its status' trace (why the
        runtime paused it)."""
        if state not in TARGET_STATES:
            raise ValueError(f"target state must be one of {TARGET_STATES}, not `{state}`")
        with self._sessions.begin() as s:
            row = self._lock(s, name)
            row.target_state = state
            row.updated_at = func.now()
            s.execute(
                update(ConnectorStatusRow)
                .where(ConnectorStatusRow.connector == name)
                .values(state=state, trace=reason, updated_at=func.now())
            )

    def reset_task_states(self, name: str, task_ids: Sequence[int]) -> None:
        """Clear the given tasks' FAILED state and trace (a restart): they run again when next scheduled."""
        with self._sessions.begin() as s:
            self._lock(s, name)
            s.execute(
                update(TaskStatusRow)
                .where(TaskStatusRow.connector == name, TaskStatusRow.task_id.in_(list(task_ids)))
                .values(state=ConnectorState.UNASSIGNED, trace=None, updated_at=func.now())
            )
            s.execute(
                update(ConnectorStatusRow)
                .where(ConnectorStatusRow.connector == name, ConnectorStatusRow.state == ConnectorState.FAILED)
                .values(state=ConnectorState.RUNNING, trace=None, updated_at=func.now())
            )

    def alter_positions(
        self, name: str, *, set_: Sequence[SourcePosition], remove: Sequence[Mapping[str, Any]]
    ) -> None:
        """Set or remove source positions (Kafka's PATCH offsets); fences running tasks."""
        check_storable([[dict(p.partition), dict(p.offset)] for p in set_] + [dict(p) for p in remove], "offsets")
        with self._sessions.begin() as s:
            self._lock(s, name)
            self._fence(s, name)
            self.upsert_positions(s, name, set_)
            keys = [partition_key(p) for p in remove]
            if keys:
                s.execute(
                    delete(SourcePositionRow).where(
                        SourcePositionRow.connector == name, SourcePositionRow.partition_key.in_(keys)
                    )
                )

    def alter_sink_offsets(self, name: str, changes: Mapping[TopicPartition, int | None]) -> None:
        """Set (or, with None, remove) sink offsets; fences running tasks."""
        with self._sessions.begin() as s:
            self._lock(s, name)
            self._fence(s, name)
            for tp, offset in sorted(changes.items()):
                if offset is None:
                    s.execute(
                        delete(SinkOffsetRow).where(
                            SinkOffsetRow.connector == name,
                            SinkOffsetRow.topic == tp.topic,
                            SinkOffsetRow.partition == tp.partition,
                        )
                    )
                else:
                    # A moved offset invalidates the sink's recovery metadata (it described another position).
                    self.upsert_sink_offsets(s, name, {tp: offset}, {})

    def reset_offsets(self, name: str) -> None:
        """Forget every position and offset of the connector: its next run starts over."""
        with self._sessions.begin() as s:
            self._lock(s, name)
            self._fence(s, name)
            s.execute(delete(SourcePositionRow).where(SourcePositionRow.connector == name))
            s.execute(delete(SinkOffsetRow).where(SinkOffsetRow.connector == name))
            ConnectorSchemas.forget(s, name)  # its next run is a first load: any shape may pass
            SignalStore.forget(s, name)  # what they asked of the positions just forgotten
            _abandon_resyncs(s, name)

    def _fence(self, s: Session, name: str) -> None:
        s.execute(
            update(TaskConfigRow).where(TaskConfigRow.connector == name).values(generation=TaskConfigRow.generation + 1)
        )

    # -- positions and offsets ---------------------------------------------

    def record_topics(self, s: Session, connector: str, topics: Iterable[str]) -> None:
        """Part of a caller's transaction (the run commit): the topics a run wrote or read, added to
        the connector's active topics (Kafka's KIP-558) unless there already."""
        rows = [{"connector": connector, "topic": t} for t in sorted(set(topics))]
        if rows:
            s.execute(insert(ConnectorTopicRow).values(rows).on_conflict_do_nothing())

    def reset_topics(self, connector: str) -> None:
        """Empty the connector's active topics (Kafka's `PUT /connectors/{name}/topics/reset`)."""
        self.get(connector)
        with self._sessions.begin() as s:
            s.execute(delete(ConnectorTopicRow).where(ConnectorTopicRow.connector == connector))

    def upsert_positions(self, s: Session, connector: str, positions: Sequence[SourcePosition]) -> None:
        """Part of a caller's transaction (the run commit)."""
        for p in positions:
            stmt = insert(SourcePositionRow).values(
                connector=connector,
                partition_key=partition_key(p.partition),
                partition=dict(p.partition),
                offset=dict(p.offset),
            )
            s.execute(
                stmt.on_conflict_do_update(
                    index_elements=["connector", "partition_key"],
                    set_={"offset": stmt.excluded.offset, "updated_at": func.now()},
                )
            )

    def upsert_sink_offsets(
        self, s: Session, connector: str, offsets: Mapping[TopicPartition, int], metadata: Mapping[str, Any]
    ) -> None:
        """Part of a caller's transaction (the run commit)."""
        for tp, offset in sorted(offsets.items()):
            stmt = insert(SinkOffsetRow).values(
                connector=connector, topic=tp.topic, partition=tp.partition, offset=offset, metadata_=dict(metadata)
            )
            s.execute(
                stmt.on_conflict_do_update(
                    index_elements=["connector", "topic", "partition"],
                    set_={"offset": stmt.excluded.offset, "metadata": stmt.excluded.metadata, "updated_at": func.now()},
                )
            )


def _check_storable(name: str, config: Mapping[str, Any], task_configs: Sequence[Mapping[str, Any]]) -> None:
    """Refuse, naming the key, what Postgres cannot hold (a NUL in a name or value) before it
    reaches SQL: a database error would be a 500 quoting the statement."""
    check_storable(name, "connector name")
    check_storable(dict(config), "config")
    check_storable([dict(t) for t in task_configs], "task config")


def _abandon_resyncs(s: Session, connector: str) -> None:
    """End the connector's re-reads still running (`connect resync`) where their topic partitions end
    now, as abandoned: the connector is deleted, or its positions forgotten, so their rows will never
    end, and no sink may wait for their end for ever (their rows are ordinary writes from here on)."""
    s.execute(
        update(TopicResyncRow)
        .where(
            TopicResyncRow.connector == connector,
            TopicResyncRow.end_offset.is_(None),
            TopicPartitionRow.topic == TopicResyncRow.topic,
            TopicPartitionRow.partition == TopicResyncRow.partition,
        )
        .values(end_offset=TopicPartitionRow.next_offset, mode=RESYNC_ABANDONED)
    )
