"""Each connector compiles to a DAG: ids, schedules, Assets, tags, docs, target states."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from airflow.sdk import Asset

from connect_core.airflow.dag_factory import _moves, build_dags, shard_file, shard_of, topic_asset
from connect_core.runtime.context import Runtime
from connect_core.runtime.settings import Settings
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
    # What each task moves, in the graph and grid (its id stays `task_0`); a sink's topics are its inlets.
    assert task.task_display_name.startswith("read ") and task.task_display_name.endswith(
        "/test-source-file.txt → fileTopic"
    )
    assert sink.tasks[0].task_display_name.startswith("write fileTopic → ")
    assert sink.tasks[0].task_display_name.endswith("/test-sink-file.txt")
    assert sink.tasks[0].inlets == [topic_asset("fileTopic")]


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


def _lake_sink(runtime: Runtime, tmp_path: Path, name: str, kind: str, **extra: str) -> None:
    """An Iceberg or Delta sink (nothing is written or read while DAGs are built)."""
    if kind == "iceberg":
        config = {
            "connector.class": "IcebergSinkConnector",
            "iceberg.tables": "shop.orders",
            "iceberg.catalog.type": "sql",
            "iceberg.catalog.uri": "postgresql+psycopg2://nobody@127.0.0.1:1/none",
            "iceberg.catalog.warehouse": str(tmp_path / "warehouse"),
        }
    else:
        config = {"connector.class": "DeltaSinkConnector", "delta.table.path": str(tmp_path / "lake")}
    runtime.create_connector(name, {**config, "topics": "orders", **extra})


@pytest.mark.parametrize(
    ("kind", "jobs"),
    [("iceberg", ["compact", "expire_snapshots", "remove_orphans"]), ("delta", ["optimize", "vacuum"])],
)
def test_a_sink_with_an_upkeep_schedule_gets_its_upkeep_tasks_after_its_sink_tasks(
    runtime: Runtime, tmp_path: Path, kind: str, jobs: list[str]
) -> None:
    _lake_sink(runtime, tmp_path, "lake", kind, **{"upkeep.schedule": "@daily"})
    _lake_sink(runtime, tmp_path, "plain", kind)
    dags = _dags(runtime)

    dag = dags["connect__lake"]
    upkeep = [t for t in dag.tasks if t.task_id.startswith("upkeep_")]
    assert [t.task_id for t in upkeep] == [f"upkeep_{job}" for job in jobs]
    assert [t.downstream_task_ids for t in upkeep] == [{f"upkeep_{job}"} for job in jobs[1:]] + [set()]
    assert upkeep[0].upstream_task_ids == {"task_0"}  # after the sink's task, each after the one before
    for task in upkeep:
        assert task.trigger_rule == "all_done"  # whether the sink's run wrote, skipped or failed
        assert task.execution_timeout == timedelta(hours=2)  # a hung job cannot hold the sink's next run
        assert task.pool == "default_pool"  # no Spark pool's slot: pyiceberg / delta-rs in the task's process
        assert task.connector == "lake" and task.job == task.task_id.removeprefix("upkeep_")
    assert dag.tasks[0].pool == "connect_local"
    # no schedule of its own: the DAG also runs on the upkeep's, so an idle table gets upkeep too
    assert dag.timetable.timetable.expression == "0 0 * * *"
    assert "connect.topic.orders" in str(dag.timetable.asset_condition)

    plain = dags["connect__plain"]  # no `upkeep.schedule`: no upkeep tasks, Assets only
    assert [t.task_id for t in plain.tasks] == ["task_0"]
    assert type(plain.timetable).__name__ == "AssetTriggeredTimetable"


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
    runtime.place_new_work()
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


# -- DAG files (shards) ---------------------------------------------------------------------------


def _store(runtime: Runtime, tmp_path: Path, names: list[str]) -> None:
    """Connectors stored straight, as many as a shard test needs, quickly; then placed at once."""
    config = {"connector.class": "FileSourceConnector", "file": str(tmp_path / "i"), "topic": "t"}
    validated = runtime.validated("any", config)
    for name in names:
        runtime.connectors.create(name, **validated)
    runtime.place_new_work()


def _sharded(runtime: Runtime, shards: int) -> Settings:
    return runtime.settings.model_copy(update={"airflow_dag_shards": shards})


NAMES = [f"c{i:03d}" for i in range(24)] + ["a b", "a#b", "x.y-z"]  # two names stored before the name rule


def test_every_dag_is_in_exactly_one_shard_and_the_shards_give_every_dag(runtime: Runtime, tmp_path: Path) -> None:
    _store(runtime, tmp_path, NAMES)
    every = _dags(runtime)
    settings = _sharded(runtime, 4)
    files = [build_dags(settings, runtime.engine, shard=i) for i in range(4)]
    assert sum(len(f) for f in files) == len(every) == 27  # 24, `a b` (not its twin `a#b`), x.y-z, rebalance
    assert set().union(*files) == set(every)
    for i, dags in enumerate(files):
        assert all(shard_of(dag_id, 4) == i for dag_id in dags if dag_id != "connect_rebalance")
        assert all(dag.dag_id == dag_id for dag_id, dag in dags.items())
    assert "connect_rebalance" in files[0]  # in the first file only
    assert all(len(f) > 2 for f in files)  # 25 connectors spread, not piled up
    assert files[shard_of("connect__a_b", 4)]["connect__a_b"].tasks[0].connector == "a b"  # first name keeps it


def test_a_dag_keeps_its_id_and_its_file(runtime: Runtime, tmp_path: Path) -> None:
    # The hash is part of the deployment: changing it would move every DAG to another file.
    assert [shard_of(d, 16) for d in ("connect__c00001", "connect__fileSourceConnector", "connect__a_b")] == [14, 12, 3]
    assert shard_of("connect__c00001", 1) == 0
    _store(runtime, tmp_path, ["c00001"])
    assert set(build_dags(_sharded(runtime, 16), runtime.engine, shard=14)) == {"connect__c00001"}
    assert shard_file(0) == "connect_dags.py" and shard_file(14) == "connect_dags_14.py"


def test_a_shard_reads_only_its_own_rows(runtime: Runtime, tmp_path: Path) -> None:
    """Postgres picks a shard's rows by the same hash as `shard_of`; names stored before the name
    rule are all read, and sorted in Python."""
    from sqlalchemy import select

    from connect_core.airflow.dag_factory import _in_shard
    from connect_core.runtime.store.models import ConnectorRow

    _store(runtime, tmp_path, NAMES)
    with runtime.engine.connect() as conn:
        for i in range(4):
            read = set(conn.execute(select(ConnectorRow.name).where(_in_shard(ConnectorRow.name, i, 4))).scalars())
            verbatim = {n for n in NAMES if n not in ("a b", "a#b")}
            assert read - {"a b", "a#b"} == {n for n in verbatim if shard_of(f"connect__{n}", 4) == i}
            assert {"a b", "a#b"} <= read


def test_a_file_beyond_the_count_defines_nothing(tmp_path: Path) -> None:
    nowhere = Settings(home=tmp_path / "nothing-here", airflow_dag_shards=4)
    assert build_dags(nowhere, shard=4) == {} and build_dags(nowhere, shard=31) == {}  # no database read
    with pytest.raises(ValueError, match="less than or equal to 32"):
        Settings(airflow_dag_shards=33)  # dags/ ships 32 files


def test_inside_a_task_any_file_builds_its_dag(
    runtime: Runtime, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A task parses the file its DAG version names, which after a change of the count can be another
    shard's; `airflow dags test` (a DAG id, no task id) parses every file: only the DAG's own builds it."""
    _store(runtime, tmp_path, ["c00001"])  # shard 14 of 16
    settings = _sharded(runtime, 16)
    monkeypatch.setenv("_AIRFLOW_PARSING_CONTEXT_DAG_ID", "connect__c00001")
    assert [i for i in range(16) if build_dags(settings, runtime.engine, shard=i)] == [14]
    monkeypatch.setenv("_AIRFLOW_PARSING_CONTEXT_TASK_ID", "task_0")
    assert set(build_dags(settings, runtime.engine, shard=3)) == {"connect__c00001"}


