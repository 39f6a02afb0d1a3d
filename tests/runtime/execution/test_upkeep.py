"""Table upkeep in the runtime (`runtime.execution.upkeep`): a job runs when due and is recorded, is
skipped until its schedule passes again, gets its config as a task run does (placeholders filled,
paths confined), and fails as one masked line; `upkeep.schedule` is validated at create."""

from __future__ import annotations

import logging
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from pydantic import Field
from sqlalchemy import select, update

from connect_core.runtime.context import Runtime
from connect_core.runtime.execution.upkeep import UpkeepState, next_due, run_upkeep
from connect_core.runtime.plugins import PluginRegistry
from connect_core.runtime.store.models import UpkeepJobRow
from connect_core.runtime.store.upkeep import UpkeepStore
from connect_core.sdk import LocalPath, RetriableError, SinkConnector, SinkConnectorConfig, SinkTask, Upkeep
from connect_core.sdk.errors import ConfigError

SECRET = "pw-7f3a9c2e"


class _TidyTask(SinkTask):
    def write(self, spark: Any, batch: Any) -> None:
        return None


class TidyConfig(SinkConnectorConfig):
    directory: LocalPath = Field(alias="directory")


class TidySink(SinkConnector[TidyConfig]):
    """A sink whose `tidy` job notes the directory it got and whose `boom` job fails naming a secret."""

    config_model = TidyConfig
    task_class = _TidyTask
    seen: list[str] = []  # what the jobs were given

    def task_configs(self, config: TidyConfig, max_tasks: int) -> list[dict[str, Any]]:
        return [{}]

    def upkeep(self, name: str, config: TidyConfig) -> tuple[Upkeep, ...]:
        def tidy(log: logging.Logger) -> dict[str, Any]:
            TidySink.seen.append(config.directory)
            return {"tidied": 1, "where": config.directory}

        def boom(log: logging.Logger) -> dict[str, Any]:
            raise RetriableError(f"the store refused\n login {(config.model_extra or {})['store.password']}")

        return (Upkeep("tidy", tidy), Upkeep("boom", boom))


@pytest.fixture
def tidy(runtime: Runtime, tmp_path: Path) -> Runtime:
    runtime.registry = PluginRegistry(extra=[TidySink])
    (tmp_path / "d").mkdir()
    runtime.create_connector(
        "tidy",
        {
            "connector.class": "TidySink",
            "topics": "t",
            "directory": str(tmp_path / "d"),
            "store.password": SECRET,
            "upkeep.schedule": "2h",
        },
    )
    TidySink.seen.clear()
    return runtime


def _age(runtime: Runtime, job: str, hours: float) -> None:
    """Move the job's last success `hours` into the past."""
    with runtime.engine.begin() as conn:
        conn.execute(
            update(UpkeepJobRow)
            .where(UpkeepJobRow.job == job)
            .values(succeeded_at=UpkeepJobRow.succeeded_at - timedelta(hours=hours))
        )


def test_a_job_runs_when_due_is_recorded_and_skips_until_its_schedule_passes(tidy: Runtime, tmp_path: Path) -> None:
    done = run_upkeep(tidy, "tidy", "tidy")
    assert (done.state, done.result["tidied"]) == (UpkeepState.SUCCEEDED, 1)
    assert TidySink.seen == [os.path.realpath(tmp_path / "d")]  # the path a run gets: the real one
    (record,) = UpkeepStore(tidy.engine).listing("tidy")
    assert (record.job, record.state, record.result, record.error) == ("tidy", "SUCCEEDED", done.result, None)
    assert record.succeeded_at == record.finished_at >= record.started_at

    skipped = run_upkeep(tidy, "tidy", "tidy")
    assert skipped.state is UpkeepState.SKIPPED and "`tidy` is not due" in skipped.cause
    _age(tidy, "tidy", 1.5)
    assert run_upkeep(tidy, "tidy", "tidy").state is UpkeepState.SKIPPED
    _age(tidy, "tidy", 1)  # 2.5 h ago now
    assert run_upkeep(tidy, "tidy", "tidy").state is UpkeepState.SUCCEEDED
    assert len(TidySink.seen) == 2

    assert run_upkeep(tidy, "tidy", "gone").state is UpkeepState.SKIPPED  # a job its config no longer has
    tidy.connectors.set_target_state("tidy", "PAUSED")
    _age(tidy, "tidy", 3)
    paused = run_upkeep(tidy, "tidy", "tidy")
    assert (paused.state, paused.cause) == (UpkeepState.SKIPPED, "connector `tidy` is PAUSED")

    tidy.delete_connector("tidy")  # its upkeep records go with it
    assert UpkeepStore(tidy.engine).listing("tidy") == []
    UpkeepStore(tidy.engine).record("tidy", "tidy", started_at=datetime.now(UTC), result={})  # a run ending after
    assert UpkeepStore(tidy.engine).listing("tidy") == []


