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

__all__ = ["PROPAGATING", "Evolution", "evolution"]

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
