"""What a JDBC target does to its table when the topic's columns changed (`schema.propagation`).

The runtime decided what may pass (a breaking change paused the connector before any write) and
tells the sink how each topic's columns changed since its last run (`SinkBatch.schema_changes`,
carried in the `Layout`). This says what that means for the table, the same for every database;
each target speaks its own DDL:

* columns the records gained are added under `propagate_columns` and `propagate_fully` (as under
  `auto.evolve`), and under `pause` once accepted; under `ignore` the runtime has removed them from
  the records already;
* a column whose type changed is retyped to the records' type (only a widening reaches a target:
  a narrowing pauses the connector);
* a dropped column is made nullable under `propagate_columns` (so new rows can leave it empty), and
  dropped from the table under `propagate_fully`; a key column is never dropped nor relaxed.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from connect_core.connectors.jdbc._staging import Layout
    from connect_core.connectors.jdbc.config import JdbcSinkConfig

__all__ = ["Evolution", "evolution"]

#: under `pause`, a change reaches the sink only once an operator accepted it: it goes as `propagate_columns`
_PROPAGATING = ("propagate_columns", "propagate_fully", "pause")


@dataclass(frozen=True)
class Evolution:
    #: add the columns the table lacks (`auto.evolve`, or a propagating `schema.propagation`)
    add: bool
    #: columns to drop from the table
    drop: tuple[str, ...] = ()
    #: columns to make nullable
    relax: tuple[str, ...] = ()
    #: columns to retype to the records' type
    widen: tuple[str, ...] = ()


def evolution(cfg: JdbcSinkConfig, layout: Layout, have: Collection[str]) -> Evolution:
    """What the table (whose columns are `have`) gets for `layout`'s records."""
    mode = cfg.schema_propagation
    if mode not in _PROPAGATING:
        return Evolution(add=cfg.auto_evolve)
    changes = layout.changes or {}
    keys = set(layout.keys)
    dropped = tuple(c["name"] for c in changes.get("dropped", []) if c["name"] in have and c["name"] not in keys)
    widened = tuple(r["name"] for r in changes.get("retyped", []) if r["name"] in have and r["name"] in layout.columns)
    if mode == "propagate_fully":
        return Evolution(add=True, drop=dropped, widen=widened)
    return Evolution(add=True, relax=dropped, widen=widened)
