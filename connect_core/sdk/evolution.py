"""What a sink does to its target when a topic's columns changed (`schema.propagation`), the same
for every sink; each says it in its target's own terms (SQL DDL, Iceberg's or Delta's schema update).

The runtime decided what may pass (a breaking change paused the connector before any write) and
tells the sink how each topic's columns changed since its last run (`SinkBatch.schema_changes`).
For a table whose columns are `have`:

* columns the records gained are added under `propagate_columns` and `propagate_fully`, and under
  `pause` once an operator accepted the change (as the sink's own evolve setting adds them when
  `schema.propagation` is unset); under `ignore` the runtime removed them from the records already;
* a column whose type widened is retyped to the records' type (a narrowing never reaches a sink:
  it pauses the connector, and once accepted the target keeps its wider column);
* a dropped column is made nullable under `propagate_columns` (new rows leave it empty) and dropped
  from the table under `propagate_fully`; a key column is never dropped nor relaxed.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["PROPAGATING", "Evolution", "cast", "evolution", "numbers_fit"]

#: The `schema.propagation` modes under which a change that reaches the sink is applied to the target
#: (under `pause`, a change reaches it only once accepted: it goes as `propagate_columns`).
PROPAGATING = ("propagate_columns", "propagate_fully", "pause")


@dataclass(frozen=True)
class Evolution:
    #: add the columns the table lacks (and widen the ones whose type widened)
    add: bool
    #: columns to drop from the table
    drop: tuple[str, ...] = ()
    #: columns to make nullable
    relax: tuple[str, ...] = ()
    #: columns to retype to the records' (wider) type
    widen: tuple[str, ...] = ()


def evolution(
    mode: str | None,
    evolve_setting: bool,
    changes: Mapping[str, Any] | None,
    have: Collection[str],
    keys: Collection[str] = (),
) -> Evolution:
    """What a table whose columns are `have` (and key columns `keys`) gets for records whose topic
    changed as `changes` says, under `schema.propagation` `mode` (None: unset, the sink's own
    `evolve_setting` alone decides, as before propagation existed)."""
    if mode not in PROPAGATING:
        return Evolution(add=evolve_setting)
    changes = changes or {}
    dropped = tuple(c["name"] for c in changes.get("dropped", []) if c["name"] in have and c["name"] not in keys)
    widened = tuple(r["name"] for r in changes.get("retyped", []) if r["name"] in have)
    if mode == "propagate_fully":
        return Evolution(add=True, drop=dropped, widen=widened)
    return Evolution(add=True, relax=dropped, widen=widened)


def numbers_fit(values: Any, kind: Any) -> bool:
    """Whether the numbers `values` (a pyarrow array) are all values of the numeric Arrow type `kind`
    (a safe cast: nothing rounded, nothing out of range). How a sink takes a narrowing an operator
    accepted: its wider column keeps taking the values that fit it; a value that does not is still
    refused. Not numbers on both sides: False (a string is never read as a number)."""
    import pyarrow as pa

    def numeric(t: Any) -> bool:
        return bool(pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t))

    if not (numeric(values.type) and numeric(kind)):
        return False
    try:
        cast(values, kind)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return False
    return True


def cast(values: Any, kind: Any) -> Any:
    """`values` (a pyarrow array) as Arrow type `kind`, safely (ArrowInvalid when a value changes).
    pyarrow sizes an integer's decimal by its type (an int32 needs 10 digits), not by its values:
    an integer goes to a decimal through the widest decimal of its scale, then to `kind`."""
    import pyarrow as pa

    if pa.types.is_decimal(kind) and pa.types.is_integer(values.type):
        values = values.cast(pa.decimal128(38, min(kind.scale, 18)), safe=True)
    return values.cast(kind, safe=True)
