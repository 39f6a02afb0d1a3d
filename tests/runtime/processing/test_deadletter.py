"""A run's dead letters as one table, whatever the records set aside looked like."""

from __future__ import annotations

import pyarrow as pa

from connect_core.runtime.processing.deadletter import DeadLetters, ErrorSettings
from connect_core.sdk.records import ErrantRecords


def test_a_column_of_two_types_is_kept_as_text() -> None:
    """A Cast's bad rows (the text as read) and the sink's (the number after the Cast) in one run."""
    letters = DeadLetters(
        ErrorSettings({"errors.tolerance": "all", "errors.deadletterqueue.topic.name": "dlq"}), "c", 0, "Task"
    )
    before_cast = pa.table({"qty": pa.array(["abc"]), "tags": pa.array([["x"]]), "__offset": pa.array([3])})
    after_cast = pa.table({"qty": pa.array([7], pa.int32()), "tags": pa.array(["y"]), "__offset": pa.array([5])})
    letters.report(ErrantRecords(before_cast, "DataError", "no number", stage="TRANSFORMATION"))
    letters.report(ErrantRecords(after_cast, "IntegrityError", "duplicate", stage="TASK_PUT"))
    table = letters.dead_letter_table()
    assert table is not None
    assert table.column("qty").to_pylist() == ["abc", "7"]
    assert table.column("tags").to_pylist() == ['["x"]', "y"]
    assert letters.counts == {"failed": 2, "skipped": 2, "dead_lettered": 2}
