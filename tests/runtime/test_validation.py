"""Config validation reports every problem at once, by field, in Kafka's shape."""

from __future__ import annotations

from pathlib import Path

import pytest

from connect_core.runtime.plugins import PluginRegistry
from connect_core.runtime.security.paths import AllowedPaths
from connect_core.runtime.validation import config_infos, validate_connector
from connect_core.sdk.errors import ConfigError


@pytest.fixture
def registry() -> PluginRegistry:
    return PluginRegistry()


def test_missing_connector_class_is_named(registry: PluginRegistry) -> None:
    with pytest.raises(ConfigError) as info:
        validate_connector("c", {"filename": "x"}, registry)
    assert "connector.class" in info.value.errors
    assert "Missing required configuration `connector.class`" in str(info.value)


def test_unknown_class_lists_available_plugins(registry: PluginRegistry) -> None:
    with pytest.raises(ConfigError) as info:
        validate_connector("c", {"connector.class": "com.example.Nope"}, registry)
    (message,) = info.value.errors["connector.class"]
    assert "com.example.Nope" in message
    assert "FileSourceConnector" in message and "FileSinkConnector" in message


def test_every_problem_is_reported_at_once(registry: PluginRegistry, tmp_path: Path) -> None:
    config = {
        "connector.class": "FileSourceConnector",
        "tasks.max": "many",
        "batch.max.bytes": -5,
        # no filename, no topic
    }
    with pytest.raises(ConfigError) as info:
        validate_connector("c", config, registry)
    assert set(info.value.errors) == {"tasks.max", "batch.max.bytes", "filename", "connect.topicname"}
    assert "4 error(s)" in str(info.value)


def test_cross_field_check_of_the_connector_runs(registry: PluginRegistry, tmp_path: Path) -> None:
    config = {"connector.class": "FileSinkConnector", "filename": str(tmp_path / "no" / "dir" / "f"), "topics": "t"}
    with pytest.raises(ConfigError) as info:
        validate_connector("c", config, registry, allowed_paths=AllowedPaths([tmp_path]))
    assert "does not exist" in info.value.errors["filename"][0]


def test_rocketmq_and_kafka_spellings_resolve_to_builtins(registry: PluginRegistry, tmp_path: Path) -> None:
    rocketmq = validate_connector(
        "s",
        {
            "connector.class": "org.apache.rocketmq.connect.file.FileSinkConnector",
            "filename": str(tmp_path / "out.txt"),
            "connect.topicnames": "a, b",
        },
        registry,
        allowed_paths=AllowedPaths([tmp_path]),
    )
    kafka = validate_connector(
        "s",
        {
            "connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector",
            "file": str(tmp_path / "out.txt"),
            "topics": ["a", "b"],
        },
        registry,
        allowed_paths=AllowedPaths([tmp_path]),
    )
    assert rocketmq.plugin.name == kafka.plugin.name == "FileSinkConnector"
    assert rocketmq.task_configs == kafka.task_configs
    assert rocketmq.task_configs[0]["topics"] == ["a", "b"]


def test_config_infos_has_kafka_shape_and_masks_secrets(registry: PluginRegistry) -> None:
    infos = config_infos({"connector.class": "FileSourceConnector", "db.password": "hunter2"}, registry)
    assert infos["error_count"] == 2  # filename and topic missing
    by_name = {c["value"]["name"]: c for c in infos["configs"]}
    assert by_name["filename"]["value"]["errors"]
    assert by_name["tasks.max"]["definition"]["default_value"] == 1
    assert "hunter2" not in repr(infos)
