"""File connectors as an attacker and an unlucky operator meet them: confined to `file.allowed.paths`
(over real HTTP and where the task runs), a sink that never cuts back a file it did not write, and
files that are not regular files (a FIFO, a device, a directory) or lines that never end."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from connect_core.rest.app import create_app
from connect_core.rest.auth import bearer_or_loopback
from connect_core.runtime.context import Runtime
from connect_core.runtime.execution.runner import TaskRunner
from connect_core.runtime.security import ConfigProviders
from connect_core.runtime.security.paths import AllowedPaths
from connect_core.runtime.validation import validate_connector
from connect_core.sdk import ConfigError
from tests.conftest import file_pair, make_runner
from tests.rest.conftest import Served, serve

SOURCE = "FileSourceConnector"
SINK = "FileSinkConnector"


@pytest.fixture
def api(runtime: Runtime) -> Iterator[Served]:
    """The REST app over the test's runtime, served by uvicorn on loopback (as tests/rest does)."""
    yield from serve(create_app(lambda: runtime, auth=[bearer_or_loopback(None)]))


def _post(api: Served, name: str, config: dict[str, Any]) -> httpx.Response:
    return httpx.post(f"{api.url}/connectors", json={"name": name, "config": config}, timeout=30)


# -- file.allowed.paths ---------------------------------------------------------


def test_rest_refuses_paths_outside_allowed_dirs(api: Served, runtime: Runtime, tmp_path: Path) -> None:
    (tmp_path / "link-to-shadow").symlink_to("/etc/shadow")
    (tmp_path / "etc-dir").symlink_to("/etc")
    outside = {
        "shadow": "/etc/shadow",
        "dotdot": f"{tmp_path}/../../../etc/shadow",
        "symlink": str(tmp_path / "link-to-shadow"),
        "dirlink": str(tmp_path / "etc-dir" / "shadow"),
    }
    for name, filename in outside.items():
        response = _post(api, name, {"connector.class": SOURCE, "filename": filename, "topic": "t"})
        assert response.status_code == 400, (name, response.text)
        assert "`file.allowed.paths`" in response.json()["message"], name
    sink = _post(api, "sink", {"connector.class": SINK, "file": "/tmp/../etc/cron.d/x", "topics": "t"})
    assert sink.status_code == 400 and "file.allowed.paths" in sink.json()["message"]
    assert httpx.get(f"{api.url}/connectors").json() == []

    # Kafka's validate endpoint: one error, on `filename`, naming the setting.
    infos = httpx.put(
        f"{api.url}/connector-plugins/{SOURCE}/config/validate",
        json={"connector.class": SOURCE, "filename": "/etc/shadow", "topic": "t"},
    ).json()
    errors = {c["value"]["name"]: c["value"]["errors"] for c in infos["configs"] if c["value"]["errors"]}
    assert list(errors) == ["filename"] and "file.allowed.paths" in errors["filename"][0]

    inside = _post(api, "ok", {"connector.class": SOURCE, "filename": str(tmp_path / "in.txt"), "topic": "t"})
    assert inside.status_code == 201, inside.text


