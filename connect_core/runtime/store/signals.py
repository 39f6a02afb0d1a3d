"""Signals sent to connectors over REST (`connect.connector_signals`, migration 0018): Debezium's
`rest` channel. A signal waits until the commit of a run that got it (`consume`, part of that
commit's transaction): a run that fails or is killed leaves it for the next, so what it asked for
(an incremental snapshot) starts with the positions it changed, never without them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import Engine, func, select, update
from sqlalchemy.orm import Session, sessionmaker

from connect_core.runtime.store.models import ConnectorSignalRow
from connect_core.sdk.connector import Signal
from connect_core.sdk.errors import ConflictError

__all__ = ["MAX_PENDING", "SignalStore"]

#: Signals a connector may have waiting at once: a flood of them is refused, not queued for ever.
MAX_PENDING = 100


class SignalStore:
    def __init__(self, engine: Engine) -> None:
        self._sessions = sessionmaker(engine, expire_on_commit=False)

    def send(
        self,
        connector: str,
        signal_id: str,
        kind: str,
        data: Mapping[str, Any],
        *,
        once_for: str | None = None,
        parts: Sequence[Mapping[str, Any]] = (),
    ) -> int | None:
        """Queue a signal for `connector`'s next run: its row id, or None when `MAX_PENDING` wait already.
        With `once_for` (a table), ConflictError when a waiting `execute-snapshot` names that table
        already: checked under the same lock as the queueing, so two senders at once queue one. With
        `parts`, the signal is queued as one row per part (each its own data, for the task it goes
        to), all or none."""
        with self._sessions.begin() as s:
            s.execute(select(func.pg_advisory_xact_lock(func.hashtext("signals:" + connector))))
            if once_for is not None:
                for waiting in s.scalars(
                    select(ConnectorSignalRow).where(
                        ConnectorSignalRow.connector == connector,
                        ConnectorSignalRow.consumed_run.is_(None),
                        ConnectorSignalRow.type == "execute-snapshot",
                    )
                ):
                    if once_for in ((waiting.data or {}).get("data-collections") or []):
                        raise ConflictError(
                            f"a re-read of `{once_for}` is queued already (signal {waiting.signal_id}): "
                            "wait for its run to begin it"
                        )
            waiting = s.scalar(
                select(func.count())
                .select_from(ConnectorSignalRow)
                .where(ConnectorSignalRow.connector == connector, ConnectorSignalRow.consumed_run.is_(None))
            )
            rows = [
                ConnectorSignalRow(connector=connector, signal_id=signal_id, type=kind, data=dict(d)) for d in parts
            ]
            rows = rows or [ConnectorSignalRow(connector=connector, signal_id=signal_id, type=kind, data=dict(data))]
            if (waiting or 0) + len(rows) > MAX_PENDING:
                return None
            s.add_all(rows)
            s.flush()
            return rows[0].id

    def pending(self, connector: str) -> list[tuple[int, Signal]]:
        """The connector's signals no commit consumed yet, oldest first: (row id, signal)."""
        with self._sessions() as s:
            rows = s.scalars(
                select(ConnectorSignalRow)
                .where(ConnectorSignalRow.connector == connector, ConnectorSignalRow.consumed_run.is_(None))
                .order_by(ConnectorSignalRow.id)
                .limit(MAX_PENDING)
            ).all()
            return [(r.id, Signal(r.signal_id, r.type, dict(r.data))) for r in rows]

    @staticmethod
    def consume(s: Session, ids: Sequence[int], run_id: int) -> None:
        """Mark signals consumed by run `run_id`; part of its commit."""
        if ids:
            s.execute(
                update(ConnectorSignalRow)
                .where(ConnectorSignalRow.id.in_(list(ids)), ConnectorSignalRow.consumed_run.is_(None))
                .values(consumed_run=run_id)
            )

    @staticmethod
    def forget(s: Session, connector: str) -> None:
        """Drop the connector's waiting signals (its offsets were reset)."""
        s.execute(
            ConnectorSignalRow.__table__.delete().where(  # type: ignore[attr-defined]
                ConnectorSignalRow.connector == connector, ConnectorSignalRow.consumed_run.is_(None)
            )
        )
