"""The JDBC sink's writes, one `Target` per database, picked by the URL's dialect.

A target writes a topic's rows exactly once: it stages them (`_staging`'s layout: the columns,
then partition and offset) and merges them into the table in one transaction of the target that
also moves the topic partitions' offsets in the target's `connect_sink_offsets`, so a batch
delivered again after a crash skips every row at or past them. The sink (`..sink`) owns the loop
over topics and the reports of bad rows; a target owns the SQL. A `replace` re-read's rows go to
a copy of the table that the target swaps in at the re-read's end (`replica`, `swap_in`;
`_replace` and each database's `_<name>_replace`).

A new database's target is one module here, a class of the `Target` protocol decorated with
`@register("<dialect name>")`, and its module name in `_BUILT_IN` (see `..dialects` for the rest).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from connect_core.sdk.errors import ConfigError

if TYPE_CHECKING:
    import logging

    from connect_core.connectors.jdbc._staging import Layout
    from connect_core.connectors.jdbc.config import JdbcSinkConfig
    from connect_core.connectors.jdbc.dialects import JdbcDialect
    from connect_core.sdk import ArrowRecords
    from connect_core.sdk.records import CommittedOffset, TopicPartition

__all__ = ["OFFSETS_TABLE", "BadRow", "Target", "register", "target_for"]

#: The table of the target's database holding each sink connector's next offsets.
OFFSETS_TABLE = "connect_sink_offsets"

BadRow = tuple[int, int, str, str]  # partition, offset, error class, message

#: The built-in targets' modules (each registers itself).
_BUILT_IN = (
    "connect_core.connectors.jdbc.targets.postgres",
    "connect_core.connectors.jdbc.targets.mariadb",
)
_BY_DIALECT: dict[str, type[Target[Any]]] = {}
_T = TypeVar("_T", bound="type[Target[Any]]")
_Dialect = TypeVar("_Dialect", bound="JdbcDialect", contravariant=True)


class Target(Protocol[_Dialect]):
    """One sink task's target database (of `_Dialect`'s): its offsets, staging table and merges."""

    def __init__(
        self,
        dialect: _Dialect,
        cfg: JdbcSinkConfig,
        connector: str,
        stage: str,
        log: logging.Logger | logging.LoggerAdapter[Any],
    ) -> None:
        """`stage`: the name of this task's staging table."""

    def open(self, committed: Mapping[TopicPartition, CommittedOffset], tolerant: bool) -> dict[TopicPartition, int]:
        """Make the sink's tables if needed, drop a staging table a dead run left; the offsets the
        target holds. `tolerant`: bad rows are set aside (`errors.tolerance=all`)."""
        ...

    def set_aside(self, topic: str, applied: Mapping[int, int]) -> list[BadRow]:
        """Rows of `topic` an earlier run set aside below the target's offsets (`applied`, by
        partition) whose run did not commit."""
        ...

    def write(
        self, topic: str, layout: Layout, records: ArrowRecords | None, applied: dict[int, int]
    ) -> tuple[int, list[BadRow]]:
        """Write `topic`'s rows (`layout`; `records`: the topic's Arrow records, None for a DataFrame
        only) past `applied` and move its offsets, in one transaction of the target: (rows written,
        rows set aside). A row the target refuses under `errors.tolerance=none` is a DataError."""
        ...

    def replica(self, table: tuple[str, ...], topic: str, generation: int) -> tuple[str, ...]:
        """Where the rows of `replace` re-read `generation` of `topic` go, for target `table`: its copy
        for that generation (made on first use like `table`; older copies a kill left dropped), or
        `table` itself when it holds that generation already (the batch is given again after the swap)."""
        ...

    def swap_in(self, table: tuple[str, ...] | None, topic: str, generation: int) -> str | None:
        """Swap the copy of re-read `generation` of `topic` in for its target atomically, marking the
        target as holding it: the copy the sink entered for it (whose target it names), else, when
        the re-read had no rows at all, an empty one for `table` (None: the sink cannot tell its
        target; nothing is swapped). The target swapped, or None when there was nothing to do (it
        held the re-read already: a batch given again)."""
        ...

    def has_key(self, table: tuple[str, ...]) -> bool | None:
        """Whether `table` has a primary key or a unique index (None: there is no such table)."""
        ...

    @classmethod
    def alter_offsets(
        cls, dialect: _Dialect, connector: str, offsets: Mapping[TopicPartition, int | None] | None
    ) -> None:
        """An offset reset (`offsets` None: all) or alteration through Connect, applied to the
        target's offsets table (a missing table: nothing to do)."""
        ...


def register(dialect: str) -> Callable[[_T], _T]:
    """Make the decorated class the target of the dialect named `dialect`."""

    def add(cls: _T) -> _T:
        _BY_DIALECT[dialect] = cls
        return cls

    return add


def target_for(dialect: JdbcDialect) -> type[Target[Any]]:
    """The target class of `dialect`'s database."""
    for module in _BUILT_IN:
        importlib.import_module(module)
    found = _BY_DIALECT.get(dialect.name)
    if found is None:
        raise ConfigError(f"the JDBC sink cannot write to {dialect.name} databases (`{dialect.host}`): no target")
    return found
