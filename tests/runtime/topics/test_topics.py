"""The topic store belongs to its metadata database: two databases share a topics directory safely,
and files a run left without committing never block a later run."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg2
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from sqlalchemy import select, update
from sqlalchemy.engine import make_url

from connect_core.runtime.context import Runtime
from connect_core.runtime.settings import Settings
from connect_core.runtime.store.models import TopicSegmentRow
from tests.conftest import file_pair, make_runner


@pytest.fixture(autouse=True)
def _files_allowed_in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONNECT_FILE_ALLOWED_PATHS", str(tmp_path))  # file connectors are confined


@pytest.fixture
def second_database_url(pg_server: str) -> Iterator[str]:
    """Another fresh metadata database on the same server (say, a team's server after the embedded one)."""
    name = f"connect_test_{uuid.uuid4().hex[:12]}"
    url = make_url(pg_server)
    admin = psycopg2.connect(host=url.host, port=url.port, user=url.username, dbname=url.database)
    admin.autocommit = True
    with admin.cursor() as cur:
        cur.execute(f'CREATE DATABASE "{name}"')
    yield url.set(database=name).render_as_string(hide_password=False)
    with admin.cursor() as cur:
        cur.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    admin.close()


def _open(database_url: str, home: Path, topics: Path) -> Runtime:
    return Runtime.open(
        Settings(database_url=database_url, home=home, topics_path=str(topics), file_allowed_paths=str(home.parent))
    )


def _segment_paths(runtime: Runtime) -> list[str]:
    with runtime.engine.connect() as conn:
        return list(conn.scalars(select(TopicSegmentRow.path)))


def test_two_metadata_databases_share_one_topics_directory(
    database_url: str, second_database_url: str, tmp_path: Path, spark: Any
) -> None:
    shared = tmp_path / "topics"
    runtimes = {
        "embedded": _open(database_url, tmp_path / "embedded" / "home", shared),
        "server": _open(second_database_url, tmp_path / "server" / "home", shared),
    }
    try:
        sinks = {}
        for name, runtime in runtimes.items():
            (tmp_path / name).mkdir(exist_ok=True)
            source, sinks[name] = file_pair(runtime, tmp_path / name)
            source.write_text(f"{name} 1\n{name} 2\n")
        for runtime in runtimes.values():
            runner = make_runner(runtime, spark)
            first = runner.run("fileSourceConnector", 0)
            assert (first.state, first.run_id, first.rows) == ("SUCCEEDED", 1, 2), first.message
            assert runner.run("fileSinkConnector", 0).state == "SUCCEEDED"

        for name in runtimes:
            assert sinks[name].read_text().splitlines() == [f"{name} 1", f"{name} 2"]
        embedded, server = (runtimes[n].topics.cluster_id() for n in ("embedded", "server"))
        assert embedded != server
        assert _segment_paths(runtimes["embedded"]) == [f"{shared}/{embedded}/fileTopic/partition=0/run=1"]
        assert _segment_paths(runtimes["server"]) == [f"{shared}/{server}/fileTopic/partition=0/run=1"]
    finally:
        for runtime in runtimes.values():
            runtime.close()


def test_stale_files_at_a_runs_path_are_replaced(runtime: Runtime, tmp_path: Path, spark: Any) -> None:
    """Files at the path a run writes that no committed segment names (a database restored from a
    backup reuses run ids; a run killed mid-write) neither fail the run nor mix into its segment."""
    source, sink = file_pair(runtime, tmp_path)
    source.write_text("fresh 1\nfresh 2\n")
    stale = Path(runtime.topics.segment_path("fileTopic", 0, 1))  # the first run's path
    stale.mkdir(parents=True)
    # A whole stale segment, as a run of this id once wrote it: if it were kept, the sink would read it.
    rows = pa.table({"line": ["stale"] * 3, "__seq": pa.array([0, 1, 2], pa.int64()), "__run": [1, 1, 1]})
    pq.write_table(rows, stale / "part-00007.snappy.parquet")
    (stale / "_SUCCESS").touch()

    runner = make_runner(runtime, spark)
    first = runner.run("fileSourceConnector", 0)
    assert (first.state, first.run_id, first.rows) == ("SUCCEEDED", 1, 2), first.message
    assert runner.run("fileSinkConnector", 0).state == "SUCCEEDED"

    assert sink.read_text().splitlines() == ["fresh 1", "fresh 2"]
    assert not (stale / "part-00007.snappy.parquet").exists()


def test_segments_committed_before_the_cluster_id_keep_their_paths(
    runtime: Runtime, tmp_path: Path, spark: Any
) -> None:
    """An existing topic keeps working after the upgrade: its old segments are read where they were recorded."""
    source, sink = file_pair(runtime, tmp_path)
    source.write_text("old 1\n")
    runner = make_runner(runtime, spark)
    assert runner.run("fileSourceConnector", 0).state == "SUCCEEDED"
    # Move the committed segment to the layout without a cluster id, as a store made before 0005 has it.
    (committed,) = _segment_paths(runtime)
    legacy = Path(runtime.settings.topics_base) / "fileTopic" / "partition=0" / "run=1"
    legacy.parent.mkdir(parents=True)
    Path(committed).rename(legacy)
    with runtime.engine.begin() as conn:
        conn.execute(update(TopicSegmentRow).values(path=str(legacy)))

    with source.open("a") as f:
        f.write("new 2\n")
    assert runner.run("fileSourceConnector", 0).state == "SUCCEEDED"
    assert runner.run("fileSinkConnector", 0).rows == 2
    assert sink.read_text().splitlines() == ["old 1", "new 2"]
