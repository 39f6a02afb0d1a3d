"""Plugins are found by entry point and in a plugin.path directory."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from connect_core.runtime.plugins import PluginRegistry

PLUGIN = textwrap.dedent(
    """
    from connect_core import SourceConnector, SourceTask, SourceBatch, ConnectorConfig

    class CountingTask(SourceTask):
        def read(self, spark, positions):
            return SourceBatch.empty()

    class CountingSource(SourceConnector):
        task_class = CountingTask
        version = "9.9"

        def task_configs(self, config, max_tasks):
            return [{"n": i} for i in range(max_tasks)]
    """
)


def test_builtins_come_from_entry_points() -> None:
    plugins = PluginRegistry().plugins()
    assert plugins["FileSourceConnector"].origin == "entry point"
    assert plugins["FileSinkConnector"].type == "sink"


def test_plugin_path_directory_is_scanned(tmp_path: Path) -> None:
    (tmp_path / "counting_plugin.py").write_text(PLUGIN)
    registry = PluginRegistry([tmp_path])
    plugin = registry.resolve("CountingSource")
    assert plugin.version == "9.9"
    assert plugin.origin == str(tmp_path)
    assert registry.resolve("counting_plugin.CountingSource").cls is plugin.cls


def test_connect_plugins_lists_plugin_path(tmp_path: Path) -> None:
    (tmp_path / "counting_plugin2.py").write_text(PLUGIN.replace("CountingSource", "CountingSource2"))
    env = {**os.environ, "CONNECT_PLUGIN_PATH": str(tmp_path), "CONNECT_HOME": str(tmp_path / "home")}
    out = subprocess.run(
        [sys.executable, "-m", "connect_core.cli", "plugins", "--output", "json"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert '"name": "CountingSource2"' in out
    assert '"name": "FileSourceConnector"' in out


def test_a_class_path_from_a_request_never_imports_a_module() -> None:
    """`connector.class` comes from REST: naming a module must not make the server import (run) it."""
    import pytest

    from connect_core.sdk.errors import ConfigError

    registry = PluginRegistry([])
    sys.modules.pop("this", None)
    with pytest.raises(ConfigError, match="not found"):
        registry.resolve("this.Anything")
    assert "this" not in sys.modules
    with pytest.raises(ConfigError, match="must be a string"):
        registry.resolve(["FileSourceConnector"])  # type: ignore[arg-type]
    assert registry.resolve("connect_core.connectors.file.source.FileSourceConnector").name == "FileSourceConnector"
