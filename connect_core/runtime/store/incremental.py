"""The incremental snapshots of every source (Debezium's signals, DBLog's chunks), read from the
metadata store for `GET /metrics` and the Connect view in one set-based query (a row per source
connector), whatever the number of connectors.

The truth is the committed source position: a log-based source keeps its snapshot's progress there
under `PROGRESS_KEY` (`queue`, `table`, `paused`, `chunks`, `rows`, and the keys it reads between),
committed with the rows it read in the run's one fenced transaction. A run's stats say the same
(`progress_stats`), but only of a run that got as far as its commit; a failed or fenced run's stats
describe a progress that never happened, and a run that read nothing says nothing. So the position
is read, never the stats.

Only what is shown leaves the database: the table being read, how many tables are queued (and the
first `QUEUED_SHOWN` of their names), paused, the chunks and rows read. The keys the read is between
(`last_key`, `max_key`) are the user's data: they stay in the database. With the progress come the
signals sent over REST that no run has taken yet (the first `PENDING_SHOWN`: their type and the
tables they name), so the view can say "asked for, waiting for the next run".

A position is a JSON document an operator may also write (`PATCH /connectors/{c}/offsets`): every
field is read for its type, an odd one is left out, never a failed read.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from sqlalchemy import Connection, text

from connect_core.sdk.errors import ConfigError
from connect_core.sdk.signals import PROGRESS_KEY

__all__ = [
    "PENDING_SHOWN",
    "PROGRESS_KEY",
    "QUEUED_SHOWN",
    "IncrementalSnapshot",
    "PendingSignal",
    "read_incremental",
    "signal_takers",
]

#: Of the queued tables, the names read (the count is always whole); of the pending signals, those read.
QUEUED_SHOWN, PENDING_SHOWN = 20, 10
#: A table name longer than this is no captured table (an operator's odd offset): not shown.
_NAME_CHARS = 300


@dataclass(frozen=True)
class PendingSignal:
    """A signal sent over REST that no run has taken yet: its type and the tables it names."""

    type: str
    tables: tuple[str, ...]


@dataclass(frozen=True)
class IncrementalSnapshot:
    """One source connector's incremental snapshot, as its committed position holds it, and the
    signals waiting for its next run. `active` False: no snapshot in its position (none asked for,
    or done, or stopped); the rest is then empty."""

    connector: str
    connector_class: str
    active: bool
    table: str | None  # the table being read (None: only queued ones, or none)
    queued: int  # tables waiting after it
    queued_tables: tuple[str, ...]  # the first `QUEUED_SHOWN` of them
    paused: bool
    chunks: int  # chunks read of `table`
    rows: int  # rows read of `table`
    committed_at: datetime | None  # when the position holding it was committed
    pending: tuple[PendingSignal, ...]  # the first `PENDING_SHOWN` waiting signals, oldest first
    pending_count: int

    @property
    def running(self) -> bool:
        """Debezium's SnapshotRunning: a table is being read, and not paused."""
        return self.active and not self.paused and self.table is not None

    @property
    def remaining(self) -> int:
        """Debezium's RemainingTableCount: the table being read and those queued after it."""
        return self.queued + (1 if self.table is not None else 0)


# One row per source connector, with its class (which of them act on signals is the plugin's to say)
# and its progress if a position holds one (in one position: signals reach only task 0; were there
# several, the first by key).
# The queue is cut in SQL: its length and first names leave the database, the rest does not.
_READ = text(
    f"""
    WITH progress AS (
        SELECT DISTINCT ON (p.connector) p.connector, p."offset"->'{PROGRESS_KEY}' AS doc, p.updated_at
        FROM connect.source_positions p
        WHERE jsonb_typeof(p."offset"->'{PROGRESS_KEY}') = 'object'
        ORDER BY p.connector, p.partition_key),
    pending AS (
        SELECT connector, count(*) AS n,
               jsonb_agg(jsonb_build_object('type', type, 'tables', data->'data-collections') ORDER BY id)
                   FILTER (WHERE nth <= :pending_shown) AS shown
        FROM (SELECT connector, id, type, data, row_number() OVER (PARTITION BY connector ORDER BY id) AS nth
              FROM connect.connector_signals WHERE consumed_run IS NULL) s
        GROUP BY connector)
    SELECT c.name, c.connector_class, g.doc IS NOT NULL AS active,
           g.doc->'table' AS tbl, g.doc->'paused' AS paused, g.doc->'chunks' AS chunks, g.doc->'rows' AS rows,
           CASE WHEN jsonb_typeof(g.doc->'queue') = 'array' THEN jsonb_array_length(g.doc->'queue') ELSE 0 END
               AS queued,
           CASE WHEN jsonb_typeof(g.doc->'queue') = 'array' THEN
               (SELECT jsonb_agg(q.e ORDER BY q.i) FROM jsonb_array_elements(g.doc->'queue') WITH ORDINALITY q(e, i)
                WHERE q.i <= :queued_shown) END AS queued_tables,
           g.updated_at, coalesce(s.n, 0) AS pending_count, s.shown AS pending
    FROM connect.connectors c
    LEFT JOIN progress g ON g.connector = c.name
    LEFT JOIN pending s ON s.connector = c.name
    WHERE c.type = 'source'
    ORDER BY c.name
    """
)


def read_incremental(conn: Connection) -> list[IncrementalSnapshot]:
    """Every source connector, by name, with the incremental snapshot its position holds (if any) and
    the signals waiting for its next run; read on `conn`, in the caller's transaction (the metrics'
    snapshot reads it with the rest)."""
    params = {"queued_shown": QUEUED_SHOWN, "pending_shown": PENDING_SHOWN}
    found = []
    for name, cls, active, table, paused, chunks, rows, queued, queued_tables, at, n, pending in conn.execute(
        _READ, params
    ):
        found.append(
            IncrementalSnapshot(
                connector=name,
                connector_class=cls,
                active=bool(active),
                table=_name(table),
                queued=int(queued or 0),
                queued_tables=_names(queued_tables),
                paused=paused is True,
                chunks=_count(chunks),
                rows=_count(rows),
                committed_at=at if active else None,
                pending=tuple(PendingSignal(str(p.get("type")), _names(p.get("tables"))) for p in pending or []),
                pending_count=int(n),
            )
        )
    return found


class _Registry(Protocol):
    def resolve(self, connector_class: str) -> Any: ...


def signal_takers(registry: _Registry, sources: Iterable[IncrementalSnapshot]) -> frozenset[str]:
    """The source connectors whose plugin acts on signals (`accepts_signals`): those the view offers
    to start a snapshot of, and `/metrics` reports one of, 0 included. Each distinct class is asked
    once (most connectors share a few); a class no longer installed does not act on any."""
    sources = list(sources)
    taking = set()
    for cls in {s.connector_class for s in sources}:
        try:
            if getattr(registry.resolve(cls).cls, "accepts_signals", False):
                taking.add(cls)
        except ConfigError:  # not installed (any more): the connector's own status says so
            continue
    return frozenset(s.connector for s in sources if s.connector_class in taking)


def _name(value: Any) -> str | None:
    return value if isinstance(value, str) and 0 < len(value) <= _NAME_CHARS and value.isprintable() else None


def _names(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list):
        return ()
    return tuple(n for n in (_name(v) for v in value) if n is not None)


def _count(value: Any) -> int:
    """A count the position holds; 0 when it holds none (or no number)."""
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0 else 0
