"""`connect apply DIR`: create, update or leave unchanged, on the metadata store and over REST."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from connect_core.cli import app
from connect_core.runtime.context import Runtime
from tests.rest.conftest import Served


@pytest.fixture
def local_env(database_url: str, tmp_path: Path, runtime: Runtime) -> dict[str, str | None]:
    """The CLI on the test's database (as `runtime`), without any REST URL."""
    return {"CONNECT_DATABASE_URL": database_url, "CONNECT_HOME": str(tmp_path / "home"), "CONNECT_REST_URL": None}


def _connect(*args: str, env: dict[str, str | None] | None = None) -> Result:
    return CliRunner().invoke(app, list(args), env=env or {"CONNECT_REST_URL": None})


def _results(result: Result) -> dict[str, dict[str, Any]]:
    """`-o json` output, by file."""
    return {r["file"]: r for r in json.loads(result.stdout)["results"]}


def _words(text: str) -> str:
    """`text` with rich's line wrapping undone."""
    return " ".join(text.split())


def _source(tmp_path: Path, name: str, **extra: object) -> dict[str, Any]:
    return {"connector.class": "FileSourceConnector", "file": str(tmp_path / f"{name}.txt"), "topic": name, **extra}


def _write(directory: Path, filename: str, body: Any) -> None:
    directory.mkdir(exist_ok=True)
    (directory / filename).write_text(json.dumps(body))


def test_apply_creates_updates_and_a_second_run_changes_nothing(
    local_env: dict[str, str | None], runtime: Runtime, tmp_path: Path
) -> None:
    configs = tmp_path / "configs"
    _write(configs, "a.json", {"name": "a", "config": _source(tmp_path, "a", **{"db.password": "hunter2"})})
    _write(configs, "b.json", {"name": "b", **_source(tmp_path, "b")})  # flat, the name inside

    planned = _connect("apply", str(configs), "--dry-run", "-o", "json", env=local_env)
    assert planned.exit_code == 0, planned.output
    assert {f: r["result"] for f, r in _results(planned).items()} == {"a.json": "create", "b.json": "create"}
    assert runtime.connectors.names() == []

    created = _connect("apply", str(configs), "-o", "json", env=local_env)
    assert created.exit_code == 0, created.output
    assert {f: r["result"] for f, r in _results(created).items()} == {"a.json": "created", "b.json": "created"}
    assert runtime.connectors.get("a").config["db.password"] == "hunter2"
    versions = {n: runtime.connectors.get(n).config_version for n in ("a", "b")}

    again = _connect("apply", str(configs), env=local_env)  # the table
    assert again.exit_code == 0, again.output
    assert "2 unchanged" in again.stdout and "hunter2" not in again.output
    assert {n: runtime.connectors.get(n).config_version for n in ("a", "b")} == versions

    _write(configs, "a.json", {"name": "a", "config": _source(tmp_path, "a", topic="t2", **{"db.password": "pw2"})})
    updated = _connect("apply", str(configs), "-o", "json", env=local_env)
    assert updated.exit_code == 0, updated.output
    by_file = _results(updated)
    assert by_file["a.json"]["result"] == "updated" and by_file["a.json"]["changed"] == ["db.password", "topic"]
    assert by_file["b.json"]["result"] == "unchanged"
    assert runtime.connectors.get("a").config["topic"] == "t2"
    assert "hunter2" not in updated.output and "pw2" not in updated.output


