"""Lists in pages, single-connector reads in one query, and `PUT /connectors/{c}/apply`, over real HTTP."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import event

from connect_core.runtime.context import Runtime
from tests.rest.conftest import Served

NAMES = ["c0", "c1", "c2", "c3", "c4"]


def _config(tmp_path: Path, name: str, **extra: object) -> dict[str, Any]:
    return {"connector.class": "FileSourceConnector", "file": str(tmp_path / f"{name}.txt"), "topic": name, **extra}


@pytest.fixture
def five(runtime: Runtime, tmp_path: Path) -> list[str]:
    for name in NAMES:
        runtime.create_connector(name, _config(tmp_path, name))
    return NAMES


def _next(response: httpx.Response) -> str | None:
    """The `Link: <…>; rel="next"` target, if any."""
    found = re.fullmatch(r'<([^>]*)>; rel="next"', response.headers.get("link", ""))
    return found.group(1) if found else None


# -- pages ----------------------------------------------------------------------


def test_the_whole_list_is_kafkas_and_a_page_links_to_the_next(api: Served, five: list[str]) -> None:
    with httpx.Client(base_url=api.url) as client:
        whole = client.get("/connectors")
        assert whole.json() == five and "link" not in whole.headers

        walked, url, pages = [], "/connectors?limit=2", 0
        while url is not None:  # the `after` cursor, as the Link header gives it
            page = client.get(url)
            assert page.status_code == 200, page.text
            walked += page.json()
            url, pages = _next(page), pages + 1
        assert walked == five and pages == 3

        assert client.get("/connectors", params={"limit": 2, "offset": 4}).json() == ["c4"]
        assert client.get("/connectors", params={"limit": 5}).headers.get("link") is None  # exactly all: no next
        assert client.get("/connectors", params={"after": "c4"}).json() == []
        assert client.get("/connectors", params={"after": "c1", "limit": 1}).json() == ["c2"]
        assert client.get("/connectors", params={"after": "c1", "offset": 1, "limit": 1}).json() == ["c3"]
        assert client.get("/connectors", params={"after": "b"}).json() == five  # any string is a cursor
        assert client.get("/connectors", params={"offset": 2_000_000_000}).json() == []


def test_an_expanded_page_keeps_its_expand_in_the_next_link(api: Served, five: list[str]) -> None:
    first = httpx.get(f"{api.url}/connectors", params=[("expand", "status"), ("expand", "info"), ("limit", "3")])
    assert list(first.json()) == ["c0", "c1", "c2"]
    assert set(first.json()["c0"]) == {"status", "info"}
    assert first.json()["c1"]["info"]["tasks"] == [{"connector": "c1", "task": 0}]
    following = _next(first)
    assert following is not None and "expand=status" in following and "expand=info" in following
    second = httpx.get(api.url + following)
    assert list(second.json()) == ["c3", "c4"] and _next(second) is None
    # A page shows what the whole list shows for the same connectors.
    whole = httpx.get(f"{api.url}/connectors", params=[("expand", "status"), ("expand", "info")]).json()
    assert {**first.json(), **second.json()} == whole


def test_the_rocketmq_list_pages_too(api: Served, five: list[str]) -> None:
    for prefix in ("", "/rocketmq"):
        page = httpx.get(f"{api.url}{prefix}/connectors/list", params={"limit": 2, "offset": 1})
        assert page.json()["status"] == 200
        assert list(page.json()["body"]) == ["c1", "c2"]
        assert page.json()["body"]["c1"]["info"]["type"] == "SOURCE"
        following = _next(page)
        assert following is not None and following.startswith(f"{prefix}/connectors/list?")
        assert "offset" not in following and "after=c2" in following
        assert list(httpx.get(api.url + following).json()["body"]) == ["c3", "c4"]
    assert list(httpx.get(f"{api.url}/connectors/list").json()["body"]) == NAMES


BAD_PAGES = [
    ("limit=0", "limit"),
    ("limit=-1", "limit"),
    ("limit=1001", "limit"),
    ("limit=abc", "limit"),
    ("limit=1.5", "limit"),
    ("limit=%201", "limit"),
    ("limit=%2B1", "limit"),
    ("limit=%D9%A3", "limit"),  # an Arabic-Indic 3: int() would take it
    ("limit=" + "9" * 400, "limit"),
    ("offset=-1", "offset"),
    ("offset=2147483648", "offset"),
    ("offset=1e3", "offset"),
    ("after=", "after"),
    ("after=" + "x" * 1001, "after"),
    ("after=a%00b", "after"),
]


def test_bad_page_parameters_answer_400_naming_them(api: Served) -> None:
    with httpx.Client(base_url=api.url) as client:
        for query, param in BAD_PAGES:
            kafka = client.get(f"/connectors?{query}")
            assert kafka.status_code == 400, (query, kafka.text)
            assert kafka.json()["error_code"] == 400 and f"`{param}`" in kafka.json()["message"], query
            rocketmq = client.get(f"/connectors/list?{query}")
            assert rocketmq.status_code == 400, (query, rocketmq.text)
            assert rocketmq.json()["status"] == 400 and f"`{param}`" in rocketmq.json()["body"], query


# -- one query per read --------------------------------------------------------


@contextmanager
def _queries(runtime: Runtime) -> Iterator[list[str]]:
    """The statements the app sends while the block runs (not the change listener's own polls)."""
    seen: list[str] = []

    def count(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        if threading.current_thread().name != "connect-change-listener":
            seen.append(statement)

    event.listen(runtime.engine, "before_cursor_execute", count)
    try:
        yield seen
    finally:
        event.remove(runtime.engine, "before_cursor_execute", count)


SINGLE_READS = [
    "/connectors/c2",
    "/connectors/c2/config",
    "/connectors/c2/status",
    "/connectors/c2/tasks",
    "/connectors/c2/tasks/0/status",
    "/rocketmq/connectors/c2/status",
    "/rocketmq/connectors/c2/config",
    "/rocketmq/connectors/c2/tasks/0/status",
    "/connectors/nope/status",
]


def test_a_single_connector_read_is_one_query(api: Served, runtime: Runtime, five: list[str]) -> None:
    runtime.runs.acquire("c2", 0, lease_seconds=30)  # a run in progress: status reads it in the same query
    with httpx.Client(base_url=api.url) as client:
        client.get("/connectors/c0/status")  # the service is up, its connections open
        for path in SINGLE_READS:
            with _queries(runtime) as seen:
                answer = client.get(path)
            assert answer.status_code == (404 if "nope" in path else 200), answer.text
            assert len(seen) == 1, (path, seen)
            if path.endswith("c2/status"):
                status = answer.json().get("body", answer.json())  # RocketMQ's envelope, or Kafka's bare body
                assert [t["state"] for t in status["tasks"]] == ["RUNNING"]


def test_a_whole_list_costs_the_same_queries_for_any_number_of_connectors(
    make_api: Callable[..., Served], runtime: Runtime, tmp_path: Path
) -> None:
    queries = ["/connectors", "/connectors?expand=status", "/connectors?expand=status&expand=info", "/connectors/list"]

    def counts() -> list[int]:
        api = make_api()  # a new server: nothing kept, each list is read from the store
        found = []
        for query in queries:
            with _queries(runtime) as seen:
                assert httpx.get(f"{api.url}{query}").status_code == 200
            found.append(len(seen))
        return found

    runtime.create_connector("c0", _config(tmp_path, "c0"))
    few = counts()
    for i in range(1, 12):
        runtime.create_connector(f"c{i}", _config(tmp_path, f"c{i}"))
    assert counts() == few
    # The change count, then in one snapshot the count again and one query per kind shown.
    assert few == [3, 3, 4, 4]


def test_lists_show_a_write_to_the_writer_at_once_and_anyone_elses_soon(
    api: Served, runtime: Runtime, five: list[str]
) -> None:
    def states(query: str = "/connectors?expand=status") -> dict[str, str]:
        return {n: e["status"]["connector"]["state"] for n, e in httpx.get(api.url + query).json().items()}

    assert set(states().values()) == {"RUNNING"}  # kept now
    assert set(states().values()) == {"RUNNING"}  # served as kept
    assert httpx.put(f"{api.url}/connectors/c3/pause").status_code == 202
    assert states()["c3"] == "PAUSED"  # read after write: the kept list was dropped
    assert httpx.get(f"{api.url}/connectors/c3/status").json()["connector"]["state"] == "PAUSED"

    runtime.connectors.set_target_state("c1", "STOPPED")  # another process's write: heard by NOTIFY
    deadline = time.monotonic() + 5
    while states()["c1"] != "STOPPED":
        assert time.monotonic() < deadline, "the list did not follow a change made elsewhere"
        time.sleep(0.02)
    assert httpx.get(f"{api.url}/connectors/c1/status").json()["connector"]["state"] == "STOPPED"


# -- apply -----------------------------------------------------------------------


def test_apply_creates_updates_and_leaves_unchanged(api: Served, runtime: Runtime, tmp_path: Path) -> None:
    config = _config(tmp_path, "src", **{"db.password": "hunter2"})

    def apply(body: dict[str, Any], **params: str) -> httpx.Response:
        return httpx.put(f"{api.url}/connectors/src/apply", json=body, params=params)

    planned = apply(config, dryRun="true")
    assert planned.status_code == 200 and planned.json()["action"] == "created"
    assert httpx.get(f"{api.url}/connectors").json() == []  # a dry run writes nothing

    created = apply(config, initialState="PAUSED")
    assert created.status_code == 201, created.text
    assert created.json() == {
        "name": "src",
        "action": "created",
        "changed": sorted(config),
        "type": "source",
        "tasks": 1,
    }
    assert httpx.get(f"{api.url}/connectors/src/status").json()["connector"]["state"] == "PAUSED"
    version = runtime.connectors.get("src").config_version

    again = apply({**config, "name": "src"})  # `name` in the config is no change
    assert again.status_code == 200 and again.json()["action"] == "unchanged"
    assert runtime.connectors.get("src").config_version == version  # nothing written: no fencing

    changed = {**config, "topic": "t2", "db.password": "swordfish"}
    assert apply(changed, dryRun="true").json()["changed"] == ["db.password", "topic"]
    assert runtime.connectors.get("src").config["topic"] == "src"
    updated = apply(changed)
    assert updated.status_code == 200 and updated.json()["action"] == "updated"
    assert runtime.connectors.get("src").config == changed
    assert runtime.connectors.get("src").config_version == version + 1
    assert "hunter2" not in updated.text and "swordfish" not in updated.text  # keys, never values


APPLY_REFUSED: list[tuple[str, dict[str, Any], dict[str, str], str]] = [
    ("src", {"connector.class": "Nope"}, {}, "connector.class"),
    ("bad name", {"connector.class": "FileSourceConnector", "topic": "t"}, {}, "invalid connector name"),
    ("src", {"connector.class": "FileSourceConnector", "name": "other"}, {}, "differs"),
    ("src", {"connector.class": "FileSourceConnector"}, {"initialState": "GONE"}, "initial_state"),
    ("src", {"connector.class": "FileSourceConnector"}, {"dryRun": "maybe"}, "dryRun"),
]


def test_apply_refuses_what_a_create_refuses(api: Served) -> None:
    for name, body, params, says in APPLY_REFUSED:
        answer = httpx.put(f"{api.url}/connectors/{name}/apply", json=body, params=params)
        assert answer.status_code == 400 and says in answer.json()["message"], (name, answer.text)
    assert httpx.get(f"{api.url}/connectors").json() == []


def test_concurrent_applies_of_one_config_create_once(api: Served, tmp_path: Path) -> None:
    config = _config(tmp_path, "same")
    answers: list[httpx.Response] = []

    def apply(_: Any) -> None:
        answers.append(httpx.put(f"{api.url}/connectors/same/apply", json=config, timeout=60))

    threads = [threading.Thread(target=apply, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(a.json().get("action") for a in answers) == ["created"] + ["unchanged"] * 7, [a.text for a in answers]


def test_apply_updates_a_connector_whose_name_predates_the_naming_rule(
    api: Served, runtime: Runtime, tmp_path: Path
) -> None:
    config = _config(tmp_path, "old")
    runtime.connectors.create("old name", **runtime.validated("old name", config))  # as stored before the rule
    same = httpx.put(f"{api.url}/connectors/old name/apply", json=config)
    assert same.status_code == 200 and same.json()["action"] == "unchanged", same.text
    changed = httpx.put(f"{api.url}/connectors/old name/apply", json={**config, "topic": "t2"})
    assert changed.status_code == 200 and changed.json()["action"] == "updated", changed.text
    assert runtime.connectors.get("old name").config["topic"] == "t2"
