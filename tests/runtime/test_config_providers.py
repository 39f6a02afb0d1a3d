"""`${env:…}` and `${file:…}` resolve only where the task runs; the store keeps the placeholders."""

from __future__ import annotations

from pathlib import Path

import pytest

from connect_core.runtime.config_providers import resolve
from connect_core.runtime.context import Runtime
from connect_core.runtime.runner import TaskRunner
from connect_core.sdk.errors import ConfigError


def test_env_and_file_placeholders(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DB_PASSWORD", "pw-from-env")
    secrets = tmp_path / "db.properties"
    secrets.write_text("# comment\nuser = app\npassword=pw-from-file\n")
    resolved = resolve(
        {
            "a": "${env:DB_PASSWORD}",
            "b": f"${{file:{secrets}:password}}",
            "c": f"jdbc://${{file:{secrets}:user}}@h",
            "n": 3,
            "nested": {"x": "${env:DB_PASSWORD}"},
        }
    )
    assert resolved == {
        "a": "pw-from-env",
        "b": "pw-from-file",
        "c": "jdbc://app@h",
        "n": 3,
        "nested": {"x": "pw-from-env"},
    }
    with pytest.raises(ConfigError, match="NOPE"):
        resolve({"a": "${env:NOPE}"})
    with pytest.raises(ConfigError, match="missing"):
        resolve({"a": f"${{file:{secrets}:missing}}"})


def test_runner_resolves_store_does_not(
    runtime: Runtime, runner: TaskRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "in.txt").write_text("x\n")
    monkeypatch.setenv("SOURCE_DIR", str(tmp_path))
    runtime.create_connector(
        "src", {"connector.class": "FileSourceConnector", "file": "${env:SOURCE_DIR}/in.txt", "topic": "t"}
    )
    assert runtime.connectors.get("src").config["file"] == "${env:SOURCE_DIR}/in.txt"
    assert runner.run("src", 0).rows == 1
