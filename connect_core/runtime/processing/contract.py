"""Schema contracts (dlt's model): what a change of a topic's shape may do where a connector's
records enter the topic (a source, after its transforms) or leave it (a sink, after its transforms).

A run's records for a topic are compared with the shape the connector let through before
(`runtime.store.connector_schemas`): a first load (the connector has let nothing through yet) may
always create. Each change has a kind, and its kind's key says what it may do:

| change | key | `discard_row` | `discard_value` |
|---|---|---|---|
| a topic new to the connector | `schema.contract.tables` | every record to the dead letters | every record dropped |
| a column added | `schema.contract.columns` | records with a value there | the values dropped (counted) |
| a column dropped | `schema.contract.columns` | every record | the column back, null |
| the key's columns changed | `schema.contract.columns` | every record | refused as `freeze` (a key has no null) |
| a column's type changed | `schema.contract.data_type` | records whose value does not survive the cast to the former type and back | those values null (counted) |

`evolve` lets the change through (the default), `freeze` fails the run with a `DataError` naming
every frozen change (never retried). Nullability is not a contract's concern: a column that may now
be null keeps its values. The checks cost one comparison of two fingerprints when nothing changed
(the common case); a DataFrame is touched only when a change is to be discarded.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from connect_core.runtime.security.limits import one_line
from connect_core.runtime.topics.schemas import TopicSchema, diff_schemas
from connect_core.sdk.config import ConnectorConfig, ContractMode
from connect_core.sdk.errors import DataError
from connect_core.sdk.transforms import describe

if TYPE_CHECKING:
    pass

__all__ = ["Change", "Contract", "Plan", "plan"]

Kind = Literal["table", "column_added", "column_dropped", "key", "retyped"]
_KEY_OF: dict[Kind, str] = {
    "table": "tables",
    "column_added": "columns",
    "column_dropped": "columns",
    "key": "columns",
    "retyped": "data_type",
}
#: The `__connect.errors.exception.message` of a record a contract set aside names its change; the
#: class is the one a `freeze` would have raised.
_EXCEPTION = describe(DataError)


@dataclass(frozen=True)
class Contract:
    tables: ContractMode = "evolve"
    columns: ContractMode = "evolve"
    data_type: ContractMode = "evolve"

    @classmethod
    def of(cls, config: ConnectorConfig) -> Contract:
        return cls(config.contract_mode("tables"), config.contract_mode("columns"), config.contract_mode("data_type"))

    @property
    def lenient(self) -> bool:
        """Every change may pass: nothing to check."""
        return self.tables == self.columns == self.data_type == "evolve"

    def mode(self, kind: Kind) -> ContractMode:
        mode: ContractMode = getattr(self, _KEY_OF[kind])
        return mode


@dataclass(frozen=True)
class Change:
    kind: Kind
    mode: ContractMode
    what: str  # "column `email` (string) added"
    column: str | None = None
    #: the column as recorded before (a retyped or dropped column) and now (a retyped one): its name,
    #: Spark's `simpleString` of its type, and that type's JSON when nested
    former: Mapping[str, Any] | None = None
    current: Mapping[str, Any] | None = None
    #: a retyping Spark cannot cast back and forth (a struct that gained a field): no value survives it
    uncastable: bool = False

    @property
    def key(self) -> str:
        return f"schema.contract.{_KEY_OF[self.kind]}"

    def describe(self, topic: str) -> str:
        return f"topic `{topic}`: {self.what} (`{self.key}={self.mode}`)"


@dataclass(frozen=True)
class Plan:
    """The changes of one topic's records against the connector's shape, each with its mode."""

    topic: str
    changes: tuple[Change, ...] = ()
    #: the connector's shape the records were compared with (None: none yet)
    reference: TopicSchema | None = None
    #: the records are change events in Debezium's envelope: the changes are of the rows in their
    #: `before` and `after` (`TopicSchema.envelope_rows`)
    envelope: bool = False

    @property
    def acts(self) -> bool:
        """Whether the records must be changed (some change is to be discarded)."""
        return any(c.mode in ("discard_row", "discard_value") for c in self.changes)

    def check(self) -> None:
        """DataError naming every change the contract freezes (a key change under `discard_value` too)."""
        frozen = [c for c in self.changes if c.mode == "freeze" or (c.kind == "key" and c.mode == "discard_value")]
        if not frozen:
            return
        listed = "; ".join(c.describe(self.topic) for c in frozen)
        raise DataError(
            f"schema contract: {listed}. Set the key to `evolve` to let the change through, or `discard_row` / "
            "`discard_value` to set it aside"
        )


def plan(contract: Contract, topic: str, shape: TopicSchema, reference: TopicSchema | None, first_load: bool) -> Plan:
    """What the contract says of records of `shape` going through `topic`, against the connector's
    `reference` shape for it (None: the topic is new to the connector, free on its first load)."""
    if contract.lenient:
        return Plan(topic, (), reference)
    if reference is None:
        if first_load or contract.tables == "evolve":
            return Plan(topic, (), None)
        return Plan(topic, (Change("table", contract.tables, "a topic new to this connector"),), None)
    if reference.fingerprint == shape.fingerprint:
        return Plan(topic, (), reference)
    rows, former_rows = shape.envelope_rows(), reference.envelope_rows()
    envelope = rows is not None and former_rows is not None
    if rows is not None and former_rows is not None:  # change events: the rows they carry changed
        shape, reference = rows, former_rows
    diff = diff_schemas(reference.document, shape.document)
    changes = [
        *(
            Change("column_added", contract.columns, f"column `{_shown(c['name'])}` ({c['type']}) added", c["name"])
            for c in diff.added
        ),
        *(
            Change(
                "column_dropped",
                contract.columns,
                f"column `{_shown(c['name'])}` ({c['type']}) dropped",
                c["name"],
                c,
            )
            for c in diff.dropped
        ),
        *(
            Change(
                "retyped",
                contract.data_type,
                f"column `{_shown(r['name'])}` retyped from {r['from']} to {r['to']}",
                r["name"],
                _column_of(reference, r["name"]),
                _column_of(shape, r["name"]),
            )
            for r in diff.retyped
        ),
    ]
    if diff.key is not None:
        changes.append(Change("key", contract.columns, f"key changed from {diff.key['from']} to {diff.key['to']}"))
    return Plan(topic, tuple(changes), reference, envelope)


def _column_of(schema: TopicSchema, name: str) -> Mapping[str, Any]:
    return next(c for c in schema.columns if c["name"] == name)


def _shown(name: str) -> str:
    return one_line(name if len(name) <= 80 else name[:80] + "…")