def test_symlink_swapped_after_create_is_refused_at_run(
    runtime: Runtime, runner: TaskRunner, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    secret = tmp_path_factory.mktemp("outside") / "secret.txt"
    secret.write_text("not yours\n")
    (tmp_path / "real.txt").write_text("mine\n")
    link = tmp_path / "in.txt"
    link.symlink_to(tmp_path / "real.txt")
    runtime.create_connector("src", {"connector.class": SOURCE, "filename": str(link), "topic": "t"})
    link.unlink()
    link.symlink_to(secret)
    # The stored task config names the link's target at create; swap that too.
    (tmp_path / "real.txt").unlink()
    (tmp_path / "real.txt").symlink_to(secret)

    result = runner.run("src", 0)

    assert (result.state, result.error_kind, result.rows) == ("FAILED", "config", 0)
    assert "file.allowed.paths" in result.message


def test_placeholder_filled_at_run_cannot_escape(
    runtime: Runtime, spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runtime.providers = ConfigProviders({"env"})
    monkeypatch.setenv("IN_DIR", "/etc")
    runtime.create_connector("src", {"connector.class": SOURCE, "filename": "${env:IN_DIR}/passwd", "topic": "t"})

    result = make_runner(runtime, spark).run("src", 0)

    assert (result.state, result.error_kind, result.rows) == ("FAILED", "config", 0)
    assert "file.allowed.paths" in result.message


# -- the sink never cuts back what it did not write ------------------------------------


def test_sink_moved_to_an_existing_file_appends_and_leaves_both_intact(
    api: Served, runtime: Runtime, runner: TaskRunner, tmp_path: Path
) -> None:
    source, a = file_pair(runtime, tmp_path)
    source.write_text("one\ntwo\n")
    runner.run("fileSourceConnector", 0)
    runner.run("fileSinkConnector", 0)
    assert a.read_text() == "one\ntwo\n"

    b = tmp_path / "unrelated.txt"
    b.write_text("somebody else's first line\n")  # longer than what the sink committed for A (was cut to it)
    config = httpx.get(f"{api.url}/connectors/fileSinkConnector/config").json()
    put = httpx.put(f"{api.url}/connectors/fileSinkConnector/config", json={**config, "filename": str(b)})
    assert put.status_code == 200, put.text
    with source.open("a") as f:
        f.write("three\n")
    runner.run("fileSourceConnector", 0)

    assert runner.run("fileSinkConnector", 0).state == "SUCCEEDED"

    assert b.read_text() == "somebody else's first line\nthree\n"
    assert a.read_text() == "one\ntwo\n"


def test_sink_replaced_file_under_the_same_name_is_not_cut_back(
    runtime: Runtime, runner: TaskRunner, tmp_path: Path
) -> None:
    source, sink = file_pair(runtime, tmp_path)
    source.write_text("one\n")
    runner.run("fileSourceConnector", 0)
    runner.run("fileSinkConnector", 0)
    sink.unlink()
    sink.write_text("a new file, longer than what the sink committed\n")  # same name, another inode
    with source.open("a") as f:
        f.write("two\n")
    runner.run("fileSourceConnector", 0)

    assert runner.run("fileSinkConnector", 0).state == "SUCCEEDED"

    assert sink.read_text() == "a new file, longer than what the sink committed\ntwo\n"


def test_sink_write_that_crashed_before_commit_is_cut_back_on_the_same_file(
    runtime: Runtime, runner: TaskRunner, tmp_path: Path
) -> None:
    source, sink = file_pair(runtime, tmp_path)
    source.write_text("one\ntwo\n")
    runner.run("fileSourceConnector", 0)
    runner.run("fileSinkConnector", 0)
    with sink.open("a") as f:
        f.write("three\nfo")  # what a run killed mid-write (CONNECT_FAULT=mid_sink) leaves behind
    with source.open("a") as f:
        f.write("three\nfour\n")
    runner.run("fileSourceConnector", 0)

    assert runner.run("fileSinkConnector", 0).rows == 2

    assert sink.read_text() == "one\ntwo\nthree\nfour\n"


# -- regular files only, lines that end ---------------------------------------------


def test_not_regular_files_are_refused_at_create(runtime: Runtime, tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "dir").mkdir()
    allowed = AllowedPaths([tmp_path, "/dev"])  # even where allowed
    cases = [
        (SOURCE, tmp_path / "fifo", "FIFO"),
        (SOURCE, "/dev/zero", "character device"),
        (SOURCE, tmp_path / "dir", "directory"),
        (SINK, tmp_path / "dir", "directory"),
        (SINK, tmp_path / "fifo", "FIFO"),
    ]
    for plugin, filename, kind in cases:
        config = {"connector.class": plugin, "filename": str(filename), "topic": "t", "topics": "t"}
        with pytest.raises(ConfigError) as caught:
            validate_connector("c", config, runtime.registry, allowed_paths=allowed)
        problems = caught.value.errors["filename"]
        assert kind in problems[0] and "regular files only" in problems[0], (plugin, filename, problems)


@pytest.mark.timeout(120)
def test_fifo_swapped_in_after_create_fails_the_run_at_once(
    runtime: Runtime, runner: TaskRunner, tmp_path: Path
) -> None:
    source, sink = file_pair(runtime, tmp_path)
    os.mkfifo(source)  # nobody ever writes to it: an open() without O_NONBLOCK would wait forever
    os.mkfifo(sink)

    results = {}
    worker = threading.Thread(  # a daemon: a run stuck on the FIFO must not keep pytest from exiting
        daemon=True,
        target=lambda: results.update(
            source=runner.run("fileSourceConnector", 0), sink=runner.run("fileSinkConnector", 0)
        ),
    )
    worker.start()
    worker.join(timeout=60)

    assert not worker.is_alive(), "a run hung on a FIFO"
    for name in ("source", "sink"):
        assert (results[name].state, results[name].error_kind) == ("FAILED", "config"), results[name]
        assert "FIFO" in results[name].message


def test_long_lines_are_read_in_linear_time_and_bounded(runtime: Runtime, runner: TaskRunner, tmp_path: Path) -> None:
    source = tmp_path / "in.txt"
    long_line = "x" * (4 * 1024 * 1024)
    source.write_text(f"{long_line}\nshort\n")
    # batch.max.bytes=1: a long line is read whole, in big steps (this took minutes when every step
    # searched all that was read so far for a newline).
    runtime.create_connector(
        "src", {"connector.class": SOURCE, "filename": str(source), "topic": "t", "batch.max.bytes": 1}
    )
    started = time.monotonic()
    first = runner.run("src", 0)
    assert (first.state, first.rows) == ("SUCCEEDED", 1), first.message
    assert time.monotonic() - started < 30

    with source.open("a") as f:
        f.write("y" * 5000)  # no newline yet, and longer than line.max.bytes allows
    runtime.update_connector(
        "src",
        {
            "connector.class": SOURCE,
            "filename": str(source),
            "topic": "t",
            "batch.max.bytes": 1,
            "line.max.bytes": 1000,
        },
    )
    assert runner.run("src", 0).rows == 1  # "short"
    failed = runner.run("src", 0)
    assert (failed.state, failed.error_kind) == ("FAILED", "fatal")
    assert "line.max.bytes" in failed.message


def test_a_line_too_long_is_set_aside_under_tolerance_all(runtime: Runtime, runner: TaskRunner, tmp_path: Path) -> None:
    """`errors.tolerance=all`: the line goes to the dead-letter topic (its first `line.max.bytes`),
    the lines around it to the topic; one whose end is not written yet is skipped as it comes."""
    source, out, dead = tmp_path / "in.txt", tmp_path / "out.txt", tmp_path / "dead.txt"
    source.write_text("a\n" + "x" * 5000 + "\nb\nc\n" + "y" * 3000)
    runtime.create_connector(
        "src",
        {
            "connector.class": SOURCE,
            "filename": str(source),
            "topic": "t",
            "batch.max.bytes": 100,  # the limit applies to a line longer than a batch
            "line.max.bytes": 1000,
            "errors.tolerance": "all",
            "errors.deadletterqueue.topic.name": "t-dlq",
        },
    )
    runtime.create_connector("sink", {"connector.class": SINK, "filename": str(out), "topics": "t"})
    runtime.create_connector("dlq", {"connector.class": SINK, "filename": str(dead), "topics": "t-dlq"})
    runs = [runner.run("src", 0) for _ in range(4)]
    assert [(r.state, r.rows, r.counts.get("dead_lettered")) for r in runs] == [
        ("SUCCEEDED", 1, None),  # a
        ("SUCCEEDED", 2, 1),  # the x line set aside; b, c
        ("SUCCEEDED", 0, 1),  # the y line, not ended yet, set aside
        ("SUCCEEDED", 0, None),
    ]
    with source.open("a") as f:
        f.write("y" * 3000 + "\nd\n")  # the y line ends: skipped; d is read
    assert runner.run("src", 0).rows == 1
    assert runner.run("src", 0).rows == 0
    runner.run("sink", 0)
    runner.run("dlq", 0)
    assert out.read_text() == "a\nb\nc\nd\n"
    assert dead.read_text() == "x" * 1000 + "\n" + "y" * 1000 + "\n"
