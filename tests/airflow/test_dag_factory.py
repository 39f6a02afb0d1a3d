"""Each connector compiles to a DAG: ids, schedules, Assets, tags, docs, target states."""

from __future__ import annotations

from pathlib import Path

import pytest
from airflow.sdk import Asset

from connect_core.airflow.dag_factory import build_dags, topic_asset
from connect_core.runtime.context import Runtime
from tests.conftest import file_pair


def _dags(runtime: Runtime):  # type: ignore[no-untyped-def]
    return build_dags(runtime.settings, runtime.engine)


def test_file_pair_compiles_to_two_dags(runtime: Runtime, tmp_path: Path) -> None:
    file_pair(runtime, tmp_path)
    dags = _dags(runtime)
    assert set(dags) == {"connect__fileSourceConnector", "connect__fileSinkConnector", "connect_rebalance"}

    source = dags["connect__fileSourceConnector"]
    assert source.max_active_runs == 1 and not source.catchup
    assert set(source.tags) == {"connect", "source", "FileSourceConnector"}
    assert source.timetable.expression == "0 * * * *"
    (task,) = source.tasks
    assert task.task_id == "task_0"
    assert task.outlets == [topic_asset("fileTopic")]
    assert task.retries == 1

    sink = dags["connect__fileSinkConnector"]
    assert "fileTopic" in str(sink.timetable.asset_condition)
    assert sink.tasks[0].outlets == []


def test_sink_with_cron_runs_on_assets_or_time(runtime: Runtime, tmp_path: Path) -> None:
    runtime.create_connector(
        "sink2",
        {
            "connector.class": "FileSinkConnector",
            "topics": "a,b",
            "file": str(tmp_path / "o"),
            "schedule": "@daily",
            "retries": 4,
            "owner": "data-team",
        },
    )
    dag = _dags(runtime)["connect__sink2"]
    assert type(dag.timetable).__name__ == "AssetOrTimeSchedule"
    assert {a.name for a in dag.timetable.asset_condition.objects} == {"connect.topic.a", "connect.topic.b"}
    assert dag.tasks[0].retries == 4 and dag.tasks[0].owner == "data-team"


def test_doc_md_masks_secrets(runtime: Runtime, tmp_path: Path) -> None:
    runtime.create_connector(
        "src",
        {
            "connector.class": "FileSourceConnector",
            "file": str(tmp_path / "i"),
            "topic": "t",
            "api.token": "tok-123456",
        },
    )
    doc = _dags(runtime)["connect__src"].doc_md
    assert "tok-123456" not in doc and "********" in doc and "`t`" in doc


@pytest.mark.parametrize(("state", "paused", "scheduled"), [("PAUSED", True, True), ("STOPPED", False, False)])
def test_target_state_maps_to_the_dag(
    runtime: Runtime, tmp_path: Path, state: str, paused: bool, scheduled: bool
) -> None:
    file_pair(runtime, tmp_path)
    runtime.connectors.set_target_state("fileSourceConnector", state)
    dag = _dags(runtime)["connect__fileSourceConnector"]
    assert dag.is_paused_upon_creation is paused
    assert (type(dag.timetable).__name__ != "NullTimetable") is scheduled


def test_deleted_connector_has_no_dag(runtime: Runtime, tmp_path: Path) -> None:
    file_pair(runtime, tmp_path)
    runtime.connectors.delete("fileSinkConnector")
    assert set(_dags(runtime)) == {"connect__fileSourceConnector", "connect_rebalance"}


