"""`GET /metrics` over real HTTP, after real runs (in-process runner, shared SparkSession, real
Postgres): the values are what the runs did, as Prometheus' own parser reads them; the store
going away is a 503 naming it; the route has the app's auth; no config value leaks."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import text

from connect_core.rest.app import create_app
from connect_core.rest.auth import bearer_or_loopback
from connect_core.rest.metrics import encode_text, read_collector
from connect_core.runtime.context import Runtime
from connect_core.runtime.settings import Settings
from connect_core.runtime.store.retention import prune
from connect_core.runtime.topics.retention import apply_retention
from tests.conftest import file_pair, make_runner
from tests.rest._throwaway_pg import ThrowawayPostgres
from tests.rest.conftest import Served, serve

SOURCE, SINK = "fileSourceConnector", "fileSinkConnector"


class Scrape:
    """One scrape, parsed: every sample by its name and labels."""

    def __init__(self, response: httpx.Response) -> None:
        assert response.status_code == 200, response.text
        assert response.headers["content-type"].startswith("text/plain; version=")
        self.text = response.text
        self.samples: dict[tuple[str, frozenset[tuple[str, str]]], float] = {}
        self.types: dict[str, str] = {}
        for family in text_string_to_metric_families(response.text):
            self.types[family.name] = family.type
            for s in family.samples:
                self.samples[(s.name, frozenset(s.labels.items()))] = s.value

    def value(self, name: str, **labels: Any) -> float | None:
        return self.samples.get((name, frozenset((k, str(v)) for k, v in labels.items())))

    def labelled(self, name: str) -> list[dict[str, str]]:
        return [dict(labels) for sample, labels in self.samples if sample == name]


def scrape(api: Served, **kwargs: Any) -> Scrape:
    return Scrape(httpx.get(f"{api.url}/metrics", timeout=30, **kwargs))


def test_metrics_are_what_a_source_and_a_sink_did(api: Served, runtime: Runtime, spark: Any, tmp_path: Path) -> None:
    source, _sink = file_pair(runtime, tmp_path)
    runner = make_runner(runtime, spark)
    source.write_text("a\nb\nc\n")
    assert runner.run(SOURCE, 0).state == "SUCCEEDED"

    m = scrape(api)
    assert m.value("kafka_connect_connector_status", connector=SOURCE, type="source", state="RUNNING") == 1
    assert m.value("kafka_connect_connector_status", connector=SINK, type="sink", state="RUNNING") == 1
    assert m.value("kafka_connect_connector_task_status", connector=SOURCE, task=0, state="RUNNING") == 1
    assert m.value("kafka_connect_worker_connector_count") == 2
    assert m.types["kafka_connect_source_task_source_record_write"] == "counter"
    assert m.value("kafka_connect_source_task_source_record_write_total", connector=SOURCE, task=0) == 3
    assert m.value("kafka_connect_source_task_source_record_poll_total", connector=SOURCE, task=0) == 3
    assert m.value("kafka_connect_connector_task_batch_size_avg", connector=SOURCE, task=0) == 3
    commit_ms = m.value("kafka_connect_connector_task_offset_commit_avg_time_ms", connector=SOURCE, task=0)
    assert commit_ms is not None and 0 < commit_ms < 10_000  # the commit's own time, recorded after it
    assert m.value("kafka_connect_source_task_poll_batch_avg_time_ms", connector=SOURCE, task=0) > 0  # type: ignore[operator]
    # the sink has not run: everything the source wrote is its lag
    lag = {"connector": SINK, "task": 0, "topic": "fileTopic", "partition": 0}
    assert m.value("kafka_connect_sink_task_sink_record_lag", **lag) == 3
    assert m.value("kafka_connect_sink_task_sink_record_lag_max", connector=SINK, task=0) == 3
    assert m.labelled("kafka_connect_sink_task_sink_record_read_total") == []
    assert m.value("kafka_connect_task_error_record_errors_total", connector=SOURCE, task=0) == 0
    assert 0 <= m.value("kafka_connect_source_task_position_age_seconds", connector=SOURCE) < 600  # type: ignore[operator]
    # rates and the running ratio: over the last hour (3 records; one run of a few seconds)
    assert m.value("kafka_connect_source_task_source_record_poll_rate", connector=SOURCE, task=0) == pytest.approx(
        3 / 3600
    )
    assert 0 < m.value("kafka_connect_connector_task_running_ratio", connector=SOURCE, task=0) < 0.05  # type: ignore[operator]
    assert m.value("kafka_connect_connector_task_running_ratio", connector=SINK, task=0) is None  # no run yet
    # lag in seconds: since the oldest segment the sink has not committed was written (here: an hour ago)
    with runtime.engine.begin() as conn:
        conn.execute(text("UPDATE connect.topic_segments SET created_at = now() - interval '1 hour'"))
    m = scrape(api)
    assert 3600 <= m.value("kafka_connect_sink_task_sink_record_lag_seconds", **lag) < 4200  # type: ignore[operator]

    assert runner.run(SINK, 0).state == "SUCCEEDED"
    m = scrape(api)
    assert m.value("kafka_connect_sink_task_sink_record_read_total", connector=SINK, task=0) == 3
    assert m.value("kafka_connect_sink_task_sink_record_send_total", connector=SINK, task=0) == 3
    assert m.value("kafka_connect_sink_task_offset_commit_completion_total", connector=SINK, task=0) == 1
    assert m.value("kafka_connect_sink_task_put_batch_avg_time_ms", connector=SINK, task=0) > 0  # type: ignore[operator]
    assert m.value("kafka_connect_sink_task_sink_record_lag", **lag) == 0
    assert m.value("kafka_connect_sink_task_sink_record_lag_max", connector=SINK, task=0) == 0
    assert m.value("kafka_connect_sink_task_sink_record_lag_seconds", **lag) == 0
    assert m.value("kafka_connect_sink_task_sink_record_read_rate", connector=SINK, task=0) == pytest.approx(3 / 3600)
    assert m.value("kafka_connect_connector_task_offset_commit_success_percentage", connector=SINK, task=0) == 1

    with source.open("a") as f:
        f.write("d\ne\n")
    assert runner.run(SOURCE, 0).state == "SUCCEEDED"
    m = scrape(api)
    assert m.value("kafka_connect_source_task_source_record_write_total", connector=SOURCE, task=0) == 5
    assert m.value("kafka_connect_connector_task_batch_size_avg", connector=SOURCE, task=0) == 2.5
    assert m.value("kafka_connect_connector_task_batch_size_max", connector=SOURCE, task=0) == 3
    assert m.value("kafka_connect_sink_task_sink_record_lag", **lag) == 2
    # the hour-old segment is committed: the lag is the new one's age
    assert 0 < m.value("kafka_connect_sink_task_sink_record_lag_seconds", **lag) < 600  # type: ignore[operator]

    # the workers: the default local pool holds both connectors and both tasks
    assert m.value("kafka_connect_pool_alive", pool="local") == 1
    assert m.value("kafka_connect_pool_assigned_tasks", pool="local") == 2
    assert m.value("kafka_connect_pool_assigned_connectors", pool="local") == 2
    assert m.value("kafka_connect_worker_rebalance_completed_rebalances_total") is not None

    runtime.connectors.set_target_state(SINK, "PAUSED")
    m = scrape(api)
    assert m.value("kafka_connect_connector_task_status", connector=SINK, task=0, state="PAUSED") == 1
    assert m.value("kafka_connect_connector_task_status", connector=SINK, task=0, state="RUNNING") is None


def test_error_metrics_count_what_a_tolerant_source_set_aside(
    api: Served, runtime: Runtime, spark: Any, tmp_path: Path
) -> None:
    source = tmp_path / "in.txt"
    runtime.create_connector(
        "src",
        {
            "connector.class": "FileSourceConnector",
            "filename": str(source),
            "topic": "nums",
            "transforms": "cast",
            "transforms.cast.type": "org.apache.kafka.connect.transforms.Cast$Value",
            "transforms.cast.spec": "line:int32",
            "errors.tolerance": "all",
            "errors.deadletterqueue.topic.name": "dlq",
        },
    )
    source.write_text("1\nx\n3\ny\n")
    before = time.time()
    result = make_runner(runtime, spark).run("src", 0)
    assert (result.state, result.counts) == ("SUCCEEDED", {"failed": 2, "skipped": 2, "dead_lettered": 2})

    m = scrape(api)
    task = {"connector": "src", "task": 0}
    assert m.value("kafka_connect_task_error_record_errors_total", **task) == 2
    assert m.value("kafka_connect_task_error_records_skipped_total", **task) == 2
    assert m.value("kafka_connect_task_error_deadletterqueue_produce_requests_total", **task) == 2
    assert m.value("kafka_connect_task_error_retries_total", **task) == 0
    assert m.value("kafka_connect_source_task_source_record_poll_total", **task) == 4
    assert m.value("kafka_connect_source_task_source_record_write_total", **task) == 2
    last_error = m.value("kafka_connect_task_error_last_error_timestamp_seconds", **task)
    assert last_error is not None and before - 5 < last_error < time.time() + 5

    # the text the server writes is prometheus_client's own, byte for byte (a quicker encoder)
    collector = read_collector(runtime)
    assert encode_text(collector) == generate_latest(collector)


_COUNTERS = (
    ("kafka_connect_source_task_source_record_poll_total", SOURCE),
    ("kafka_connect_source_task_source_record_write_total", SOURCE),
    ("kafka_connect_sink_task_sink_record_read_total", SINK),
    ("kafka_connect_sink_task_sink_record_send_total", SINK),
    ("kafka_connect_sink_task_offset_commit_completion_total", SINK),
    ("kafka_connect_sink_task_target_bytes_written_total", SINK),
    ("kafka_connect_connector_task_offset_commit_success_percentage", SOURCE),
    ("kafka_connect_connector_task_offset_commit_success_percentage", SINK),
)


def _counters(m: Scrape) -> dict[tuple[str, str], float | None]:
    return {(name, connector): m.value(name, connector=connector, task=0) for name, connector in _COUNTERS}


def _totals_rows(runtime: Runtime) -> dict[str, tuple[int, int, int]]:
    with runtime.engine.connect() as conn:
        rows = conn.execute(text("SELECT connector, succeeded, failed, records FROM connect.task_run_totals"))
        return {r[0]: (r[1], r[2], r[3]) for r in rows}


def test_run_totals_survive_history_pruning(api: Served, runtime: Runtime, spark: Any, tmp_path: Path) -> None:
    source, sink = file_pair(runtime, tmp_path)
    runner = make_runner(runtime, spark)
    for lines in ("a\nb\nc\n", "d\ne\n", "f\n"):
        with source.open("a") as f:
            f.write(lines)
        assert runner.run(SOURCE, 0).state == "SUCCEEDED"
        assert runner.run(SINK, 0).state == "SUCCEEDED"
    kept = sink.rename(tmp_path / "kept.txt")
    sink.mkdir()  # a sink run that fails (its file is a directory): failed runs are counted too
    with source.open("a") as f:
        f.write("g\n")
    assert runner.run(SOURCE, 0).state == "SUCCEEDED"
    assert runner.run(SINK, 0).state == "FAILED"
    sink.rmdir()
    kept.rename(sink)
    assert runner.run(SINK, 0).state == "SUCCEEDED"

    before = _counters(scrape(api))
    assert before[("kafka_connect_source_task_source_record_write_total", SOURCE)] == 7
    assert before[("kafka_connect_sink_task_sink_record_read_total", SINK)] == 7
    assert before[("kafka_connect_sink_task_offset_commit_completion_total", SINK)] == 4
    assert before[("kafka_connect_connector_task_offset_commit_success_percentage", SINK)] == 0.8
    # what the sink reported writing to its file: the 7 lines of 2 bytes each
    assert before[("kafka_connect_sink_task_target_bytes_written_total", SINK)] == 14

    # a month passes: the segments go (the sink committed them all), then all runs but each task's latest
    with runtime.engine.begin() as conn:
        conn.execute(text("UPDATE connect.task_runs SET finished_at = now() - interval '30 days'"))
        conn.execute(text("UPDATE connect.topic_segments SET created_at = now() - interval '30 days'"))
    assert len(apply_retention(runtime.engine, 7 * 24 * 3600 * 1000)) == 4
    assert prune(runtime.engine, 7, batch=2)["task_runs"] == 7  # batches of two: each folds its own runs
    with runtime.engine.connect() as conn:
        left = conn.execute(text("SELECT connector, count(*) FROM connect.task_runs GROUP BY connector")).all()
    assert dict(left) == {SOURCE: 1, SINK: 1}
    assert _totals_rows(runtime) == {SOURCE: (3, 0, 6), SINK: (3, 1, 6)}  # (succeeded, failed, records)

    assert _counters(scrape(api)) == before  # nothing went down, nothing counted twice
    assert prune(runtime.engine, 7)["task_runs"] == 0
    assert _totals_rows(runtime) == {SOURCE: (3, 0, 6), SINK: (3, 1, 6)}
    assert _counters(scrape(api)) == before

    # the runs go on counting from there; a connector deleted takes its totals with it
    with source.open("a") as f:
        f.write("h\n")
    assert runner.run(SOURCE, 0).state == "SUCCEEDED"
    assert runner.run(SINK, 0).state == "SUCCEEDED"
    m = scrape(api)
    assert m.value("kafka_connect_source_task_source_record_write_total", connector=SOURCE, task=0) == 8
    assert m.value("kafka_connect_sink_task_sink_record_read_total", connector=SINK, task=0) == 8
    assert m.value("kafka_connect_sink_task_offset_commit_completion_total", connector=SINK, task=0) == 5
    runtime.delete_connector(SINK)
    assert _totals_rows(runtime) == {SOURCE: (3, 0, 6)}
    assert scrape(api).labelled("kafka_connect_sink_task_sink_record_read_total") == []
    # its runs outlive it (as positions and offsets do); pruned, they count for no one
    with runtime.engine.begin() as conn:
        conn.execute(text("UPDATE connect.task_runs SET finished_at = now() - interval '30 days'"))
    assert prune(runtime.engine, 7)["task_runs"] == 2  # each task's run before its latest
    assert _totals_rows(runtime) == {SOURCE: (4, 0, 7)}
    assert scrape(api).value("kafka_connect_source_task_source_record_write_total", connector=SOURCE, task=0) == 8


def test_metrics_need_the_apps_auth_and_show_no_config_value(
    make_api: Callable[..., Served], runtime: Runtime, tmp_path: Path
) -> None:
    runtime.create_connector(
        "with-secret",
        {
            "connector.class": "FileSourceConnector",
            "filename": str(tmp_path / "in.txt"),
            "topic": "t",
            "connection.password": "hunter2-secret",
        },
    )
    api = make_api(token="s3cret-token")
    assert httpx.get(f"{api.url}/metrics").status_code == 401
    m = scrape(api, headers={"Authorization": "Bearer s3cret-token"})
    assert m.value("kafka_connect_connector_status", connector="with-secret", type="source", state="RUNNING") == 1
    for leak in ("hunter2", "s3cret", str(tmp_path)):
        assert leak not in m.text
    # a scraper asking for OpenMetrics gets it
    openmetrics = httpx.get(
        f"{api.url}/metrics",
        headers={"Authorization": "Bearer s3cret-token", "Accept": "application/openmetrics-text; version=1.0.0"},
    )
    assert openmetrics.headers["content-type"].startswith("application/openmetrics-text")
    assert openmetrics.text.endswith("# EOF\n")


@pytest.fixture
def served(pg: ThrowawayPostgres, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Served]:
    monkeypatch.setenv("CONNECT_FILE_ALLOWED_PATHS", str(tmp_path))  # as tests/conftest.py's `settings`
    rt = Runtime.open(Settings(database_url=pg.url, home=tmp_path / "home", file_allowed_paths=str(tmp_path)))
    gen = serve(create_app(lambda: rt, auth=[bearer_or_loopback(None)]))
    yield next(gen)
    next(gen, None)
    rt.close()


def test_metrics_answer_503_naming_the_store_while_it_is_down(served: Served, pg: ThrowawayPostgres) -> None:
    with httpx.Client(base_url=served.url, timeout=30) as client:
        assert client.get("/metrics").status_code == 200
        pg.stop("fast")
        started = time.monotonic()
        response = client.get("/metrics")
        assert time.monotonic() - started < 3
        assert response.status_code == 503, response.text
        assert int(response.headers["retry-after"]) > 0
        assert "metadata store" in response.json()["message"]
        for leak in ("psycopg2", "OperationalError", "SQL", str(pg.port), "127.0.0.1"):
            assert leak not in response.text, f"{leak!r} in {response.text}"
        pg.start()
        started = time.monotonic()
        while client.get("/metrics").status_code != 200:
            assert time.monotonic() - started < 10, "/metrics did not recover within 10 s"
            time.sleep(0.1)
