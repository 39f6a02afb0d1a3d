"""Hostile input, second review, over real HTTP: regexes nested 1,000+ deep, topics named `.`/`..`,
connector names that are path segments, create racing delete, thousands of transforms."""

from __future__ import annotations

import http.client
import json
import logging
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from connect_core.runtime.context import Runtime
from tests.rest.conftest import Served

DEEP = "(" * 1000 + "a" + ")" * 1000
DEEPER = "(" * 10_000 + "a" + ")" * 10_000
ROUTER = "org.apache.kafka.connect.transforms.RegexRouter"
MATCHES = "org.apache.kafka.connect.transforms.predicates.TopicNameMatches"


def _source(tmp_path: Path, **extra: object) -> dict[str, Any]:
    return {"connector.class": "FileSourceConnector", "file": str(tmp_path / "in.txt"), "topic": "t", **extra}


def _sink(tmp_path: Path, **extra: object) -> dict[str, Any]:
    return {"connector.class": "FileSinkConnector", "file": str(tmp_path / "out.txt"), "topics": "t", **extra}


def _router(tmp_path: Path, regex: str) -> dict[str, Any]:
    return _source(
        tmp_path,
        transforms="r",
        **{"transforms.r.type": ROUTER, "transforms.r.regex": regex, "transforms.r.replacement": "x"},
    )


def _matches(tmp_path: Path, pattern: str) -> dict[str, Any]:
    return _source(
        tmp_path,
        transforms="f",
        predicates="p",
        **{
            "transforms.f.type": "Filter",
            "transforms.f.predicate": "p",
            "predicates.p.type": MATCHES,
            "predicates.p.pattern": pattern,
        },
    )


def _raw(url: str, method: str, path: str, body: Any = None) -> tuple[int, str]:
    """A request whose path is sent byte for byte (no client normalises `..` or `%2e` away)."""
    where = urlsplit(url)
    conn = http.client.HTTPConnection(where.hostname or "127.0.0.1", where.port, timeout=30)
    try:
        payload = None if body is None else json.dumps(body)
        conn.request(method, path, body=payload, headers={"content-type": "application/json"})
        answer = conn.getresponse()
        return answer.status, answer.read().decode()
    finally:
        conn.close()


# -- 9: regexes nested 1,000+ deep ---------------------------------------------------------


@pytest.mark.parametrize("pattern", [DEEP, DEEPER], ids=["1000-deep", "10000-deep"])
def test_a_deeply_nested_regex_is_a_400_in_one_log_line(
    api: Served, runtime: Runtime, tmp_path: Path, caplog: pytest.LogCaptureFixture, pattern: str
) -> None:
    with caplog.at_level(logging.DEBUG):
        for config, key in (
            (_router(tmp_path, pattern), "transforms.r.regex"),
            (_matches(tmp_path, pattern), "predicates.p.pattern"),
        ):
            created = httpx.post(f"{api.url}/connectors", json={"name": "deep", "config": config}, timeout=30)
            assert created.status_code == 400, created.text
            assert key in created.text and ("nests groups" in created.text or "characters long" in created.text)
            assert len(created.text) < 5000  # the pattern is quoted cut short, not whole
            put = httpx.put(f"{api.url}/connectors/deep/config", json=config, timeout=30)
            assert put.status_code == 400, put.text
            validated = httpx.put(
                f"{api.url}/connector-plugins/FileSourceConnector/config/validate", json=config, timeout=30
            )
            assert validated.status_code == 200, validated.text
            infos = validated.json()
            assert infos["error_count"] >= 1
            assert any(key == c["value"]["name"] and c["value"]["errors"] for c in infos["configs"])
            rocketmq = httpx.post(f"{api.url}/rocketmq/plugin/config/validate", json=config, timeout=30)
            assert rocketmq.status_code == 200 and '"status":200' in rocketmq.text.replace(" ", "")
    assert runtime.connectors.names() == []
    server_lines = sum(
        len(caplog.handler.format(r).splitlines())
        for r in caplog.records
        if not r.name.startswith(("httpx", "httpcore"))
    )
    assert server_lines < 50


