"""`connection.jar` puts code on Spark's classpath, so over HTTP it may only name a regular .jar under the
worker's `jdbc_driver_paths`, outside `file.allowed.paths` (which a file sink writes), judged by what it
really names: anything else is a 400 naming `connection.jar` and the setting, for the source and sink."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from connect_core.runtime.context import Runtime
from tests.rest.conftest import Served

PG = "jdbc:postgresql://127.0.0.1:5432/db"
DEBIAN_JAR = "/usr/share/java/postgresql.jar"
PLUGINS = ["JdbcSourceConnector", "JdbcSinkConnector"]


def _config(plugin: str, jar: str) -> dict[str, Any]:
    base = {"connector.class": plugin, "connection.url": PG, "connection.jar": jar}
    if plugin == "JdbcSinkConnector":
        return {**base, "topics": "t"}
    return {**base, "table.whitelist": "t", "topic.prefix": ""}


def _refused(client: httpx.Client, plugin: str, jar: str, *words: str) -> None:
    created = client.post("/connectors", json={"name": "c", "config": _config(plugin, jar)})
    assert created.status_code == 400, (jar, created.text)
    for word in ("connection.jar", *words):
        assert word in created.text, (jar, word, created.text)


def allow_drivers(runtime: Runtime, monkeypatch: pytest.MonkeyPatch, path: Path) -> None:
    """The worker setting `jdbc_driver_paths`, as the served runtime was started with it."""
    monkeypatch.setenv("CONNECT_JDBC_DRIVER_PATHS", str(path))
    monkeypatch.setattr(runtime, "settings", runtime.settings.model_copy(update={"jdbc_driver_paths": str(path)}))


@pytest.fixture
def drivers(runtime: Runtime, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A driver directory the operator allows (beside the test's `file.allowed.paths`, not in it)."""
    path = tmp_path_factory.mktemp("drivers")
    (path / "driver-1.0.jar").write_bytes(b"PK\x05\x06" + bytes(18))  # an empty zip: never loaded here
    allow_drivers(runtime, monkeypatch, path)
    return path


@pytest.mark.parametrize("plugin", PLUGINS)
def test_a_jar_a_connector_could_write_or_one_outside_the_driver_paths_is_a_400(
    api: Served, tmp_path: Path, plugin: str
) -> None:
    planted = tmp_path / "evil.jar"  # where a file sink writes (the tests' `file.allowed.paths`)
    planted.write_bytes(b"PK\x05\x06" + bytes(18))
    with httpx.Client(base_url=api.url, timeout=30) as client:
        _refused(client, plugin, str(planted), "file.allowed.paths", "jdbc_driver_paths")
        _refused(client, plugin, "/usr/share/java/../../tmp/x.jar", "jdbc_driver_paths")
        _refused(client, plugin, f"/usr/share/java/../../..{planted}", "file.allowed.paths")
        for smuggled in (
            "a.jar,/tmp/evil.jar",
            f"{DEBIAN_JAR},{planted}",
            f"{DEBIAN_JAR}:{planted}",
            f"{DEBIAN_JAR} {planted}",
            f"{DEBIAN_JAR}\n{planted}",
            f"file:{DEBIAN_JAR}",
            f"{DEBIAN_JAR}#x.jar",
            "${env:EVIL_JAR}",
            "/usr/share/java/../../" + "a/" * 600 + "x.jar",
        ):
            _refused(client, plugin, smuggled, "one plain path")
        _refused(client, plugin, "/usr/share/java/no-such-driver.jar", "not a regular file")
        _refused(client, plugin, "/usr/share/java", "not name a .jar")
        checked = client.put(f"/connector-plugins/{plugin}/config/validate", json=_config(plugin, str(planted)))
        assert checked.status_code == 200 and checked.json()["error_count"] == 1, checked.text
        assert client.get("/connectors").json() == []


@pytest.mark.parametrize("plugin", PLUGINS)
def test_the_debian_driver_is_accepted_and_reaches_spark(api: Served, runtime: Runtime, plugin: str) -> None:
    with httpx.Client(base_url=api.url, timeout=30) as client:
        created = client.post("/connectors", json={"name": "c", "config": _config(plugin, DEBIAN_JAR)})
        assert created.status_code == 201, created.text
    if plugin == "JdbcSourceConnector":
        assert runtime.spark_conf_for("c") == {"spark.jars": DEBIAN_JAR}


def test_symlinks_are_judged_by_their_target(
    api: Served, runtime: Runtime, drivers: Path, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    planted = tmp_path / "evil.jar"
    planted.write_bytes(b"PK\x05\x06" + bytes(18))
    elsewhere = tmp_path_factory.mktemp("elsewhere") / "other.jar"
    elsewhere.write_bytes(b"PK\x05\x06" + bytes(18))
    (drivers / "to-planted.jar").symlink_to(planted)
    (drivers / "to-elsewhere.jar").symlink_to(elsewhere)
    (drivers / "to-passwd.jar").symlink_to("/etc/passwd")
    (drivers / "driver.jar").symlink_to(drivers / "driver-1.0.jar")  # as Debian links its jars
    with httpx.Client(base_url=api.url, timeout=30) as client:
        _refused(client, "JdbcSourceConnector", str(drivers / "to-planted.jar"), "file.allowed.paths")
        _refused(client, "JdbcSourceConnector", str(drivers / "to-elsewhere.jar"), "jdbc_driver_paths")
        _refused(client, "JdbcSourceConnector", str(drivers / "to-passwd.jar"), "jdbc_driver_paths")
        _refused(client, "JdbcSourceConnector", DEBIAN_JAR, "jdbc_driver_paths")  # no longer allowed
        created = client.post("/connectors", json={"name": "c", "config": _config("JdbcSourceConnector", "~/x.jar")})
        assert created.status_code == 400 and "connection.jar" in created.text, created.text
        linked = _config("JdbcSourceConnector", str(drivers / "driver.jar"))
        created = client.post("/connectors", json={"name": "c", "config": linked})
        assert created.status_code == 201, created.text
    # Spark is handed what was checked: the link's target, not the link
    assert runtime.spark_conf_for("c") == {"spark.jars": str((drivers / "driver-1.0.jar").resolve())}


def test_a_driver_path_that_file_connectors_may_write_allows_no_jar(
    api: Served, runtime: Runtime, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An operator listing a `file.allowed.paths` directory in `jdbc_driver_paths` too reopens nothing."""
    allow_drivers(runtime, monkeypatch, tmp_path)
    (tmp_path / "driver.jar").write_bytes(b"PK\x05\x06" + bytes(18))
    with httpx.Client(base_url=api.url, timeout=30) as client:
        _refused(client, "JdbcSourceConnector", str(tmp_path / "driver.jar"), "file.allowed.paths")
