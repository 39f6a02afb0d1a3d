"""The shape each connector last let through for each of its topics (`connect.connector_schemas`,
migration 0017), and the change a sink paused on.

A run's schema contract (`runtime.processing.contract`) and a sink's propagation compare the run's
records with this shape; the run's commit records what it let through (`record`, part of the
commit's transaction), so the shape moves with the data and positions, never ahead of them. A write
happens only when the shape changed: a commit of a known shape costs one `ON CONFLICT … WHERE`
that matches nothing.

The rows are the connector's as its positions and offsets are: keyed by its name, kept when it is
deleted, forgotten with its offsets (`forget`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine, delete, func, null, select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session, sessionmaker

from connect_core.runtime.store.models import ConnectorSchemaRow

__all__ = ["ConnectorSchemas", "Pending", "Reference", "Shape"]


@dataclass(frozen=True)
class Shape:
    """A topic schema as stored: its canonical document and fingerprint (`runtime.topics.schemas`
    makes and compares them; the store keeps them as they are)."""

    document: Mapping[str, Any]
    fingerprint: str


@dataclass(frozen=True)
class Pending:
    """A change a sink paused on: the shape it met, what changed, and why it stopped."""

    schema: Shape
    diff: Mapping[str, Any]
    reason: str
    run_id: int | None
    #: accepted (`accept`): the sink's next run propagates it as `propagate_columns` would, and its
    #: commit takes the shape as the connector's
    accepted: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": dict(self.schema.document),
            "fingerprint": self.schema.fingerprint,
            "diff": dict(self.diff),
            "reason": self.reason,
            "run_id": self.run_id,
            "accepted": self.accepted,
        }

    @classmethod
    def from_dict(cls, value: Mapping[str, Any]) -> Pending:
        shape = Shape(value["schema"], value["fingerprint"])
        return cls(shape, value.get("diff", {}), value["reason"], value.get("run_id"), bool(value.get("accepted")))


@dataclass(frozen=True)
class Reference:
    """The shape a connector last let through for a topic, and the change it paused on (if any)."""

    topic: str
    schema: Shape
    run_id: int | None
    pending: Pending | None = None


class ConnectorSchemas:
    def __init__(self, engine: Engine) -> None:
        self._sessions = sessionmaker(engine, expire_on_commit=False)

    def of(self, connector: str) -> dict[str, Reference]:
        """The connector's shapes, by topic ({}: it has let nothing through yet)."""
        with self._sessions() as s:
            rows = s.scalars(select(ConnectorSchemaRow).where(ConnectorSchemaRow.connector == connector)).all()
            return {row.topic: _reference(row) for row in rows}

    @staticmethod
    def record(s: Session, connector: str, shapes: Mapping[str, Shape], run_id: int) -> None:
        """Take `shapes` (topic → the shape a run let through) as the connector's; part of the run's
        commit. A row whose shape is already this one, with nothing pending, is left as it is; a
        pending change is settled by any commit of its topic (a run that paused committed nothing, so
        one that commits let the records through: the change was accepted, or is gone)."""
        for topic, schema in sorted(shapes.items()):
            values = {
                "connector": connector,
                "topic": topic,
                "fingerprint": schema.fingerprint,
                "schema": dict(schema.document),
                "run_id": run_id,
            }
            statement = insert(ConnectorSchemaRow).values(**values)
            excluded = statement.excluded
            s.execute(
                statement.on_conflict_do_update(
                    index_elements=["connector", "topic"],
                    set_={
                        "fingerprint": excluded.fingerprint,
                        "schema": excluded.schema,
                        "run_id": excluded.run_id,
                        "pending": null(),
                        "updated_at": func.now(),
                    },
                    # a new shape, or the one a pause was about: a commit settles what was pending
                    where=(ConnectorSchemaRow.fingerprint != excluded.fingerprint)
                    | (func.jsonb_typeof(ConnectorSchemaRow.pending) == "object"),
                )
            )

    @staticmethod
    def hold(s: Session, connector: str, topic: str, current: Shape | None, pending: Pending) -> None:
        """Record the change `connector` paused on for `topic` (its current shape kept: `current`, or
        the pending shape itself when the topic had none); part of the caller's transaction."""
        base = current or pending.schema
        statement = insert(ConnectorSchemaRow).values(
            connector=connector,
            topic=topic,
            fingerprint=base.fingerprint,
            schema=dict(base.document),
            run_id=None,
            pending=pending.to_dict(),
        )
        s.execute(
            statement.on_conflict_do_update(
                index_elements=["connector", "topic"],
                set_={"pending": statement.excluded.pending, "updated_at": func.now()},
            )
        )

    def accept(self, connector: str, topics: list[str] | None = None) -> list[str]:
        """Accept each pending change (of `topics`, or all): the sink's next run lets it through
        (and its commit makes the shape the connector's). The topics accepted."""
        with self._sessions.begin() as s:
            query = select(ConnectorSchemaRow).where(
                ConnectorSchemaRow.connector == connector, func.jsonb_typeof(ConnectorSchemaRow.pending) == "object"
            )
            if topics is not None:
                query = query.where(ConnectorSchemaRow.topic.in_(topics))
            accepted = []
            for row in s.scalars(query.with_for_update()).all():
                row.pending = {**(row.pending or {}), "accepted": True}
                row.updated_at = func.now()
                accepted.append(row.topic)
            return sorted(accepted)

    @staticmethod
    def forget(s: Session, connector: str) -> None:
        """Forget the connector's shapes (its offsets are reset: its next run is a first load)."""
        s.execute(delete(ConnectorSchemaRow).where(ConnectorSchemaRow.connector == connector))


def _reference(row: ConnectorSchemaRow) -> Reference:
    pending = Pending.from_dict(row.pending) if row.pending else None
    return Reference(row.topic, Shape(row.schema, row.fingerprint), row.run_id, pending)
