"""What a JDBC target does to its table when the topic's columns changed: `sdk.evolution`'s rules,
for the columns of the table the layout writes (`auto.evolve` is the sink's own evolve setting)."""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING

from connect_core.sdk.evolution import Evolution
from connect_core.sdk.evolution import evolution as _evolution

if TYPE_CHECKING:
    from connect_core.connectors.jdbc._staging import Layout
    from connect_core.connectors.jdbc.config import JdbcSinkConfig

__all__ = ["Evolution", "evolution"]


def evolution(cfg: JdbcSinkConfig, layout: Layout, have: Collection[str]) -> Evolution:
    """What the table (whose columns are `have`) gets for `layout`'s records."""
    found = _evolution(cfg.schema_propagation, cfg.auto_evolve, layout.changes, have, layout.keys)
    widen = tuple(c for c in found.widen if c in layout.columns)
    return Evolution(found.add, found.drop, found.relax, widen)