def test_inside_a_task_only_its_dag_is_built(runtime: Runtime, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    file_pair(runtime, tmp_path)
    monkeypatch.setenv("_AIRFLOW_PARSING_CONTEXT_DAG_ID", "connect__fileSinkConnector")
    assert set(_dags(runtime)) == {"connect__fileSinkConnector"}


def test_the_rebalance_dag_waits_in_the_triggerer_then_rebalances(runtime: Runtime, tmp_path: Path) -> None:
    file_pair(runtime, tmp_path)
    dag = _dags(runtime)["connect_rebalance"]
    assert type(dag.timetable).__name__ == "ContinuousTimetable" and dag.max_active_runs == 1
    assert not dag.is_paused_upon_creation
    sensor = dag.get_task("wait_for_change")
    assert sensor.deferrable and sensor.soft_fail
    assert sensor.downstream_task_ids == {"rebalance"}


def test_tasks_take_a_slot_of_their_pools_airflow_pool(runtime: Runtime, tmp_path: Path) -> None:
    from connect_core.runtime.cluster.pools import PoolStore

    file_pair(runtime, tmp_path)  # placed on `local` as they are created
    assert _dags(runtime)["connect__fileSourceConnector"].tasks[0].pool == "connect_local"
    pools = PoolStore(runtime.engine)
    pools.add("spark-a", "spark://127.0.0.1:7077", capacity=3)
    pools.remove("local")
    pools.rebalance("sticky", heartbeat_timeout=60)
    dags = _dags(runtime)
    assert dags["connect__fileSourceConnector"].tasks[0].pool == "connect_spark-a"
    assert dags["connect__fileSinkConnector"].tasks[0].pool == "connect_spark-a"


def test_topic_asset_identity() -> None:
    assert topic_asset("x") == Asset(name="connect.topic.x", uri="connect://topics/x", group="connect")


@pytest.mark.parametrize(
    ("schedule", "timetable"),
    [
        ("@continuous", "ContinuousTimetable"),
        ("15m", "DeltaTriggerTimetable"),
        ("none", "NullTimetable"),
        ("*/5 * * * *", "CronTriggerTimetable"),
    ],
)
def test_source_schedules(runtime: Runtime, tmp_path: Path, schedule: str, timetable: str) -> None:
    runtime.create_connector(
        "s", {"connector.class": "FileSourceConnector", "file": str(tmp_path / "i"), "topic": "t", "schedule": schedule}
    )
    assert type(_dags(runtime)["connect__s"].timetable).__name__ == timetable


def test_sink_interval_schedule(runtime: Runtime, tmp_path: Path) -> None:
    runtime.create_connector(
        "k", {"connector.class": "FileSinkConnector", "file": str(tmp_path / "o"), "topics": "t", "schedule": "2h"}
    )
    assert type(_dags(runtime)["connect__k"].timetable.timetable).__name__ == "DeltaTriggerTimetable"


def test_airflow_never_starts_an_empty_embedded_store(tmp_path: Path) -> None:
    from connect_core.runtime.settings import Settings
    from connect_core.sdk.errors import ConfigError

    with pytest.raises(ConfigError, match="CONNECT_DATABASE_URL"):
        build_dags(Settings(home=tmp_path / "nothing-here"))
    assert not (tmp_path / "nothing-here").exists()


def _write_config(runtime: Runtime, name: str, **changes: object) -> None:
    """Change a stored config behind validation's back (as a row stored before a check existed)."""
    import json

    from sqlalchemy import text

    with runtime.engine.begin() as conn:
        conn.execute(
            text("UPDATE connect.connectors SET config = config || CAST(:changes AS jsonb) WHERE name = :name"),
            {"changes": json.dumps(changes), "name": name},
        )


@pytest.mark.parametrize(
    "changes",
    [{"schedule": "every tuesday"}, {"schedule": "@continuous"}, {"connect.topicnames": "a b"}, {"retries": -1}],
)
def test_one_broken_connector_never_hides_the_others(
    runtime: Runtime, tmp_path: Path, changes: dict[str, object], caplog: pytest.LogCaptureFixture
) -> None:
    file_pair(runtime, tmp_path)
    _write_config(runtime, "fileSinkConnector", **changes)
    dags = _dags(runtime)
    assert set(dags) == {"connect__fileSourceConnector", "connect_rebalance"}
    assert "connector `fileSinkConnector` could not be compiled to a DAG" in caplog.text


def test_a_source_writing_an_invalid_topic_is_left_out(runtime: Runtime, tmp_path: Path) -> None:
    file_pair(runtime, tmp_path)
    _write_config(runtime, "fileSourceConnector", **{"connect.topicname": "no such/topic"})
    assert set(_dags(runtime)) == {"connect__fileSinkConnector", "connect_rebalance"}


@pytest.mark.parametrize("name", ["a b", "a#b", "a?b", "a/b", "a\x00b", "a\tb", "a\nb", "é", "", "x" * 242])
def test_names_that_cannot_be_a_dag_id_are_rejected(runtime: Runtime, tmp_path: Path, name: str) -> None:
    from connect_core.sdk.errors import ConfigError

    config = {"connector.class": "FileSourceConnector", "file": str(tmp_path / "i"), "topic": "t"}
    with pytest.raises(ConfigError, match=r"ASCII letter, digit, `\.`, `_` or `-`") as err:
        runtime.create_connector(name, config)
    assert "\x00" not in str(err.value) and "DAG id" in str(err.value)
    assert runtime.connectors.names() == []


def test_names_map_one_to_one_onto_dag_ids(runtime: Runtime, tmp_path: Path) -> None:
    config = {"connector.class": "FileSourceConnector", "file": str(tmp_path / "i"), "topic": "t"}
    for name in ("a-b", "a_b", "a.b", "A_b", "x" * 241):
        runtime.create_connector(name, config)
    assert set(_dags(runtime)) == {f"connect__{n}" for n in ("a-b", "a_b", "a.b", "A_b", "x" * 241)} | {
        "connect_rebalance"
    }


def test_names_stored_before_the_check_keep_their_dag(runtime: Runtime, tmp_path: Path) -> None:
    """Two legacy names that map to one DAG id: the first keeps it, the second is left out (logged)."""
    config = {"connector.class": "FileSourceConnector", "file": str(tmp_path / "i"), "topic": "t"}
    validated = runtime.validated("any", config)
    for legacy in ("a b", "a#b"):  # stored straight, as names were before the check
        runtime.connectors.create(legacy, **validated)
    dags = _dags(runtime)
    assert set(dags) == {"connect__a_b", "connect_rebalance"}
    assert dags["connect__a_b"].tasks[0].connector == "a b"
    # The name rule is for new names: a stored one's config can still be changed.
    runtime.update_connector("a b", {**config, "batch.max.bytes": 1024})
    assert runtime.connectors.get("a b").config["batch.max.bytes"] == 1024


def test_a_source_routed_by_regex_router_outlets_the_routed_topic(runtime: Runtime, tmp_path: Path) -> None:
    runtime.create_connector(
        "routed",
        {
            "connector.class": "FileSourceConnector",
            "filename": str(tmp_path / "in.txt"),
            "topic": "orders_raw",
            "transforms": "route",
            "transforms.route.type": "org.apache.kafka.connect.transforms.RegexRouter",
            "transforms.route.regex": "(.*)_raw",
            "transforms.route.replacement": "$1",
        },
    )
    (task,) = _dags(runtime)["connect__routed"].tasks
    assert task.outlets == [topic_asset("orders")]  # the sink of `orders` runs when this writes
