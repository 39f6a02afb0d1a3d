"""What the log-based sources' incremental snapshots share (Debezium's signals, DBLog's chunks):
the progress kept in the source's committed position under `STATE`, how signals change it, and the
snapshot metrics a run reports of it. How a database reads a chunk and tells which of its rows a
streamed change is newer than is its own (`postgres._incremental`).

The progress: `queue` (tables still to read), `table` (the one being read), `key` (its key columns),
`last_key` (the last key read; None: from the start), `max_key` (its largest key when the read
began: rows past it are the stream's), `paused`, `chunks` and `rows` (read so far of `table`), and,
for a source that takes a signal's options (`apply_signals`' `options`), `options`: by table, what
its read was asked with (PostgreSQL: a `surrogate-key` to chunk by, a checked `filter`), kept so a
restarted run reads the same rows. Absent when no table has any.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from connect_core.sdk import Signal
from connect_core.sdk.signals import PROGRESS_KEY, SIGNAL_OPTIONS, SIGNAL_TYPES

__all__ = ["STATE", "apply_signals", "next_table", "progress_stats"]

#: The key of the progress in the source's committed position.
STATE = PROGRESS_KEY


def apply_signals(
    state: Mapping[str, Any] | None,
    signals: Iterable[Signal],
    keys: Mapping[str, Sequence[str]],
    log: Any,
    options: Callable[[Signal, str], Mapping[str, Any]] | None = None,
) -> dict[str, Any] | None:
    """The progress after `signals`, in order (None: no incremental snapshot). A signal the source
    cannot act on (a table it does not capture or has no key, a blocking snapshot) is logged and
    consumed: sending it again will not change that.

    `options(signal, table)`: for a source that takes an `execute-snapshot`'s options
    (`surrogate-key`, `additional-conditions`), what the table's read is asked with, checked (kept
    under `options`; a `surrogate-key` in it lets a table without a key be read); ValueError says
    why the table cannot be read so. Without it, a table asked for with options is not read."""
    progress: dict[str, Any] | None = dict(state) if state else None
    for signal in signals:
        if signal.type not in SIGNAL_TYPES:
            log.warning("signal %s: unknown type `%s`: ignored", signal.id, signal.type)
            continue
        collections = [str(c) for c in signal.data.get("data-collections") or []]
        if signal.type == "execute-snapshot":
            if str(signal.data.get("type", "incremental")).lower() != "incremental":
                log.warning("signal %s: only incremental snapshots are run: ignored", signal.id)
                continue
            wanted: dict[str, dict[str, Any]] = {}
            for name in collections:
                if name not in keys:
                    log.warning("signal %s: `%s` is not a captured table: ignored", signal.id, name)
                    continue
                asked = _table_options(signal, name, options, log)
                if asked is None:
                    continue
                if not keys[name] and not asked.get("surrogate-key"):
                    log.warning(
                        "signal %s: `%s` has no key to read it in chunks by (a primary key, not of a floating-point, "
                        "enum or set type): ignored",
                        signal.id,
                        name,
                    )
                else:
                    wanted[name] = asked
            if wanted:
                progress = progress or {"queue": [], "table": None, "paused": False}
                queued = [t for t in wanted if t != progress.get("table") and t not in progress["queue"]]
                progress["queue"] = [*progress["queue"], *queued]
                chosen = dict(progress.get("options") or {})
                for name, asked in wanted.items():
                    if name != progress.get("table"):  # the table being read goes on as it began
                        chosen.pop(name, None)
                        if asked:
                            chosen[name] = asked
                progress["options"] = chosen
                log.info("signal %s: incremental snapshot of %s queued", signal.id, ", ".join(wanted))
        elif progress is None:
            log.info("signal %s (%s): no incremental snapshot is running", signal.id, signal.type)
        elif signal.type == "stop-snapshot":
            if collections:
                progress["queue"] = [t for t in progress["queue"] if t not in collections]
                if progress.get("table") in collections:
                    progress.update(table=None, last_key=None, max_key=None)
            else:
                progress = None
            log.info("signal %s: incremental snapshot stopped (%s)", signal.id, ", ".join(collections) or "all")
        else:
            progress["paused"] = signal.type == "pause-snapshot"
            log.info("signal %s: incremental snapshot %s", signal.id, "paused" if progress["paused"] else "resumed")
    return next_table(progress)


def _table_options(
    signal: Signal, name: str, options: Callable[[Signal, str], Mapping[str, Any]] | None, log: Any
) -> dict[str, Any] | None:
    """What `signal` asks of table `name`'s read (None: it cannot be read so; logged)."""
    if options is None:
        asked = [k for k in SIGNAL_OPTIONS if signal.data.get(k)]
        if asked:
            log.warning("signal %s: `%s`: this source does not take %s: ignored", signal.id, name, ", ".join(asked))
            return None
        return {}
    try:
        return dict(options(signal, name))
    except ValueError as exc:
        log.warning("signal %s: `%s` %s: ignored", signal.id, name, exc)
        return None


def next_table(progress: dict[str, Any] | None) -> dict[str, Any] | None:
    """`progress` with the next queued table current when none is (None when nothing is left); the
    options of tables neither current nor queued are dropped."""
    if progress is None:
        return None
    if progress.get("table") is None:
        if not progress["queue"]:
            return None
        progress = {**progress, "table": progress["queue"][0], "queue": progress["queue"][1:]}
        progress.update(last_key=None, max_key=None, chunks=0, rows=0)
    if "options" in progress:
        live = {progress["table"], *progress["queue"]}
        kept = {t: o for t, o in progress["options"].items() if t in live}
        progress = {k: v for k, v in progress.items() if k != "options"}
        if kept:
            progress["options"] = kept
    return progress


def progress_stats(progress: Mapping[str, Any] | None) -> dict[str, Any]:
    """What a run reports of the incremental snapshot (Debezium's snapshot metric names)."""
    if not progress:
        return {}
    return {
        "SnapshotRunning": not progress.get("paused", False),
        "SnapshotPaused": bool(progress.get("paused", False)),
        "CurrentTable": progress.get("table"),
        "RemainingTableCount": len(progress.get("queue", [])) + (1 if progress.get("table") else 0),
        "ChunksRead": progress.get("chunks", 0),
        "RowsScanned": progress.get("rows", 0),
    }
