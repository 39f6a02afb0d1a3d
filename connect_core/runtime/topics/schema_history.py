"""Each topic's schema history: every distinct shape its records had, numbered, and the run that
introduced it (`connect.topic_schemas`, migration 0016).

A run's commit records the schema of each segment it commits, in the commit's own transaction
(`RunStore.commit`): a run that never commits leaves no version, and a version never exists without
the data that had it. A schema the topic had before (a column dropped, then added again the same
way) is that version again, not a new one, as Confluent Schema Registry answers a schema it knows.
A new version is `max + 1` under a transaction-scoped advisory lock per topic, so the tasks of one
connector (or several connectors) committing one new shape at once make one version, and two new
shapes two consecutive ones. Known shapes (every commit but the first of a shape) take no lock:
one indexed read. The rows go with their topic (ON DELETE CASCADE).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Engine, func, select, text
from sqlalchemy.orm import Session, sessionmaker

from connect_core.runtime.store.models import TopicSchemaRow
from connect_core.runtime.topics.schemas import TopicSchema

__all__ = ["SchemaHistory", "SchemaVersion"]

#: The first key of the two-key advisory lock of a topic's new versions (`schema` in ASCII, cut to
#: 32 bits); the second is the topic name's hash (`hashtext`). Another topic with the same hash only
#: waits: the keys are taken in their order (`SchemaHistory.record`), so that never deadlocks.
_LOCK_CLASS = 0x73636865


@dataclass(frozen=True)
class SchemaVersion:
    topic: str
    version: int
    #: unique over every topic (Confluent's schema id)
    id: int
    schema: TopicSchema
    run_id: int
    connector: str | None
    created_at: datetime

    def to_dict(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "version": self.version,
            "id": self.id,
            "fingerprint": self.schema.fingerprint,
            "run_id": self.run_id,
            "connector": self.connector,
            "created_at": self.created_at.isoformat(),
            "schema": dict(self.schema.document),
        }


class SchemaHistory:
    def __init__(self, engine: Engine) -> None:
        self._sessions = sessionmaker(engine, expire_on_commit=False)

    @staticmethod
    def record(
        s: Session, shapes: Sequence[tuple[str, TopicSchema]], run_id: int, connector: str | None
    ) -> list[tuple[str, int]]:
        """Make each `(topic, schema)` of a commit a version of its topic unless it is one already;
        part of the caller's commit. The new versions, as (topic, number)."""
        new = [(topic, schema) for topic, schema in shapes if not _known(s, topic, schema.fingerprint)]
        if not new:
            return []
        # The locks of every topic with a new shape, in the order of their keys, not of the topics'
        # names: two topics whose names hash alike share a key, and two commits taking them by name
        # (a < b < c, a's key = c's) would each hold the lock the other waits for.
        keys = s.scalars(
            text("SELECT DISTINCT hashtext(t) AS k FROM unnest(CAST(:topics AS text[])) AS t ORDER BY k"),
            {"topics": sorted({topic for topic, _ in new})},
        ).all()
        for key in keys:
            s.execute(text("SELECT pg_advisory_xact_lock(:c, :k)"), {"c": _LOCK_CLASS, "k": key})
        made = []
        for topic, schema in new:
            if _known(s, topic, schema.fingerprint):  # made by a commit we waited for
                continue
            latest = s.scalar(select(func.max(TopicSchemaRow.version)).where(TopicSchemaRow.topic == topic)) or 0
            s.add(
                TopicSchemaRow(
                    topic=topic,
                    version=latest + 1,
                    fingerprint=schema.fingerprint,
                    schema=dict(schema.document),
                    run_id=run_id,
                    connector=connector,
                )
            )
            s.flush()
            made.append((topic, latest + 1))
        return made

    def topics(self) -> list[str]:
        """The topics that have a schema history, by name."""
        with self._sessions() as s:
            return list(s.scalars(select(TopicSchemaRow.topic).distinct().order_by(TopicSchemaRow.topic)))

    def versions(self, topic: str) -> list[int]:
        """`topic`'s version numbers, oldest first ([]: no history)."""
        with self._sessions() as s:
            query = select(TopicSchemaRow.version).where(TopicSchemaRow.topic == topic)
            return list(s.scalars(query.order_by(TopicSchemaRow.version)))

    def version(self, topic: str, version: int | None = None) -> SchemaVersion | None:
        """Version `version` of `topic`'s schema (None: the latest), or None when there is none."""
        with self._sessions() as s:
            query = select(TopicSchemaRow).where(TopicSchemaRow.topic == topic)
            if version is not None:
                query = query.where(TopicSchemaRow.version == version)
            row = s.scalars(query.order_by(TopicSchemaRow.version.desc()).limit(1)).one_or_none()
            return _version(row) if row is not None else None

    def by_id(self, schema_id: int) -> SchemaVersion | None:
        with self._sessions() as s:
            row = s.get(TopicSchemaRow, schema_id)
            return _version(row) if row is not None else None


def _known(s: Session, topic: str, fingerprint: str) -> bool:
    query = select(TopicSchemaRow.version).where(
        TopicSchemaRow.topic == topic, TopicSchemaRow.fingerprint == fingerprint
    )
    return s.scalar(query) is not None


def _version(row: TopicSchemaRow) -> SchemaVersion:
    return SchemaVersion(
        topic=row.topic,
        version=row.version,
        id=row.id,
        schema=TopicSchema(row.schema, row.fingerprint),
        run_id=row.run_id,
        connector=row.connector,
        created_at=row.created_at,
    )
