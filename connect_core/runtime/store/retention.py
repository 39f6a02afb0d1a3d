"""History retention: the metadata stays linear in connectors + tasks, not in time.

Finished task runs (and their stats) and rebalance log rows older than
`history_retention_days` are deleted, in batches so that no statement holds
locks for long. Kept whatever their age: a run still RUNNING, a run whose staged
files are not cleaned up yet (the next run deletes them by that record), each
task's latest run and the one its status points to, a run whose topic segments are still there
(topic retention deletes them: `runtime.topics.retention`), and the latest rebalance.
Run totals lose nothing either: the statement that deletes a batch of runs adds what they counted
(`store.metrics.RUN_COUNTERS`) to their tasks' `task_run_totals` rows, which `/metrics` adds to the
runs left. One statement, so one transaction: a crash leaves both or neither, and a run is counted
once, by its row or by the totals. Runs of a connector that no longer exists are deleted uncounted.
Error totals live on the task's status row, so pruning runs loses none of them.
The rebalance sensor prunes about once an hour (`connect_core.airflow.rebalance`).
"""

from __future__ import annotations

import logging
from datetime import timedelta

from sqlalchemy import Engine, text

from connect_core.runtime.store.metrics import RUN_COUNTERS, RUN_PARTS, RUN_STATS

__all__ = ["prune"]

log = logging.getLogger(__name__)

# The batch's runs are deleted and their totals added to their tasks' rows in one statement;
# `rowcount` would count the upserted rows, so the statement returns the runs deleted.
_RUNS = text(
    f"""
    WITH gone AS (
        DELETE FROM connect.task_runs WHERE id IN (
            SELECT r.id FROM connect.task_runs r
            WHERE r.finished_at < now() - CAST(:age AS interval)
              AND r.state <> 'RUNNING'
              AND r.staged_paths = '[]'::jsonb
              AND EXISTS (SELECT 1 FROM connect.task_runs n
                          WHERE n.connector = r.connector AND n.task_id = r.task_id AND n.id > r.id)
              AND NOT EXISTS (SELECT 1 FROM connect.task_status s WHERE s.last_run_id = r.id)
              AND NOT EXISTS (SELECT 1 FROM connect.topic_segments g WHERE g.run_id = r.id)
            ORDER BY r.finished_at
            LIMIT :batch)
        RETURNING *),
    counted AS (
        SELECT connector, task_id, {RUN_COUNTERS}
        FROM (SELECT {RUN_PARTS} FROM gone r, {RUN_STATS}) parts
        -- locked so that a connector deleted meanwhile is left out instead of failing the foreign key
        WHERE connector IN (SELECT name FROM connect.connectors
                            WHERE name IN (SELECT connector FROM gone) FOR KEY SHARE)
        GROUP BY connector, task_id),
    folded AS (
        INSERT INTO connect.task_run_totals AS t
            (connector, task_id, succeeded, failed, records, errored, last_error_at,
             files_written, bytes_written, keys_deleted)
        SELECT * FROM counted
        ON CONFLICT (connector, task_id) DO UPDATE SET
            succeeded = t.succeeded + excluded.succeeded,
            failed = t.failed + excluded.failed,
            records = t.records + excluded.records,
            errored = t.errored + excluded.errored,
            files_written = t.files_written + excluded.files_written,
            bytes_written = t.bytes_written + excluded.bytes_written,
            keys_deleted = t.keys_deleted + excluded.keys_deleted,
            last_error_at = greatest(t.last_error_at, excluded.last_error_at),
            updated_at = now()
        RETURNING 1)
    SELECT (SELECT count(*) FROM gone) AS deleted, (SELECT count(*) FROM folded) AS tasks
    """
)
_LOG = text(
    """
    DELETE FROM connect.rebalance_log WHERE id IN (
        SELECT id FROM connect.rebalance_log
        WHERE created_at < now() - CAST(:age AS interval)
          AND id < (SELECT max(id) FROM connect.rebalance_log)
        ORDER BY id
        LIMIT :batch)
    """
)


def prune(engine: Engine, retention_days: float, *, batch: int = 5_000, max_batches: int = 100) -> dict[str, int]:
    """Delete history older than `retention_days` (0: nothing); rows deleted per table."""
    deleted = {"task_runs": 0, "rebalance_log": 0}
    if retention_days <= 0:
        return deleted
    age = f"{timedelta(days=retention_days).total_seconds():.0f} seconds"
    for table, statement in (("task_runs", _RUNS), ("rebalance_log", _LOG)):
        for _ in range(max_batches):
            with engine.begin() as conn:
                result = conn.execute(statement, {"age": age, "batch": batch})
                n = result.scalar_one() if result.returns_rows else result.rowcount
            deleted[table] += n
            if n < batch:
                break
    if any(deleted.values()):
        log.info("pruned history older than %s day(s): %s", retention_days, deleted)
    return deleted