def test_dags_ships_a_file_per_shard() -> None:
    from connect_core.airflow.dag_factory import might_contain_dag

    dags = Path(__file__).resolve().parents[2] / "dags"
    assert sorted(p.name for p in dags.glob("connect_dags*.py")) == sorted(shard_file(i) for i in range(32))
    assert "build_dags(shard=0)" in (dags / shard_file(0)).read_text()
    for i in range(1, 32):
        assert f"SHARD = {i}\n" in (dags / shard_file(i)).read_text()
    # `[core] might_contain_dag_callable`: Airflow's heuristic, every file listed (one no longer
    # listed would count as deleted, and its DAGs be deactivated before their new file has them).
    assert all(might_contain_dag(str(dags / shard_file(i))) for i in range(32))
    assert not might_contain_dag(str(Path(__file__).parent / "__init__.py"))


def test_several_tasks_say_which_of_them_they_are(runtime: Runtime, tmp_path: Path) -> None:
    topics = [f"topic{i}" for i in range(5)]
    far = tmp_path / ("deep/" * 12) / "out.txt"
    far.parent.mkdir(parents=True)
    runtime.create_connector(
        "wide", {"connector.class": "FileSinkConnector", "topics": ",".join(topics), "file": str(far)}
    )
    (task,) = _dags(runtime)["connect__wide"].tasks
    assert task.task_display_name.startswith("write topic0, topic1 +3 → …")  # long names keep their tail
    assert task.task_display_name.endswith("deep/out.txt") and len(task.task_display_name) < 100
    moves = _moves("wide", "sink", [str(far)], None, [])
    assert moves.label(1, 3).endswith("(2/3)") and moves.label(0, 1) == moves.what


def test_a_connector_not_placed_yet_waits_for_its_placement(
    runtime: Runtime, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Created this moment, not placed yet (its placement commits a moment after the create): left out
    of the parse, so its tasks never take Airflow's `default_pool`; placed, or older, it is there.
    Inside a task it is always built (the task resolves its pool itself)."""
    from sqlalchemy import text

    config = {"connector.class": "FileSourceConnector", "file": str(tmp_path / "i"), "topic": "t"}
    runtime.connectors.create("new", **runtime.validated("new", config))
    assert "connect__new" not in _dags(runtime)
    with monkeypatch.context() as inside_a_task:
        inside_a_task.setenv("_AIRFLOW_PARSING_CONTEXT_DAG_ID", "connect__new")
        assert set(_dags(runtime)) == {"connect__new"}
    runtime.place_new_work("new")
    assert _dags(runtime)["connect__new"].tasks[0].pool == "connect_local"

    runtime.connectors.create("nowhere", **runtime.validated("nowhere", {**config, "topic": "t2"}))
    # never placed (no pool could take it): after the grace, Airflow's default pool
    with runtime.engine.begin() as conn:
        conn.execute(
            text("UPDATE connect.connectors SET created_at = now() - interval '1 minute' WHERE name = 'nowhere'")
        )
    assert _dags(runtime)["connect__nowhere"].tasks[0].pool == "default_pool"
