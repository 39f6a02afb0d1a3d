"""The docs site builds in strict mode (a broken link or anchor, a page missing from the nav, a
snippet that is gone fail it), and its generated pages hold what the code says."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(out)],
        cwd=ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, f"mkdocs build --strict failed:\n{proc.stderr[-6000:]}"
    return out


def test_the_rest_page_comes_from_the_openapi_document(site: Path) -> None:
    spec = json.loads((site / "reference" / "openapi.json").read_text())
    assert "/connectors/{connector}/status" in spec["paths"]
    page = (site / "reference" / "rest-api" / "index.html").read_text()
    assert "GET /connectors/{connector}/status" in page
    assert "PUT /connector-plugins/{plugin}/config/validate" in page


def test_the_cli_page_comes_from_the_typer_app(site: Path) -> None:
    page = (site / "reference" / "cli" / "index.html").read_text()
    assert "connect pools add" in page
    assert "--continue-on-error" in page  # an option of `connect apply`


def test_the_configuration_pages_come_from_the_code(site: Path) -> None:
    config = (site / "reference" / "configuration" / "index.html").read_text()
    assert "incrementing.column.name" in config
    assert "errors.deadletterqueue.topic.name" in config
    settings = (site / "reference" / "settings" / "index.html").read_text()
    assert "CONNECT_DATABASE_URL" in settings


def test_the_benchmark_pages_include_the_bench_files(site: Path) -> None:
    results = (site / "benchmarks" / "results" / "index.html").read_text()
    assert "DAG parse" in results
    kill = (site / "benchmarks" / "kill-matrix" / "index.html").read_text()
    first_heading = re.search(r"^#+ (.+)$", (ROOT / "bench" / "KILL_MATRIX.md").read_text(), re.MULTILINE)
    assert first_heading is not None and first_heading.group(1).split("`")[0].strip() in kill


def test_the_readme_links_to_docs_that_exist() -> None:
    """GitHub renders the README outside the site: its relative links are checked here."""
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", (ROOT / "README.md").read_text())
    relative = [link for link in links if "://" not in link]
    assert len(relative) > 10
    missing = [link for link in relative if not (ROOT / link).is_file()]
    assert not missing, f"README.md links to files that do not exist: {missing}"


def _hook(name: str):  # type: ignore[no-untyped-def]
    """A docs hook module (docs/_hooks is no package), loaded from its file."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"_docs_hook_{name}", ROOT / "docs" / "_hooks" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_build_fails_when_a_built_in_plugin_does_not_load(monkeypatch: pytest.MonkeyPatch) -> None:
    from mkdocs.exceptions import PluginError

    hook = _hook("configuration")
    for module in [m for m in sys.modules if m.startswith("connect_core.connectors.file")]:
        monkeypatch.delitem(sys.modules, module)
    monkeypatch.setitem(sys.modules, "connect_core.connectors.file", None)  # its import now fails
    with pytest.raises(PluginError, match="FileSourceConnector"):
        hook.on_files([], None)


def test_the_settings_page_does_not_depend_on_the_builder(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    hook = _hook("configuration")
    pages = []
    for where in ("a", "b"):
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / where / "cache"))
        monkeypatch.setenv("HOME", str(tmp_path / where))
        monkeypatch.chdir(tmp_path)
        pages.append(hook.settings_markdown())
    assert pages[0] == pages[1]
    assert str(tmp_path) not in pages[0]
    assert "`$XDG_CACHE_HOME/connect-core` (unset: `~/.cache/connect-core`)" in pages[0]


def test_the_reference_masks_a_secret_key_default() -> None:
    from pydantic import Field

    from connect_core.runtime.plugins import PluginRegistry
    from connect_core.runtime.reference import config_reference
    from connect_core.sdk import ConnectorConfig, SourceConnector, SourceTask

    class KeyedConfig(ConnectorConfig):
        api_key: str = Field(default="BuiltInS3cret", alias="api.key", description="The service's key.")

    class KeyedTask(SourceTask):
        def read(self, spark, positions):  # type: ignore[no-untyped-def]
            raise NotImplementedError

    class KeyedSource(SourceConnector[KeyedConfig]):
        config_model = KeyedConfig
        task_class = KeyedTask

        def task_configs(self, config, max_tasks):  # type: ignore[no-untyped-def]
            return [{}]

    page = config_reference(PluginRegistry(extra=[KeyedSource]))
    row = next(line for line in page.splitlines() if line.startswith("| `api.key` |"))
    assert "BuiltInS3cret" not in page and "`****`" in row and "| yes |" in row
