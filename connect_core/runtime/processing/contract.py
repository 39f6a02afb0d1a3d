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
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from connect_core.runtime.security.limits import one_line
from connect_core.runtime.topics.schemas import TopicSchema, diff_schemas
from connect_core.sdk.config import ConnectorConfig, ContractMode
from connect_core.sdk.errors import DataError
from connect_core.sdk.records import ErrantRecords
from connect_core.sdk.transforms import column, describe, is_value_column

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame
    from pyspark.sql.types import DataType

__all__ = ["Change", "Contract", "Enforced", "Plan", "enforce", "plan"]

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
    return Plan(topic, tuple(changes), reference)


def _column_of(schema: TopicSchema, name: str) -> Mapping[str, Any]:
    return next(c for c in schema.columns if c["name"] == name)


def _shown(name: str) -> str:
    return one_line(name if len(name) <= 80 else name[:80] + "…")


@dataclass
class Enforced:
    """A topic's records after its contract: the rows kept, the rows set aside, the values dropped."""

    records: DataFrame
    errant: ErrantRecords | None = None
    counts: dict[str, int] = field(default_factory=dict)
    #: persisted to be read more than once; unpersist once the records are written
    cached: list[DataFrame] = field(default_factory=list)


def enforce(df: DataFrame, plan: Plan, *, dead_letters: bool) -> Enforced:
    """`df` as the plan's contract lets it through: rows of a `discard_row` change set aside (as
    errant records when they go to the dead letters, else only counted), values of a
    `discard_value` change dropped and counted, and the columns those changes touched back in
    the connector's shape. Call `plan.check()` first: frozen changes are not handled here."""
    from pyspark.sql import functions as F

    rows = [c for c in plan.changes if c.mode == "discard_row"]
    values = [c for c in plan.changes if c.mode == "discard_value"]
    enforced = Enforced(df)
    discarded_rows = discarded_values = 0
    if rows:
        reason = "__connect_contract_reason"
        why = F.coalesce(*[F.when(_violates(c), F.lit(c.describe(plan.topic))) for c in rows])
        marked = df.withColumn(reason, why).persist()
        enforced.cached.append(marked)
        errant = marked.filter(F.col(reason).isNotNull())
        if dead_letters:
            table = errant.toArrow()
            discarded_rows = table.num_rows
            if discarded_rows:
                messages = [str(m) for m in table.column(reason).to_pylist()]
                enforced.errant = ErrantRecords(
                    table.drop_columns([reason]), _EXCEPTION, messages, stage="SCHEMA_CONTRACT"
                )
        else:
            discarded_rows = errant.count()
        df = marked.filter(F.col(reason).isNull()).drop(reason)
    if any(c.kind == "table" for c in values):
        discarded_rows += df.count()
        df = df.limit(0)
    counted = [c for c in values if c.kind in ("column_added", "retyped")]
    if counted:
        sums = df.agg(*[F.sum(F.when(_violates(c), 1).otherwise(0)).alias(f"c{i}") for i, c in enumerate(counted)])
        first = sums.first()
        discarded_values = sum(int(v or 0) for v in (first or []))
    enforced.records = _reshape(df, [c for c in plan.changes if c.mode in ("discard_row", "discard_value")], plan)
    enforced.counts = {
        key: n
        for key, n in (("contract_discarded_rows", discarded_rows), ("contract_discarded_values", discarded_values))
        if n
    }
    return enforced


def _violates(change: Change) -> Column:
    """True for a record this change sets aside (`discard_row`) or loses a value of (`discard_value`)."""
    from pyspark.sql import functions as F

    if change.kind == "column_added":
        return column(change.column or "").isNotNull()
    if change.kind == "retyped":
        value = column(change.column or "")
        return value.isNotNull() & ~_survives(value, change)
    return F.lit(True)  # a new table, a dropped column, a changed key: every record


def _survives(value: Column, change: Change) -> Column:
    """True where the value is the same after a cast to the column's former type and back (an int
    in a former bigint column survives; 3.5 in a former int column, or "007" in one, does not)."""
    from pyspark.sql import functions as F

    there = value.try_cast(_type(change.former))
    back = there.try_cast(_type(change.current))
    nested = "nested" in (change.former or {}) or "nested" in (change.current or {})
    same = F.to_json(F.array(back)) == F.to_json(F.array(value)) if nested else back == value
    return there.isNotNull() & F.coalesce(same, F.lit(False))


def _type(described: Mapping[str, Any] | None) -> DataType | str:
    """A recorded column's Spark type (its JSON for a nested type, else its `simpleString`)."""
    described = described or {}
    if "nested" in described:
        from pyspark.sql.types import _parse_datatype_json_value

        kind: DataType = _parse_datatype_json_value(described["nested"])
        return kind
    return str(described.get("type", "string"))


def _reshape(df: DataFrame, changes: list[Change], plan: Plan) -> DataFrame:
    """The touched columns back in the connector's shape: new columns gone, dropped ones back as
    null, retyped ones in their former type (a value that did not survive is null by now)."""
    from pyspark.sql import functions as F

    if not changes:
        return df
    added = {c.column for c in changes if c.kind == "column_added"}
    restored = {c.column: c for c in changes if c.kind == "column_dropped"}
    retyped = {c.column: c for c in changes if c.kind == "retyped"}
    out: dict[str, Column] = {}
    for name in df.columns:
        if name in added:
            continue
        if name in retyped:
            change = retyped[name]
            value = column(name)
            kept = F.when(_survives(value, change), value.try_cast(_type(change.former)))
            out[name] = kept.alias(name)
        else:
            out[name] = column(name)
    for dropped, change in restored.items():
        if dropped is not None:
            out[dropped] = F.lit(None).cast(_type(change.former)).alias(dropped)
    reference = plan.reference.columns if plan.reference is not None else []
    order = [c["name"] for c in reference if c["name"] in out]
    order += [n for n in out if n not in order and is_value_column(n)]
    order += [n for n in out if not is_value_column(n)]
    return df.select(*[out[n] for n in order])