def test_a_failure_is_one_masked_line_recorded_and_the_job_stays_due(tidy: Runtime) -> None:
    assert run_upkeep(tidy, "tidy", "tidy").state is UpkeepState.SUCCEEDED  # another job's success stays
    _age(tidy, "tidy", 3)
    for _ in range(2):  # a failure is no success: the job is due again at the next run
        failed = run_upkeep(tidy, "tidy", "boom")
        assert (failed.state, failed.error_kind, failed.fatal) == (UpkeepState.FAILED, "retriable", False)
        assert failed.cause == "RetriableError: the store refused login ********"
    records = {r.job: r for r in UpkeepStore(tidy.engine).listing("tidy")}
    assert (records["boom"].state, records["boom"].error, records["boom"].succeeded_at) == (
        "FAILED",
        failed.cause,
        None,
    )
    assert records["tidy"].state == "SUCCEEDED"


def test_a_job_gets_its_paths_confined_as_a_run_does(tidy: Runtime, tmp_path: Path) -> None:
    """A directory swapped for a link out of the allowed paths since create: the job never runs."""
    outside = tmp_path.parent / f"{tmp_path.name}-outside"
    outside.mkdir()
    os.rmdir(tmp_path / "d")
    (tmp_path / "d").symlink_to(outside, target_is_directory=True)
    failed = run_upkeep(tidy, "tidy", "tidy")
    assert (failed.state, failed.error_kind, failed.fatal) == (UpkeepState.FAILED, "config", True)
    assert "outside the directories" in failed.cause and TidySink.seen == []


def test_a_stored_schedule_that_never_fires_is_a_recorded_failure_not_a_crash(tidy: Runtime) -> None:
    """A cron no date matches (stored before create refused it): when the job is due could not be
    told, and the task raised croniter's error unrecorded, unmasked, at every DAG run."""
    from connect_core.runtime.store.models import ConnectorRow

    assert run_upkeep(tidy, "tidy", "tidy").state is UpkeepState.SUCCEEDED
    with tidy.engine.begin() as conn:
        config = conn.execute(select(ConnectorRow.config).where(ConnectorRow.name == "tidy")).scalar_one()
        conn.execute(
            update(ConnectorRow)
            .where(ConnectorRow.name == "tidy")
            .values(config={**config, "upkeep.schedule": "0 0 31 2 *"})
        )
    failed = run_upkeep(tidy, "tidy", "tidy")
    assert (failed.state, failed.fatal) == (UpkeepState.FAILED, True)
    assert "never fires" in failed.cause
    assert {r.job: r.state for r in UpkeepStore(tidy.engine).listing("tidy")} == {"tidy": "FAILED"}


def test_upkeep_schedule_is_validated_at_create(tidy: Runtime, tmp_path: Path) -> None:
    base = {"connector.class": "TidySink", "topics": "t", "directory": str(tmp_path / "d")}
    for value, problem in (
        ("@once", "not `@once`"),
        ("@continuous", "not `@continuous`"),
        ("every day", "invalid schedule"),
        ("0s", "between 1s"),
        ("0 0 30 2 *", "never fires"),
    ):
        with pytest.raises(ConfigError) as raised:
            tidy.create_connector("bad", {**base, "upkeep.schedule": value})
        assert problem in " ".join(raised.value.errors["upkeep.schedule"])
    file_sink = {"connector.class": "FileSinkConnector", "topics": "t", "file": str(tmp_path / "o")}
    with pytest.raises(ConfigError) as raised:
        tidy.create_connector("plain", {**file_sink, "upkeep.schedule": "@daily"})
    assert raised.value.errors == {
        "upkeep.schedule": ["connector `FileSinkConnector` has no table upkeep: leave `upkeep.schedule` out"]
    }


def test_when_a_job_is_due_again() -> None:
    last = datetime(2024, 1, 1, 10, 30, tzinfo=UTC)
    assert next_due("6h", last) == datetime(2024, 1, 1, 16, 30, tzinfo=UTC)
    assert next_due("@daily", last) == datetime(2024, 1, 2, tzinfo=UTC)  # the cron's next tick, UTC
    assert next_due("15 */4 * * *", last) == datetime(2024, 1, 1, 12, 15, tzinfo=UTC)