def test_every_bad_file_is_reported_and_nothing_is_written(
    local_env: dict[str, str | None], runtime: Runtime, tmp_path: Path
) -> None:
    configs = tmp_path / "configs"
    _write(configs, "good.json", {"name": "good", "config": _source(tmp_path, "good")})
    (configs / "broken.json").write_text('{"name": "x", "config": {')
    _write(tmp_path, "outside.json", {"name": "outside", "config": _source(tmp_path, "outside")})
    (configs / "escape.json").symlink_to(tmp_path / "outside.json")
    (configs / "dangling.json").symlink_to(tmp_path / "gone.json")
    (configs / "huge.json").write_text(json.dumps({"name": "huge", "pad": "x" * (1024 * 1024)}))
    _write(configs, "badname.json", {"name": "bad name!", **_source(tmp_path, "b")})
    _write(configs, "dup1.json", {"name": "dup", **_source(tmp_path, "dup")})
    _write(configs, "dup2.json", {"name": "dup", **_source(tmp_path, "dup")})
    _write(configs, "list.json", [1, 2])
    _write(configs, "noname.json", _source(tmp_path, "n"))
    _write(configs, "wrongclass.json", {"name": "w", "config": {"connector.class": "Nope", "db.password": "hunter2"}})
    _write(configs, "extra.json", {"name": "e", "config": _source(tmp_path, "e"), "colour": "red"})
    (configs / "deep.json").write_text("[" * 100_000)
    (configs / "latin1.json").write_bytes(b'{"name": "\xe9"}')
    os.mkfifo(configs / "fifo.json")  # reading it would block forever
    (configs / "dir.json").mkdir()
    (configs / ".#lock.json").symlink_to("user@host.1234")  # an editor's lock file: skipped

    refused = _connect("apply", str(configs), "-o", "json", env=local_env)
    assert refused.exit_code == 2, refused.output
    results = _results(refused)
    expected = {
        "good.json": ("skipped", "other files are invalid"),
        "broken.json": ("invalid", "not valid JSON: Expecting property name enclosed in double quotes at line 1"),
        "escape.json": ("invalid", "symbolic link to a file outside the directory"),
        "dangling.json": ("invalid", "cannot be read"),
        "huge.json": ("invalid", "more than the 1,048,576 bytes"),
        "badname.json": ("invalid", "invalid connector name 'bad name!'"),
        "dup1.json": ("invalid", "connector `dup` is defined in 2 files: dup1.json, dup2.json"),
        "dup2.json": ("invalid", "connector `dup` is defined in 2 files"),
        "list.json": ("invalid", "must hold a JSON object"),
        "noname.json": ("invalid", "has no connector `name`"),
        "wrongclass.json": ("invalid", "connector class `Nope` not found"),
        "extra.json": ("invalid", "`colour`"),
        "deep.json": ("invalid", "RecursionError"),
        "latin1.json": ("invalid", "not UTF-8"),
        "fifo.json": ("invalid", "not a regular file"),
        "dir.json": ("invalid", "not a regular file"),
    }
    assert set(results) == set(expected)
    for filename, (result, says) in expected.items():
        assert results[filename]["result"] == result and says in results[filename]["detail"], results[filename]
    assert "hunter2" not in refused.output
    assert runtime.connectors.names() == []

    table = _connect("apply", str(configs), env=local_env)
    assert table.exit_code == 2 and "nothing was applied" in _words(table.stderr)

    anyway = _connect("apply", str(configs), "--continue-on-error", "-o", "json", env=local_env)
    assert anyway.exit_code == 2, anyway.output
    assert _results(anyway)["good.json"]["result"] == "created"
    assert runtime.connectors.names() == ["good"]


def test_apply_over_rest(api: Served, runtime: Runtime, tmp_path: Path) -> None:
    configs = tmp_path / "configs"
    _write(configs, "a.json", {"name": "a", "initial_state": "PAUSED", "config": _source(tmp_path, "a")})
    _write(configs, "b.json", {"name": "b", **_source(tmp_path, "b")})

    created = _connect("--url", api.url, "apply", str(configs), "-o", "json")
    assert created.exit_code == 0, created.output
    assert {f: r["result"] for f, r in _results(created).items()} == {"a.json": "created", "b.json": "created"}
    assert runtime.connectors.get("a").target_state == "PAUSED"

    _write(configs, "b.json", {"name": "b", **_source(tmp_path, "b", topic="t2")})
    planned = _connect("--url", api.url, "apply", str(configs), "--dry-run", "-o", "json")
    assert planned.exit_code == 0, planned.output
    assert {f: r["result"] for f, r in _results(planned).items()} == {"a.json": "unchanged", "b.json": "update"}
    assert runtime.connectors.get("b").config["topic"] == "b"

    updated = _connect("--url", api.url, "apply", str(configs), "-o", "json")
    assert {f: r["result"] for f, r in _results(updated).items()} == {"a.json": "unchanged", "b.json": "updated"}
    assert runtime.connectors.get("b").config["topic"] == "t2"

    _write(configs, "slash.json", {"name": "x/y", **_source(tmp_path, "x")})
    _write(configs, "badname.json", {"name": "bad name", **_source(tmp_path, "x")})
    refused = _connect("--url", api.url, "apply", str(configs), "-o", "json")
    assert refused.exit_code == 2, refused.output
    results = _results(refused)
    assert "cannot be sent in a URL path" in results["slash.json"]["detail"]
    assert "invalid connector name" in results["badname.json"]["detail"]  # the server's own rule
    assert sorted(runtime.connectors.names()) == ["a", "b"]


def test_apply_needs_a_directory_with_json_files(local_env: dict[str, str | None], tmp_path: Path) -> None:
    missing = _connect("apply", str(tmp_path / "nope"), env=local_env)
    assert missing.exit_code == 2 and "cannot be read: No such file or directory" in _words(missing.stderr)
    (tmp_path / "empty").mkdir()
    empty = _connect("apply", str(tmp_path / "empty"), env=local_env)
    assert empty.exit_code == 2 and "no *.json files" in _words(empty.stderr)
