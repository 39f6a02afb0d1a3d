"""`file.allowed.paths`: every plugin's `LocalPath` fields are confined, symlinks and `..` resolved."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import AliasChoices, Field

from connect_core.runtime.plugins import PluginRegistry
from connect_core.runtime.security.paths import AllowedPaths
from connect_core.runtime.validation import config_infos, validate_connector
from connect_core.sdk import ConfigError, ConnectorConfig, LocalPath, SourceBatch, SourceConnector, SourceTask
from connect_core.sdk._paths import local_path_fields


class DirsConfig(ConnectorConfig):
    """A third-party plugin's config: the confinement is the runtime's, not the file connectors'."""

    data_dir: LocalPath = Field(validation_alias=AliasChoices("data.dir", "dir"))
    archive: LocalPath | None = Field(default=None, alias="archive.path")
    extra: list[LocalPath] = Field(default_factory=list, alias="extra.paths")
    label: str = "x"


class DirsTask(SourceTask):
    def read(self, spark: Any, positions: Any) -> SourceBatch:
        return SourceBatch.empty()


class DirsSource(SourceConnector[DirsConfig]):
    config_model = DirsConfig
    task_class = DirsTask
    validated: list[str] = []

    def validate(self, config: DirsConfig) -> dict[str, list[str]]:
        DirsSource.validated.append(config.data_dir)  # a plugin that looks at the disk here
        return {}

    def task_configs(self, config: DirsConfig, max_tasks: int) -> list[dict[str, Any]]:
        return [{"data.dir": config.data_dir}]


PLUGIN = f"{__name__}.DirsSource"


@pytest.fixture
def allowed(tmp_path: Path) -> AllowedPaths:
    (tmp_path / "allowed").mkdir()
    return AllowedPaths([tmp_path / "allowed"])


def test_local_path_fields_are_found_by_type_with_every_spelling() -> None:
    assert local_path_fields(DirsConfig) == [
        ("data.dir", "dir", "data_dir"),
        ("archive.path", "archive"),
        ("extra.paths", "extra"),
    ]


def test_inside_is_allowed_and_resolved(allowed: AllowedPaths, tmp_path: Path) -> None:
    inside = tmp_path / "allowed" / "sub" / ".." / "f.txt"
    assert allowed.resolve(str(inside)) == (str(tmp_path / "allowed" / "f.txt"), None)
    (tmp_path / "allowed" / "link").symlink_to(tmp_path / "allowed" / "f.txt")
    assert allowed.resolve(str(tmp_path / "allowed" / "link"))[0] == str(tmp_path / "allowed" / "f.txt")


@pytest.mark.parametrize(
    "given",
    [
        "/etc/shadow",
        "{allowed}/../../../../etc/shadow",  # `..` out of it
        "{allowed}/link-out",  # a symlink inside, pointing outside
        "{allowed}/dangling-out",  # a dangling one: a sink would create the file outside
        "{allowed}/dir-link/passwd",  # a symlinked directory on the way
        "{allowed}_sibling/f",  # a prefix of the name is not a parent
    ],
)
def test_outside_is_refused_naming_the_setting(allowed: AllowedPaths, tmp_path: Path, given: str) -> None:
    base = tmp_path / "allowed"
    (base / "link-out").symlink_to("/etc/passwd")
    (base / "dangling-out").symlink_to(tmp_path / "not-yet" / "f")
    (base / "dir-link").symlink_to("/etc")
    real, problem = allowed.resolve(given.format(allowed=base))
    assert real is None
    assert problem is not None and "`file.allowed.paths`" in problem and "CONNECT_FILE_ALLOWED_PATHS" in problem
    assert "/etc/passwd" not in problem  # where a link points is not told


def test_odd_values_get_a_clear_message(allowed: AllowedPaths, tmp_path: Path) -> None:
    assert "NUL byte" in str(allowed.resolve(f"{tmp_path}/allowed/a\x00b")[1])
    assert "empty" in str(allowed.resolve("  ")[1])
    assert "file.allowed.paths" in str(allowed.resolve("~no-such-user-here/f")[1])
    long_problem = str(allowed.resolve("/" + "x" * 100_000)[1])
    assert len(long_problem) < 1000  # a huge value is not echoed whole


