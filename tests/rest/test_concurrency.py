"""Two admins clicking at once: concurrent creates and config changes over real HTTP answer 2xx or 409, never 500,
and lose nothing."""

from __future__ import annotations

from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

from tests.rest.conftest import Served

PARALLEL = 50


def _config(tmp_path: Path, **extra: object) -> dict[str, Any]:
    return {"connector.class": "FileSourceConnector", "file": str(tmp_path / "in.txt"), "topic": "t", **extra}


def _in_parallel(calls: list[Any]) -> list[httpx.Response]:
    with httpx.Client(timeout=60) as client, ThreadPoolExecutor(PARALLEL) as pool:
        return list(pool.map(lambda call: call(client), calls))


def test_parallel_creates_of_one_name_answer_one_201_and_409s(api: Served, tmp_path: Path) -> None:
    body = {"name": "same", "config": _config(tmp_path)}
    answers = _in_parallel([lambda c: c.post(f"{api.url}/connectors", json=body)] * PARALLEL)

    codes = Counter(r.status_code for r in answers)
    assert codes == {201: 1, 409: PARALLEL - 1}, [r.text for r in answers if r.status_code not in (201, 409)]
    assert all("already exists" in r.json()["message"] for r in answers if r.status_code == 409)
    assert httpx.get(f"{api.url}/connectors").json() == ["same"]


def test_parallel_creates_of_different_names_all_succeed(api: Served, tmp_path: Path) -> None:
    # A pool to place work on: each create's rebalance then rewrites assignments and fences tasks.
    httpx.put(f"{api.url}/pools/local", json={"master": "local[2]", "capacity": 1000}).raise_for_status()
    calls = [
        (lambda c, i=i: c.post(f"{api.url}/connectors", json={"name": f"c{i}", "config": _config(tmp_path)}))
        for i in range(PARALLEL)
    ]
    answers = _in_parallel(calls)

    assert Counter(r.status_code for r in answers) == {201: PARALLEL}, [r.text for r in answers if r.status_code != 201]
    assert sorted(httpx.get(f"{api.url}/connectors").json()) == sorted(f"c{i}" for i in range(PARALLEL))
    # Every connector and its task were placed by the rebalances that followed the creates.
    assert len(httpx.get(f"{api.url}/pools/local").json()["running"]) == 2 * PARALLEL


def test_parallel_patches_each_adding_a_key_lose_none(api: Served, tmp_path: Path) -> None:
    httpx.post(f"{api.url}/connectors", json={"name": "src", "config": _config(tmp_path)}).raise_for_status()
    calls = [
        (lambda c, i=i: c.patch(f"{api.url}/connectors/src/config", json={f"extra.{i}": str(i)}))
        for i in range(PARALLEL)
    ]
    answers = _in_parallel(calls)

    assert {r.status_code for r in answers} <= {200, 409}, [r.text for r in answers if r.status_code not in (200, 409)]
    applied = {f"extra.{i}" for i, r in enumerate(answers) if r.status_code == 200}
    config = httpx.get(f"{api.url}/connectors/src/config").json()
    assert applied <= set(config), f"lost {len(applied - set(config))} acknowledged key(s)"
    assert len(applied) == PARALLEL  # a row lock serializes them: none needs a retry


def test_parallel_puts_and_patches_keep_a_consistent_config(api: Served, tmp_path: Path) -> None:
    httpx.post(f"{api.url}/connectors", json={"name": "src", "config": _config(tmp_path)}).raise_for_status()
    calls = [
        (
            (lambda c, i=i: c.put(f"{api.url}/connectors/src/config", json=_config(tmp_path, **{"put.n": str(i)})))
            if i % 2
            else (lambda c, i=i: c.patch(f"{api.url}/connectors/src/config", json={f"patch.{i}": "x"}))
        )
        for i in range(20)
    ]
    answers = _in_parallel(calls)

    assert {r.status_code for r in answers} <= {200, 409}, [r.text for r in answers if r.status_code >= 300]
    info = httpx.get(f"{api.url}/connectors/src").json()
    assert info["tasks"] == [{"connector": "src", "task": 0}]


def test_mixed_concurrent_changes_never_answer_5xx(api: Served, tmp_path: Path) -> None:
    """Creates, deletes, config changes, pauses and rebalances of a few connectors at once: each
    waits for the others (no deadlock, no foreign-key race between a delete and a rebalance)."""
    httpx.put(f"{api.url}/pools/local", json={"master": "local[2]", "capacity": 1000}).raise_for_status()
    url = api.url

    def op(i: int) -> Any:
        name = f"m{i % 4}"
        kind = i % 7
        if kind == 0:
            return lambda c: c.post(f"{url}/connectors", json={"name": name, "config": _config(tmp_path)})
        if kind == 1:
            return lambda c: c.delete(f"{url}/connectors/{name}")
        if kind == 2:
            return lambda c: c.patch(f"{url}/connectors/{name}/config", json={f"k{i}": "v", "tasks.max": "2"})
        if kind == 3:
            return lambda c: c.put(f"{url}/connectors/{name}/config", json=_config(tmp_path))
        if kind == 4:
            return lambda c: c.put(f"{url}/connectors/{name}/pause")
        if kind == 5:
            return lambda c: c.post(f"{url}/rebalance", json={"strategy": "default"})
        return lambda c: c.get(f"{url}/connectors/{name}/status")

    answers = _in_parallel([op(i) for i in range(4 * PARALLEL)])

    failures = [(r.request.method, r.request.url.path, r.status_code, r.text) for r in answers if r.status_code >= 500]
    assert failures == []
    assert {r.status_code for r in answers} <= {200, 201, 202, 204, 404, 409}
