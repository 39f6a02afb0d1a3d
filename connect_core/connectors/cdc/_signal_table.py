"""Debezium's `source` signal channel: signals written as rows of a table in the captured database
(`signal.data.collection`, columns `id`, `type`, `data`), read from its log like any captured change.

A signal row's insert is in the stream at the position its transaction committed: it is acted on by
the run that streams it, and consumed with that run's position (a run killed before its commit
streams it again), so a signal is neither lost nor acted on twice. The table's changes are signals,
not data: they go to no topic, and the table is never snapshotted.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from connect_core.connectors.cdc.config import CdcConfig
from connect_core.sdk import Signal
from connect_core.sdk.errors import ConfigError
from connect_core.sdk.signals import signal_problems

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["SOURCE_CHANNEL", "signal_table", "signals_of"]

SOURCE_CHANNEL = "source"
#: The most characters of a signal's `data` read (Debezium's table: varchar(2048)).
_MAX_DATA = 1_000_000


def signal_table(cfg: CdcConfig, captured: Iterable[str]) -> str | None:
    """The `source` channel's signal table, which must be among the `captured` tables (qualified
    names): its inserts are streamed as any captured change. None: the channel is off."""
    if SOURCE_CHANNEL not in cfg.signal_enabled_channels or not cfg.signal_data_collection:
        return None
    if cfg.signal_data_collection not in set(captured):
        raise ConfigError(
            f"signal table `{cfg.signal_data_collection}` is not captured: create it (Debezium's columns: id "
            "varchar(42) PRIMARY KEY, type varchar(32) NOT NULL, data varchar(2048)) and add it to "
            "`table.include.list`",
            {"signal.data.collection": ["not a captured table"]},
        )
    return cfg.signal_data_collection


def signals_of(events: pa.Table, log: Any) -> list[Signal]:
    """The signals of a signal table's change events, in commit order: its inserted rows; a row that
    is no well-formed signal is logged and skipped (sending it again, fixed, is the way on)."""
    found = []
    for op, after in zip(events.column("op").to_pylist(), events.column("after").to_pylist(), strict=True):
        if op not in ("c", "r") or not after:
            continue  # updates and deletes of the table are housekeeping, not signals
        signal_id, kind, text = after.get("id"), after.get("type"), after.get("data")
        try:
            data = json.loads(text) if isinstance(text, str) and text.strip() and len(text) <= _MAX_DATA else {}
        except (ValueError, RecursionError):  # not JSON, or nested deeper than the parser goes
            log.warning("signal %s (%s): its data is not JSON: skipped", _shown(signal_id), _shown(kind))
            continue
        problems = signal_problems(kind, data)
        if problems:
            what = "; ".join(f"`{k}` {v[0]}" for k, v in problems.items())
            log.warning("signal %s (%s) is invalid: %s: skipped", _shown(signal_id), _shown(kind), what)
            continue
        found.append(Signal(str(signal_id), str(kind), data))
    return found


def _shown(value: Any) -> str:
    """A value of the signal row as a log line shows it: printable and short."""
    text = str(value)
    return text[:80] if text.isprintable() else repr(text[:80])