def test_regex_limits_and_constructs(api: Served, tmp_path: Path) -> None:
    """Long patterns and absurd repetition counts are 400s naming the key; Java's possessive and
    atomic constructs and fixed lookbehind are accepted as Kafka accepts them."""
    for bad in ("a" * 20_000, "a{99999999999}", "(?<=a+)b", "[", "(?P<x>a)"):
        answer = httpx.post(f"{api.url}/connectors", json={"name": "r", "config": _router(tmp_path, bad)}, timeout=30)
        assert answer.status_code == 400 and "transforms.r.regex" in answer.text, (bad[:20], answer.text)
    for good, name in (("a++b", "p1"), ("(?>ab)c", "p2"), ("(?<=x)y", "p3"), ("a{1000000}", "p4"), ("[(]{3}", "p5")):
        answer = httpx.post(f"{api.url}/connectors", json={"name": name, "config": _router(tmp_path, good)})
        assert answer.status_code == 201, (good, answer.text)


# -- 11: topic names -----------------------------------------------------------------------


@pytest.mark.parametrize("topic", [".", "..", "", "x" * 250, "a b", "a/b", "ä", "a\tb"])
def test_an_illegal_topic_name_is_a_400_on_every_key_naming_a_topic(
    api: Served, runtime: Runtime, tmp_path: Path, topic: str
) -> None:
    configs = {
        "topic": _source(tmp_path, topic=topic),
        "connect.topicname": {
            **{k: v for k, v in _source(tmp_path).items() if k != "topic"},
            "connect.topicname": topic,
        },
        "topics": _sink(tmp_path, topics=topic if topic else ","),
        "errors.deadletterqueue.topic.name": _sink(tmp_path, **{"errors.deadletterqueue.topic.name": topic}),
    }
    for key, config in configs.items():
        if key == "errors.deadletterqueue.topic.name" and not topic:
            continue  # empty: no dead-letter topic, as in Kafka
        answer = httpx.post(f"{api.url}/connectors", json={"name": "c", "config": config})
        assert answer.status_code == 400, (key, answer.text)
        assert key.split(".")[0] in answer.text or "topic" in answer.text
    assert runtime.connectors.names() == []


def test_a_legal_topic_name_still_creates(api: Served, tmp_path: Path) -> None:
    for i, topic in enumerate(("...", ".a", "a..b", "x" * 249, "A-b_c.9")):
        answer = httpx.post(f"{api.url}/connectors", json={"name": f"c{i}", "config": _source(tmp_path, topic=topic)})
        assert answer.status_code == 201, (topic, answer.text)


# -- 12: connector names on every route ----------------------------------------------------

#: Path segments (raw, as sent) that decode to a name no new connector may have.
BAD_SEGMENTS = [
    "..",
    ".",
    "%2e%2e",
    "%2E",
    "%2e.",
    "...",
    "%252e%252e",
    "a%2Fb",
    "%EF%BC%8E%EF%BC%8E",
    "a%0Ab",
    "%20a",
    "a%20",
    "a%09",
]


@pytest.mark.parametrize("segment", BAD_SEGMENTS)
def test_a_name_that_is_a_path_segment_is_refused_on_every_route(
    api: Served, runtime: Runtime, tmp_path: Path, segment: str
) -> None:
    config = _source(tmp_path)
    query = str(httpx.QueryParams({"config": json.dumps(config)}))
    for method, path, body in (
        ("PUT", f"/connectors/{segment}/config", config),
        ("PUT", f"/connectors/{segment}/apply", config),
        ("PUT", f"/connectors/{segment}/apply?dryRun=true", config),
        ("POST", f"/connectors/{segment}", config),
        ("POST", f"/rocketmq/connectors/{segment}", config),
        ("GET", f"/rocketmq/connectors/{segment}?{query}", None),
        ("GET", f"/connectors/{segment}?{query}", None),
    ):
        status, text = _raw(api.url, method, path, body)
        # 404/405: the path does not reach a create route at all (`..` resolved by the router)
        assert status in (400, 404, 405) or '"status":400' in text.replace(" ", ""), (method, path, status, text)
        assert status != 500 and "Internal server error" not in text
    from urllib.parse import unquote

    name = unquote(segment)
    posted = httpx.post(f"{api.url}/connectors", json={"name": name, "config": config})
    assert posted.status_code == 400, posted.text
    assert runtime.connectors.names() == []


