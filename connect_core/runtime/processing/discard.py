"""What a schema contract's `discard_row` and `discard_value` do to a topic's records (the plan is
`contract.plan`'s): the records a change sets aside, the values it drops, and the columns it touched
put back in the connector's shape. Columnar throughout (Spark expressions, no Python per row); for
change events in Debezium's envelope, the same on the fields of their `before` and `after` rows.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from connect_core.runtime.processing.contract import Change, Plan
from connect_core.sdk.errors import DataError
from connect_core.sdk.records import ErrantRecords
from connect_core.sdk.transforms import column, describe, is_value_column

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame
    from pyspark.sql.types import DataType

__all__ = ["Enforced", "enforce"]

#: The `__connect.errors.exception.class.name` of a record a contract set aside: what a `freeze`
#: would have raised.
_EXCEPTION = describe(DataError)
#: The rows of a change event (Debezium's envelope).
_ROWS = ("before", "after")


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

    plan = _castable(df, plan)
    rows = [c for c in plan.changes if c.mode == "discard_row"]
    values = [c for c in plan.changes if c.mode == "discard_value"]
    enforced = Enforced(df)
    discarded_rows = discarded_values = 0
    if rows:
        reason = "__connect_contract_reason"
        why = F.coalesce(*[F.when(_violates(c, plan.envelope), F.lit(c.describe(plan.topic))) for c in rows])
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
        sums = df.agg(
            *[F.sum(F.when(_violates(c, plan.envelope), 1).otherwise(0)).alias(f"c{i}") for i, c in enumerate(counted)]
        )
        first = sums.first()
        discarded_values = sum(int(v or 0) for v in (first or []))
    enforced.records = _reshape(df, [c for c in plan.changes if c.mode in ("discard_row", "discard_value")], plan)
    enforced.counts = {
        key: n
        for key, n in (("contract_discarded_rows", discarded_rows), ("contract_discarded_values", discarded_values))
        if n
    }
    return enforced


def _castable(df: DataFrame, plan: Plan) -> Plan:
    """`plan` with each retyping Spark cannot cast back and forth (a struct that gained a field, an
    array that became a string) marked `uncastable`: none of its values survives. Found by analysing
    the expression (no job)."""
    import dataclasses

    from pyspark.errors import PySparkException

    changes = []
    for change in plan.changes:
        if change.kind == "retyped":
            name = change.column or ""
            value = column(_ROWS[1]).getField(name) if plan.envelope else column(name)
            try:
                df.select(_survives(value, change)).schema  # noqa: B018  (analysis only)
            except PySparkException:
                change = dataclasses.replace(change, uncastable=True)
        changes.append(change)
    return dataclasses.replace(plan, changes=tuple(changes))


def _violates(change: Change, envelope: bool) -> Column:
    """True for a record this change sets aside (`discard_row`) or loses a value of (`discard_value`)."""
    from pyspark.sql import functions as F

    name = change.column or ""
    values = [column(row).getField(name) for row in _ROWS] if envelope else [column(name)]
    if change.kind == "column_added":
        found = [v.isNotNull() for v in values]
    elif change.kind == "retyped":
        found = [v.isNotNull() if change.uncastable else v.isNotNull() & ~_survives(v, change) for v in values]
    else:
        return F.lit(True)  # a new table, a dropped column, a changed key: every record
    if not envelope:
        return found[0]
    before, after = (F.coalesce(f, F.lit(False)) for f in found)  # a null row (an insert's `before`) holds nothing
    return before | after


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
    if plan.envelope:
        return df.withColumns({row: _reshaped_row(column(row), changes) for row in _ROWS})
    added = {c.column for c in changes if c.kind == "column_added"}
    restored = {c.column: c for c in changes if c.kind == "column_dropped"}
    retyped = {c.column: c for c in changes if c.kind == "retyped"}
    out: dict[str, Column] = {}
    for name in df.columns:
        if name in added:
            continue
        if name in retyped:
            out[name] = _kept(column(name), retyped[name]).alias(name)
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


def _reshaped_row(row: Column, changes: list[Change]) -> Column:
    """`_reshape` on the fields of a change event's `before` or `after` struct (null stays null)."""
    from pyspark.sql import functions as F

    added = [_path(c.column) for c in changes if c.kind == "column_added" and c.column is not None]
    if added:
        row = row.dropFields(*added)
    for change in changes:
        name = change.column
        if name is None:
            continue
        if change.kind == "column_dropped":
            row = row.withField(_path(name), F.lit(None).cast(_type(change.former)))
        elif change.kind == "retyped":
            row = row.withField(_path(name), _kept(row.getField(name), change))
    return row


def _kept(value: Column, change: Change) -> Column:
    """A retyped value in the column's former type where it survives the cast there and back, else null."""
    from pyspark.sql import functions as F

    if change.uncastable:
        return F.lit(None).cast(_type(change.former))
    return F.when(_survives(value, change), value.try_cast(_type(change.former)))


def _path(name: str) -> str:
    """A field's name as `withField`/`dropFields` read it: a path, whose dots would nest; quoted, the
    name is the field's whatever it holds (a dot, a backtick)."""
    return "`" + name.replace("`", "``") + "`"
