"""Records set aside under `errors.tolerance=all`: counted, logged if asked, and sent to the
dead-letter topic with Kafka's error-context headers.

A run gathers what its task (or its transforms) reported; the runner writes the dead-letter
records as one segment of the dead-letter topic and commits it in the run's own transaction, with
the run's positions or offsets: they land together or not at all. (A sink that commits into its
target before the runtime commits, as the JDBC sink does, re-reports on a rerun the records it set
aside in a run that did not commit; see its `connect_sink_errors` table.)
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from connect_core.runtime.processing.records import arrow_headers_type
from connect_core.runtime.security import mask_text
from connect_core.sdk.config import ConnectorConfig, ErrorsConfig
from connect_core.sdk.errors import DataError
from connect_core.sdk.records import OFFSET_COLUMN, PARTITION_COLUMN, TOPIC_COLUMN, ErrantRecordReporter, ErrantRecords
from connect_core.sdk.transforms import HEADERS_COLUMN

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["HEADER_PREFIX", "DeadLetters", "ErrorSettings"]

#: Kafka's `DeadLetterQueueReporter` header names, under this prefix.
HEADER_PREFIX = "__connect.errors."
#: Error-context lines logged per run at most (`errors.log.enable`); the rest are counted.
LOG_LIMIT = 100

log = logging.getLogger(__name__)


class ErrorSettings:
    """A connector's `errors.*` settings: read from its validated config model, or from a stored config
    through the same fields (`ErrorsConfig`), so `true`, `1` and `on` mean the same here as at create."""

    def __init__(self, config: ConnectorConfig | Mapping[str, Any]) -> None:
        # `ErrorsConfig` has `ConnectorConfig`'s `errors_*` fields: either is read the same way
        errors: Any = config if isinstance(config, ConnectorConfig) else ErrorsConfig.model_validate(dict(config))
        self.tolerate = errors.errors_tolerance == "all"
        self.log_enable = errors.errors_log_enable
        self.log_messages = errors.errors_log_include_messages
        self.topic: str | None = errors.errors_deadletterqueue_topic_name
        self.context_headers = errors.errors_deadletterqueue_context_headers_enable


class DeadLetters(ErrantRecordReporter):
    """One run's reporter: what was set aside, as the rows of its dead-letter topic."""

    def __init__(self, settings: ErrorSettings, connector: str, task_id: int, task_class: str) -> None:
        self.settings = settings
        self._connector, self._task_id, self._task_class = connector, task_id, task_class
        self._tables: list[pa.Table] = []
        self.failed = 0
        self.diverted = 0  # set aside by the runtime (`divert`), not by a failure
        self.discarded: dict[str, int] = {}  # what a schema contract dropped (`discard`)
        self._logged = 0

    def report(self, errant: ErrantRecords) -> None:
        n = errant.rows.num_rows
        if not n:
            return
        classes, messages = errant.per_row(errant.exception_class), errant.per_row(errant.message)
        if not self.settings.tolerate:  # a task given no reporter should raise; this says why anyway
            raise DataError(f"{n} record(s) failed at {errant.stage}: {classes[0]}: {mask_text(messages[0])}")
        self.failed += n
        if self.settings.log_enable:
            self._log(errant, classes, messages)
        if self.settings.topic is not None:
            self._tables.append(self._dead_letter_rows(errant, classes, messages))

    @property
    def dead_letters(self) -> bool:
        """Whether set-aside records go to a dead-letter topic."""
        return self.settings.topic is not None

    def divert(self, errant: ErrantRecords) -> None:
        """Send records the runtime itself set aside (a schema contract's `discard_row`) to the
        dead-letter topic, whatever `errors.tolerance` says, with the error context in the headers
        (their reason is the point): nothing to do without a dead-letter topic."""
        n = errant.rows.num_rows
        if not n or self.settings.topic is None:
            return
        self.diverted += n
        classes, messages = errant.per_row(errant.exception_class), errant.per_row(errant.message)
        self._tables.append(self._dead_letter_rows(errant, classes, messages, headers=True))

    def discard(self, counts: Mapping[str, int]) -> None:
        """Count records or values a schema contract dropped (`contract_discarded_rows` …)."""
        for key, n in counts.items():
            self.discarded[key] = self.discarded.get(key, 0) + n

    def reset(self) -> None:
        """Forget what an attempt reported (a retry reports again)."""
        self._tables.clear()
        self.failed = self.diverted = 0
        self.discarded.clear()

    @property
    def counts(self) -> dict[str, int]:
        counts = {"failed": self.failed, "skipped": self.failed} if self.failed else {}
        if self.settings.topic is not None and self.failed + self.diverted:
            counts["dead_lettered"] = self.failed + self.diverted
        return {**counts, **self.discarded}

    def dead_letter_table(self) -> pa.Table | None:
        """Every reported record as a row of the dead-letter topic (None if none or no topic)."""
        import pyarrow as pa

        if not self._tables:
            return None
        try:
            return pa.concat_tables(self._tables, promote_options="permissive")
        except (pa.ArrowTypeError, pa.ArrowInvalid):  # a column of two types (set aside before and after a Cast)
            return pa.concat_tables(_as_text_where_mixed(self._tables), promote_options="permissive")

    def _dead_letter_rows(
        self, errant: ErrantRecords, classes: list[str], messages: list[str], *, headers: bool = False
    ) -> pa.Table:
        """The records as they were (value and record parts), without where they were read (the
        dead-letter topic gives them new offsets) unless in the context headers."""
        import pyarrow as pa

        rows = errant.rows
        n = rows.num_rows
        where = (TOPIC_COLUMN, PARTITION_COLUMN, OFFSET_COLUMN)
        origin = {c: rows.column(c).to_pylist() if c in rows.column_names else [None] * n for c in where}
        rows = rows.drop_columns([c for c in where if c in rows.column_names])
        if not (self.settings.context_headers or headers):
            return rows
        existing = rows.column(HEADERS_COLUMN).to_pylist() if HEADERS_COLUMN in rows.column_names else [None] * n
        with_context = []
        for i in range(n):
            context = {
                "topic": origin[TOPIC_COLUMN][i],
                "partition": origin[PARTITION_COLUMN][i],
                "offset": origin[OFFSET_COLUMN][i],
                "connector.name": self._connector,
                "task.id": self._task_id,
                "stage": errant.stage,
                "class.name": errant.origin or self._task_class,
                "exception.class.name": classes[i],
                "exception.message": mask_text(messages[i]),
            }
            added = [{"key": HEADER_PREFIX + k, "value": str(v)} for k, v in context.items() if v is not None]
            with_context.append([*(existing[i] or []), *added])
        column = pa.array(with_context, arrow_headers_type())
        if HEADERS_COLUMN in rows.column_names:
            return rows.set_column(rows.column_names.index(HEADERS_COLUMN), HEADERS_COLUMN, column)
        return rows.append_column(HEADERS_COLUMN, column)

    def _log(self, errant: ErrantRecords, classes: list[str], messages: list[str]) -> None:
        logger = logging.getLogger(f"connect.{self._connector}.task-{self._task_id}.errors")
        records = errant.rows.to_pylist() if self.settings.log_messages else None
        for i in range(errant.rows.num_rows):
            if self._logged >= LOG_LIMIT:
                logger.error("... %d more failed record(s) not logged", errant.rows.num_rows - i)
                return
            self._logged += 1
            where = errant.origin or self._task_class
            shown = f", record: {mask_text(repr(records[i]))}" if records is not None else ""
            logger.error(
                "Error encountered in stage %s (%s): %s: %s%s",
                errant.stage,
                where,
                classes[i],
                mask_text(messages[i]),
                shown,
            )


def _as_text_where_mixed(tables: list[pa.Table]) -> list[pa.Table]:
    """`tables` with each column whose type differs between them as text (JSON for nested values):
    a run's dead letters may hold a record before and after a transform changed a column's type."""
    import json

    import pyarrow as pa

    kinds: dict[str, set[pa.DataType]] = {}
    for table in tables:
        for f in table.schema:
            if f.type != pa.null():
                kinds.setdefault(f.name, set()).add(f.type)
    mixed = {name for name, types in kinds.items() if len(types) > 1}
    out = []
    for table in tables:
        for name in mixed & set(table.column_names):
            column = table.column(name)
            try:
                text = column.cast(pa.string())
            except (pa.ArrowNotImplementedError, pa.ArrowInvalid):
                values = column.to_pylist()  # dead letters are few: a Python pass is fine here
                text = pa.array([None if v is None else json.dumps(v, default=str) for v in values], pa.string())
            table = table.set_column(table.column_names.index(name), name, text)
        out.append(table)
    return out