def test_names_that_differ_in_case_or_end_in_a_dot_are_distinct_connectors(api: Served, tmp_path: Path) -> None:
    for name in ("Src", "src", "src.", ".src"):
        answer = httpx.put(f"{api.url}/connectors/{name}/config", json=_source(tmp_path))
        assert answer.status_code == 201, (name, answer.text)
    assert sorted(httpx.get(f"{api.url}/connectors").json()) == sorted([".src", "Src", "src", "src."])
    for name in ("Src", "src", "src.", ".src"):
        assert httpx.delete(f"{api.url}/connectors/{name}").status_code == 204


# -- 13: create racing delete ----------------------------------------------------------------


def test_create_racing_delete_answers_201_or_409_never_404(api: Served, tmp_path: Path) -> None:
    config = _source(tmp_path)
    seen_create: set[int] = set()
    seen_delete: set[int] = set()
    stop = time.monotonic() + 4
    failures: list[str] = []

    def create() -> None:
        with httpx.Client(timeout=30) as client:
            while time.monotonic() < stop:
                answer = client.post(f"{api.url}/connectors", json={"name": "race", "config": config})
                seen_create.add(answer.status_code)
                if answer.status_code not in (201, 409):
                    failures.append(f"create {answer.status_code}: {answer.text}")
                elif answer.status_code == 201 and answer.json()["name"] != "race":
                    failures.append(f"create body: {answer.text}")
                put = client.put(f"{api.url}/connectors/race/config", json=config)
                if put.status_code not in (200, 201, 409):
                    failures.append(f"put {put.status_code}: {put.text}")

    def delete() -> None:
        with httpx.Client(timeout=30) as client:
            while time.monotonic() < stop:
                answer = client.delete(f"{api.url}/connectors/race")
                seen_delete.add(answer.status_code)
                if answer.status_code not in (204, 404, 409):
                    failures.append(f"delete {answer.status_code}: {answer.text}")

    threads = [threading.Thread(target=f) for f in (create, create, delete, delete)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures, failures[:5]
    assert 201 in seen_create and 204 in seen_delete


# -- 14: validation time linear in the number of transforms ----------------------------------


def _routers(tmp_path: Path, n: int) -> dict[str, Any]:
    """`n` RegexRouters: 8,000 of them are 0.9 MB of JSON, under the body limit."""
    config = _source(tmp_path, transforms=",".join(f"t{i}" for i in range(n)))
    for i in range(n):
        config[f"transforms.t{i}.type"] = "RegexRouter"
        config[f"transforms.t{i}.regex"] = f"(.*)_{i}"
        config[f"transforms.t{i}.replacement"] = "$1"
    return config


def test_validation_time_is_linear_in_the_number_of_transforms(api: Served, tmp_path: Path) -> None:
    def validate(n: int) -> float:
        config = _routers(tmp_path, n)
        started = time.monotonic()
        answer = httpx.put(f"{api.url}/connector-plugins/FileSourceConnector/config/validate", json=config, timeout=120)
        assert answer.status_code == 200 and answer.json()["error_count"] == 0, answer.text[:500]
        return time.monotonic() - started

    validate(500)  # warm up
    # 4 times the transforms: linear is 4 times the time, quadratic 16 (the best of 3 of each, as
    # other tests share the 2 cores)
    small = min(validate(1000) for _ in range(3))
    large = min(validate(4000) for _ in range(3))
    assert large / small < 8, (small, large)
    started = time.monotonic()
    created = httpx.post(
        f"{api.url}/connectors", json={"name": "many", "config": _routers(tmp_path, 8000)}, timeout=120
    )
    assert created.status_code == 201, created.text[:500]
    assert time.monotonic() - started < 15  # it was 23-25 s