def test_relative_names_resolve_against_the_working_directory(
    allowed: AllowedPaths, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path / "allowed")
    assert allowed.resolve("in.txt")[0] == str(tmp_path / "allowed" / "in.txt")
    monkeypatch.chdir(tmp_path)
    assert allowed.resolve("in.txt")[0] is None


def test_default_is_the_working_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CONNECT_FILE_ALLOWED_PATHS", raising=False)
    monkeypatch.chdir(tmp_path)
    assert AllowedPaths.from_env().dirs == (tmp_path.resolve(),)
    monkeypatch.setenv("CONNECT_FILE_ALLOWED_PATHS", f"{tmp_path}/a, {tmp_path}/b")
    assert AllowedPaths.from_env().dirs == (tmp_path / "a", tmp_path / "b")


def test_every_plugins_local_paths_are_confined_at_validation(allowed: AllowedPaths, tmp_path: Path) -> None:
    registry = PluginRegistry(extra=[DirsSource])
    DirsSource.validated.clear()
    config = {
        "connector.class": PLUGIN,
        "dir": "/etc",
        "archive.path": f"{tmp_path}/allowed/../x",
        "extra.paths": [f"{tmp_path}/allowed/ok", "/root"],
        "label": "/etc/passwd",  # not a LocalPath: not the runtime's business
    }
    with pytest.raises(ConfigError) as caught:
        validate_connector("dirs", config, registry, allowed_paths=allowed)
    assert set(caught.value.errors) == {"data.dir", "archive.path", "extra.paths"}
    assert all("file.allowed.paths" in p for problems in caught.value.errors.values() for p in problems)
    assert DirsSource.validated == []  # the plugin never looked at a path it may not use

    infos = config_infos(config, registry, allowed_paths=allowed)
    by_key = {c["value"]["name"]: c["value"]["errors"] for c in infos["configs"]}
    assert "file.allowed.paths" in by_key["data.dir"][0] and by_key["label"] == []

    ok = validate_connector(
        "dirs", {"connector.class": PLUGIN, "dir": f"{tmp_path}/allowed"}, registry, allowed_paths=allowed
    )
    assert ok.task_configs == [{"data.dir": f"{tmp_path}/allowed"}]


def test_placeholders_wait_for_the_run_and_are_checked_there(allowed: AllowedPaths, tmp_path: Path) -> None:
    config = {"connector.class": PLUGIN, "dir": "${env:SOME_DIR}"}
    assert allowed.problems(DirsConfig, config) == {}
    confined = allowed.confine(DirsConfig, {"data.dir": f"{tmp_path}/allowed/./d"})
    assert confined == {"data.dir": f"{tmp_path}/allowed/d"}
    with pytest.raises(ConfigError, match=r"file\.allowed\.paths") as caught:
        allowed.confine(DirsConfig, {"data.dir": "/etc"})
    assert list(caught.value.errors) == ["data.dir"]


def test_the_runtimes_own_data_is_never_allowed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from connect_core.runtime.settings import Settings

    monkeypatch.chdir(tmp_path)
    settings = Settings(home=tmp_path / ".connect")  # the defaults: home under the allowed working directory
    allowed = AllowedPaths.from_settings(settings)
    for inside in (
        ".connect/pgdata/PG_VERSION",
        ".connect/secrets/db.properties",
        ".connect/topics/t/x.parquet",
        ".connect/pools/local.sock",
        ".connect/airflow/admin-password",
    ):
        real, problem = allowed.resolve(inside)
        assert real is None and "runtime's own data" in str(problem), inside
    assert allowed.resolve("in.txt")[0] == str(tmp_path / "in.txt")
    # a user's files beside the runtime's data are theirs (the quickstart works in `.connect/quickstart`)
    assert allowed.resolve(".connect/quickstart/in.txt")[0] == str(tmp_path / ".connect/quickstart/in.txt")
    (tmp_path / ".connect/quickstart").mkdir(parents=True)
    (tmp_path / ".connect/quickstart/link").symlink_to(tmp_path / ".connect/pgdata")
    assert allowed.resolve(".connect/quickstart/link/PG_VERSION")[0] is None
    elsewhere = AllowedPaths.from_settings(Settings(home=tmp_path / "h", topics_path=str(tmp_path / "topics")))
    assert elsewhere.resolve(str(tmp_path / "topics" / "t"))[0] is None


