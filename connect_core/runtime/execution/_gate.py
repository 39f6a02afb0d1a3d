"""Where a run's records pass their connector's schema contract: each topic's records, with the
shape the connector let through before (read once per run, only when a contract or a propagation
needs it), checked and, when a change is to be discarded, changed (`processing.contract`)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from connect_core.runtime.processing.contract import Contract, plan
from connect_core.runtime.processing.discard import enforce
from connect_core.runtime.topics.schemas import TooDeeplyNestedError, TopicSchema
from connect_core.sdk.records import ArrowRecords, ErrantRecords

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

    from connect_core.runtime.store.connector_schemas import ConnectorSchemas, Reference

__all__ = ["Gate", "SinkGated", "shape_of"]

log = logging.getLogger(__name__)


class SetAside(Protocol):
    """Where the records and values a contract set aside go: the run's dead letters (a source), or
    the sink's gate result, reported by each attempt."""

    @property
    def dead_letters(self) -> bool: ...

    def divert(self, errant: ErrantRecords) -> None: ...

    def discard(self, counts: Mapping[str, int]) -> None: ...


@dataclass
class SinkGated:
    """What a sink's batch met at its gate, once per run (each attempt reports it again)."""

    dead_letters: bool = False
    diverted: list[ErrantRecords] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    #: topic read → the shape let through (the connector's from the commit on)
    shapes: dict[str, TopicSchema] = field(default_factory=dict)
    #: topic read → its change since the sink's last run, for the sink (`SinkBatch.schema_changes`)
    changes: dict[str, Mapping[str, Any]] = field(default_factory=dict)

    def divert(self, errant: ErrantRecords) -> None:
        self.diverted.append(errant)

    def discard(self, counts: Mapping[str, int]) -> None:
        for key, n in counts.items():
            self.counts[key] = self.counts.get(key, 0) + n


class Gate:
    """`declared`: the topics the connector's config names (a sink's `topics`, a source's
    `output_topics`): each one's first load is free, whenever it comes (a table empty at the
    connector's first run, another task's topic). A topic it does not name (routed there, matched
    by a pattern) is new to it after the connector's first load: `schema.contract.tables` says."""

    def __init__(
        self, contract: Contract, schemas: ConnectorSchemas, connector: str, declared: frozenset[str] = frozenset()
    ) -> None:
        self._contract = contract
        self._schemas = schemas
        self._connector = connector
        self._declared = declared
        self._references: dict[str, Reference] | None = None

    def reference(self, topic: str) -> TopicSchema | None:
        """The shape the connector let through for `topic` before (None: none yet)."""
        found = self._load().get(topic)
        return TopicSchema(found.schema.document, found.schema.fingerprint) if found is not None else None

    def accepted(self, topic: str, shape: TopicSchema) -> bool:
        """Whether an operator accepted `shape` for `topic` after the connector paused on it."""
        found = self._load().get(topic)
        pending = found.pending if found is not None else None
        return pending is not None and pending.accepted and pending.schema.fingerprint == shape.fingerprint

    def hold(
        self, topic: str, records: DataFrame | ArrowRecords, aside: SetAside, cached: list[DataFrame]
    ) -> tuple[Any, TopicSchema | None]:
        """`records` as the contract lets them through `topic`, and their shape (None: not recorded).
        DataError when the contract freezes a change; `cached` gets what to unpersist after the write."""
        shape = shape_of(topic, records.schema)
        if shape is None or self._contract.lenient:
            return records, shape
        references = self._load()
        first_load = not references or (topic in self._declared and topic not in references)
        checked = plan(self._contract, topic, shape, self.reference(topic), first_load=first_load)
        checked.check()
        if not checked.acts:
            return records, shape
        df = records.to_dataframe() if isinstance(records, ArrowRecords) else records
        enforced = enforce(df, checked, dead_letters=aside.dead_letters)
        cached.extend(enforced.cached)
        if enforced.errant is not None:
            aside.divert(enforced.errant)
        aside.discard(enforced.counts)
        if any(c.kind == "key" for c in checked.changes):  # every record set aside: the topic keeps its key
            return enforced.records, self.reference(topic)
        return enforced.records, shape_of(topic, enforced.records.schema)

    def _load(self) -> dict[str, Reference]:
        if self._references is None:
            self._references = self._schemas.of(self._connector)
        return self._references


def shape_of(topic: str, struct: StructType) -> TopicSchema | None:
    """The shape the topic's schema history records with the commit (from the driver's schema: no
    job), or None for one nested too deeply to record: the data goes on, its shape is not kept."""
    try:
        return TopicSchema.of(struct)
    except TooDeeplyNestedError as exc:
        log.warning("topic `%s`: %s; this shape is not recorded in its schema history", topic, exc)
        return None
