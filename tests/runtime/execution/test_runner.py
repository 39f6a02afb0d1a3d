"""The runner, in-process with the shared SparkSession: the seed's file copy, incremental and exactly once."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import func, select

from connect_core.runtime.context import Runtime
from connect_core.runtime.execution.runner import TaskRunner
from connect_core.runtime.store.models import SinkOffsetRow, SourcePositionRow, TaskRunRow, TopicSegmentRow
from tests.conftest import file_pair


def _count(runtime: Runtime, model) -> int:  # type: ignore[no-untyped-def]
    with runtime.engine.connect() as conn:
        return conn.execute(select(func.count()).select_from(model)).scalar_one()


def _snapshot(runtime: Runtime) -> tuple:  # type: ignore[type-arg]
    with runtime.engine.connect() as conn:
        positions = conn.execute(select(SourcePositionRow.offset)).all()
        offsets = conn.execute(select(SinkOffsetRow.offset, SinkOffsetRow.metadata_)).all()
        segments = conn.execute(select(func.count()).select_from(TopicSegmentRow)).scalar_one()
    return positions, offsets, segments


def test_lines_in_equal_lines_out_incrementally(runner: TaskRunner, runtime: Runtime, tmp_path: Path) -> None:
    source, sink = file_pair(runtime, tmp_path)
    source.write_text("Hello\r\nRocketMQ\n Connect\n")

    assert runner.run("fileSourceConnector", 0).rows == 3
    assert runner.run("fileSinkConnector", 0).rows == 3
    assert sink.read_text() == "Hello\nRocketMQ\n Connect\n"

    with source.open("a") as f:
        f.write("more 1\nmore 2\npartial")  # the partial line waits for its newline
    assert runner.run("fileSourceConnector", 0).rows == 2
    assert runner.run("fileSinkConnector", 0).rows == 2
    assert sink.read_text().splitlines() == ["Hello", "RocketMQ", " Connect", "more 1", "more 2"]

    with source.open("a") as f:
        f.write(" done\n")
    runner.run("fileSourceConnector", 0)
    runner.run("fileSinkConnector", 0)
    assert sink.read_text().splitlines()[-1] == "partial done"


def test_nothing_new_commits_nothing(runner: TaskRunner, runtime: Runtime, tmp_path: Path) -> None:
    source, sink = file_pair(runtime, tmp_path)
    source.write_text("a\nb\n")
    runner.run("fileSourceConnector", 0)
    runner.run("fileSinkConnector", 0)
    before = _snapshot(runtime)

    source_result = runner.run("fileSourceConnector", 0)
    sink_result = runner.run("fileSinkConnector", 0)

    assert (source_result.state, source_result.rows) == ("SUCCEEDED", 0)
    assert (sink_result.state, sink_result.rows) == ("SUCCEEDED", 0)
    assert _snapshot(runtime) == before
    assert sink.read_text() == "a\nb\n"
    # the idle run staged nothing either (its segment path is where it would have written)
    assert source_result.run_id is not None
    staged = Path(runtime.topics.segment_path("fileTopic", 0, source_result.run_id).removeprefix("file://"))
    assert staged.parent.is_dir() and not staged.exists()


def test_many_lines_keep_their_order(runner: TaskRunner, runtime: Runtime, tmp_path: Path) -> None:
    source, sink = file_pair(runtime, tmp_path)
    lines = [f"line {i} 数据 🚀" for i in range(20_000)]
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    runner.run("fileSourceConnector", 0)
    runner.run("fileSinkConnector", 0)
    assert sink.read_text(encoding="utf-8").splitlines() == lines


def test_truncated_source_file_is_read_from_the_start(runner: TaskRunner, runtime: Runtime, tmp_path: Path) -> None:
    source, sink = file_pair(runtime, tmp_path)
    source.write_text("one\ntwo\nthree\n")
    runner.run("fileSourceConnector", 0)
    source.write_text("new\n")  # truncated below the position: a rotated log
    assert runner.run("fileSourceConnector", 0).rows == 1
    runner.run("fileSinkConnector", 0)
    assert sink.read_text().splitlines() == ["one", "two", "three", "new"]


def test_missing_source_file_fails_task_and_keeps_position(
    runner: TaskRunner, runtime: Runtime, tmp_path: Path
) -> None:
    source, _ = file_pair(runtime, tmp_path)
    source.write_text("a\n")
    runner.run("fileSourceConnector", 0)
    before = _snapshot(runtime)
    source.unlink()

    result = runner.run("fileSourceConnector", 0)

    assert result.state == "FAILED"
    assert "does not exist" in result.message
    task = runtime.connectors.status("fileSourceConnector").tasks[0]
    assert task.state == "FAILED"
    assert task.trace is not None and "RetriableError" in task.trace
    assert _snapshot(runtime) == before

    source.write_text("a\nb\n")  # the file is back: the next run recovers
    assert runner.run("fileSourceConnector", 0).state == "SUCCEEDED"
    assert runtime.connectors.status("fileSourceConnector").tasks[0].state == "RUNNING"


def test_staged_files_of_a_killed_run_are_deleted_by_the_next(
    runner: TaskRunner, runtime: Runtime, tmp_path: Path
) -> None:
    source, _ = file_pair(runtime, tmp_path)
    source.write_text("a\n")
    # A run that staged output and then died (no commit, lease lapsed).
    lease = runtime.runs.acquire("fileSourceConnector", 0, lease_seconds=0.001)
    runtime.topics.ensure_topic("fileTopic")
    orphan = Path(runtime.topics.segment_path("fileTopic", 0, lease.run_id))
    runtime.runs.record_staged(lease, str(orphan))
    orphan.mkdir(parents=True)
    (orphan / "part-0.parquet").write_bytes(b"garbage")

    assert runner.run("fileSourceConnector", 0).state == "SUCCEEDED"

    assert not orphan.exists()
    with runtime.engine.connect() as conn:
        killed = conn.execute(
            select(TaskRunRow.state, TaskRunRow.staged_paths).where(TaskRunRow.id == lease.run_id)
        ).one()
    assert tuple(killed) == ("ABANDONED", [])
    assert _count(runtime, TopicSegmentRow) == 1


def test_paused_connector_is_skipped(runner: TaskRunner, runtime: Runtime, tmp_path: Path) -> None:
    source, _ = file_pair(runtime, tmp_path)
    source.write_text("a\n")
    runtime.connectors.set_target_state("fileSourceConnector", "PAUSED")
    assert runner.run("fileSourceConnector", 0).state == "SKIPPED"
    assert _count(runtime, TaskRunRow) == 0


def test_a_task_gone_is_a_failed_result_and_a_pause_before_the_lease_runs_nothing(
    runner: TaskRunner, runtime: Runtime, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A launch of several tasks keeps every outcome: one whose connector is gone is FAILED (`config`),
    not an exception that loses the others'. A pause committed between the runner's look and its lease
    runs nothing: the lease's own read of the target state decides."""
    gone = runner.run("noSuchConnector", 0)
    assert (gone.state, gone.error_kind) == ("FAILED", "config") and "noSuchConnector" in gone.message

    source, _ = file_pair(runtime, tmp_path)
    source.write_text("a line\n")
    stale = runtime.connectors.get("fileSourceConnector")  # read while RUNNING …
    runtime.connectors.set_target_state("fileSourceConnector", "PAUSED")  # … paused right after
    monkeypatch.setattr(runtime.connectors, "get", lambda name: stale)
    skipped = runner.run("fileSourceConnector", 0)
    assert skipped.state == "SKIPPED" and "PAUSED" in skipped.message
    assert [r["state"] for r in runtime.connectors.last_runs("fileSourceConnector")] == ["ABANDONED"]
    assert _count(runtime, TopicSegmentRow) == 0 and _count(runtime, SourcePositionRow) == 0
