"""Where a run starts, the stored `connection.jar` is judged again before spark-submit is built: a config
stored before the rule, or a driver link swapped since create to a jar a file connector wrote, fails
the run with a ConfigError naming `connection.jar`, and no Spark starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from connect_core.runtime.context import Runtime
from connect_core.runtime.execution import local_run
from connect_core.sdk.errors import ConfigError

PG = "jdbc:postgresql://127.0.0.1:5432/db"


def _source(jar: str) -> dict[str, str]:
    return {
        "connector.class": "JdbcSourceConnector",
        "connection.url": PG,
        "connection.jar": jar,
        "table.whitelist": "t",
        "topic.prefix": "",
    }


@pytest.fixture
def no_spark(monkeypatch: pytest.MonkeyPatch) -> None:
    """A run that got as far as spark-submit would be the hole: fail the test there instead."""

    def submitted(*args: object, **kwargs: object) -> None:
        raise AssertionError("spark-submit was reached with a refused connection.jar")

    monkeypatch.setattr(local_run, "submit_tasks", submitted)


def _run(runtime: Runtime, name: str) -> None:
    local_run.run_planned(runtime, local_run.plan_runs(runtime, [name], master="local[1]"))


@pytest.mark.usefixtures("no_spark")
def test_a_stored_jar_the_rule_refuses_fails_the_run_before_spark(runtime: Runtime, tmp_path: Path) -> None:
    planted = tmp_path / "evil.jar"  # inside `file.allowed.paths`: a file sink could have written it
    planted.write_bytes(b"PK\x05\x06" + bytes(18))
    for jar in (str(planted), f"/usr/share/java/postgresql.jar,{planted}", "${env:EVIL_JAR}"):
        config = _source(jar)  # stored as an older version would have, past today's validation
        runtime.connectors.create(
            "old", connector_class="JdbcSourceConnector", type="source", config=config, task_configs=[config]
        )
        with pytest.raises(ConfigError, match=r"connection\.jar") as refused:
            _run(runtime, "old")
        assert "connection.jar" in refused.value.errors
        runtime.connectors.delete("old")


@pytest.mark.usefixtures("no_spark")
def test_a_driver_link_swapped_after_create_fails_the_run(
    runtime: Runtime, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    drivers = tmp_path_factory.mktemp("drivers")
    monkeypatch.setenv("CONNECT_JDBC_DRIVER_PATHS", str(drivers))  # the worker's setting, as it started
    monkeypatch.setattr(runtime, "settings", runtime.settings.model_copy(update={"jdbc_driver_paths": str(drivers)}))
    (drivers / "driver-1.0.jar").write_bytes(b"PK\x05\x06" + bytes(18))
    link = drivers / "driver.jar"
    link.symlink_to(drivers / "driver-1.0.jar")
    runtime.create_connector("src", _source(str(link)))
    assert runtime.spark_conf_for("src") == {"spark.jars": str((drivers / "driver-1.0.jar").resolve())}

    planted = tmp_path / "evil.jar"
    planted.write_bytes(b"PK\x05\x06" + bytes(18))
    link.unlink()
    link.symlink_to(planted)
    with pytest.raises(ConfigError, match=r"file\.allowed\.paths"):
        _run(runtime, "src")
