"""kill -9 of real `spark-submit` runs of the PostgreSQL CDC source at each point of an incremental
snapshot chunk's life: read but its WAL not yet (`mid_source`), read with its changes (`before_stage`),
staged (`after_stage`), about to commit (`before_commit`) and committed (`after_commit`). Each rerun
reads from the last committed progress: every row of the table reaches the topic as a snapshot event
exactly once, and the replica equals the source."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from connect_core.runtime.store.connectors import ConnectorStore
from connect_core.runtime.store.db import make_engine
from connect_core.runtime.topics.store import TopicStore
from connect_core.testing.servers import PgServer
from tests.connectors.cdc._pipelines import pg_capture, replica_sink
from tests.connectors.jdbc_helpers import Database, target  # noqa: F401  (fixtures)
from tests.e2e.test_spark_submit import Cli, cli  # noqa: F401  (fixture)

pytestmark = pytest.mark.spark_submit

_ROWS = "SELECT id, label, qty FROM items ORDER BY id"
_TOPIC = "srv.public.items"
_POINTS = ("mid_source", "before_stage", "after_stage", "before_commit", "after_commit")


def _snapshot_keys(database_url: str) -> list[int]:
    """The keys of the topic's incremental-snapshot events, as many times as they were committed."""
    topics = TopicStore(make_engine(database_url), "")
    keys: list[int] = []
    for segment in topics.all_segments([_TOPIC]):
        rows = pq.read_table(segment.path.removeprefix("file://"), columns=["__key", "source"]).to_pylist()
        keys += [r["__key"]["id"] for r in rows if r["source"]["snapshot"] == "incremental"]
    return keys


def _progress(database_url: str) -> Any:
    """The snapshot's committed progress (read from the store: a CLI call costs a Python start-up)."""
    (position,) = ConnectorStore(make_engine(database_url)).positions("cdc").values()
    return dict(position.offset).get("incremental")


def test_a_kill_at_each_point_of_a_chunks_life_loses_and_repeats_nothing(
    cli: Cli,  # noqa: F811
    pg_db: PgServer,
    target: Database,  # noqa: F811
    database_url: str,
    tmp_path: Path,
) -> None:
    pg_db.execute(
        "CREATE TABLE items (id int PRIMARY KEY, label text, qty int)",
        "INSERT INTO items SELECT g, 'item ' || g, g FROM generate_series(1, 32) g",
    )
    # a run's 4 chunks read by 2 Spark tasks of the spark-submit, in the run's exported snapshot
    source = pg_capture(
        pg_db,
        "public.items",
        **{
            "incremental.snapshot.chunk.size": "4",
            "incremental.snapshot.max.rows.per.run": "16",
            "incremental.snapshot.parallel.reads": "2",
        },
    )
    (tmp_path / "src.json").write_text(json.dumps(source))
    (tmp_path / "sink.json").write_text(json.dumps(replica_sink(target.jdbc_url, _TOPIC)))
    cli("create", "cdc", "--config", "src.json")
    cli("create", "sink", "--config", "sink.json")
    assert cli.run("cdc")["state"] == "SUCCEEDED"  # the initial snapshot, and the slot
    assert cli.run("sink")["state"] == "SUCCEEDED"
    target.execute("DELETE FROM items WHERE id % 3 = 0")  # the replica lost rows: re-read the table

    cli("snapshot", "cdc", "public.items")
    assert cli.run("cdc")["state"] == "SUCCEEDED"  # the signal acted on, the first 16 rows read
    for point in _POINTS:  # each killed run is the rerun of the one killed before it: the last 16 rows
        before = _progress(database_url)
        assert before["rows"] == 16, point
        killed = cli("run", "cdc", check=False, CONNECT_FAULT=point)
        assert "KILLED" in killed.stdout, f"{point}: {killed.stdout}"
        after = _progress(database_url)
        if point == "after_commit":
            assert after is None or after["rows"] == 32, "the commit landed before the kill: its progress is kept"
        else:
            assert after == before, f"{point}: a killed run moved the progress"
    while _progress(database_url) is not None:  # a last chunk finds no more rows
        assert cli.run("cdc")["state"] == "SUCCEEDED"
    assert cli.run("sink")["state"] == "SUCCEEDED"

    keys = _snapshot_keys(database_url)
    assert sorted(keys) == list(range(1, 33)), "each row once as a snapshot event"
    assert target.rows(_ROWS) == pg_db.rows(_ROWS)