def test_a_create_checks_paths_where_the_tasks_run(runtime: Any, tmp_path: Path) -> None:
    """The platform, started from `here/`, records what its workers allow: a create from a shell whose
    own directory also allows `elsewhere/` is refused there, naming the pool and its directories."""
    from connect_core.runtime.cluster.pools import WORKER_PATHS_LABEL

    here, elsewhere = tmp_path / "here", tmp_path / "elsewhere"
    here.mkdir()
    elsewhere.mkdir()
    runtime.pools.set_label("local", WORKER_PATHS_LABEL, str(here.resolve()))
    config = {"connector.class": "FileSourceConnector", "topic": "t"}
    with pytest.raises(ConfigError) as refused:
        runtime.create_connector("far", {**config, "file": str(elsewhere / "in.txt")})
    (problem,) = refused.value.errors["filename"]  # `file` is its Kafka spelling
    assert "where its tasks run" in problem and f"pool `local` allows {here.resolve()}" in problem
    assert runtime.connectors.names() == []  # nothing stored
    runtime.create_connector("near", {**config, "file": str(here / "in.txt")})
    runtime.pools.set_label("local", WORKER_PATHS_LABEL, None)  # the platform stopped …
    runtime._worker_paths = None  # … and the runtime's reading of it is older than its 10 s
    runtime.create_connector("far", {**config, "file": str(elsewhere / "in.txt")})
    assert runtime.connectors.names() == ["far", "near"]


def test_a_silent_pool_s_label_does_not_refuse_creates(runtime: Any, tmp_path: Path) -> None:
    """A pool that stopped heartbeating gets no work, so what its worker once allowed (a label left
    behind, even one allowing nothing) does not refuse a create; once it is back, it counts again."""
    from sqlalchemy import text

    from connect_core.runtime.cluster.pools import WORKER_PATHS_LABEL

    runtime.pools.add("ghost", "spark://127.0.0.1:7077", capacity=1)
    runtime.pools.set_label("ghost", WORKER_PATHS_LABEL, "")
    with runtime.engine.begin() as conn:
        conn.execute(
            text("UPDATE connect.spark_pools SET heartbeat_at = now() - interval '30 days' WHERE name = 'ghost'")
        )
    config = {"connector.class": "FileSourceConnector", "topic": "t", "file": str(tmp_path / "in.txt")}
    runtime._worker_paths = None
    runtime.create_connector("ok", config)
    runtime.pools.heartbeat("ghost")
    runtime._worker_paths = None
    with pytest.raises(ConfigError) as refused:
        runtime.create_connector("refused", config)
    assert "pool `ghost` allows none" in refused.value.errors["filename"][0]


def test_editing_a_pool_keeps_what_its_worker_recorded(runtime: Any, tmp_path: Path) -> None:
    """A PUT of the pool (capacity, labels) replaces its labels, but not the directories its running
    worker recorded: else creates would stop being checked against them."""
    from connect_core.runtime.cluster.pools import WORKER_PATHS_LABEL

    runtime.pools.add("east", "spark://127.0.0.1:7077", capacity=1, labels={"zone": "a"})
    runtime.pools.set_label("east", WORKER_PATHS_LABEL, "/srv/data")
    runtime.pools.add("east", "spark://127.0.0.1:7077", capacity=4, labels={"zone": "b"})
    assert runtime.pools.get("east", 60).labels == {"zone": "b", WORKER_PATHS_LABEL: "/srv/data"}
    runtime.pools.add("east", "spark://127.0.0.1:7077", capacity=4, labels={WORKER_PATHS_LABEL: "/srv/other"})
    assert runtime.pools.get("east", 60).labels == {WORKER_PATHS_LABEL: "/srv/other"}  # named: as given
    runtime.pools.add("west", "spark://127.0.0.1:7078", capacity=1, labels={"zone": "c"})
    assert runtime.pools.get("west", 60).labels == {"zone": "c"}
