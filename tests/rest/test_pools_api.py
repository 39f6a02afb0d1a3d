"""Spark pools over real HTTP: registry, health, rebalance, and RocketMQ's cluster views."""

from __future__ import annotations

from pathlib import Path

import httpx

from connect_core.runtime.context import Runtime
from tests.conftest import file_pair
from tests.rest.conftest import Served


def test_pool_registry_and_cluster_views(api: Served, runtime: Runtime, tmp_path: Path) -> None:
    url = api.url
    spec = {
        "master": "spark://127.0.0.1:7077",
        "capacity": 3,
        "conf": {"spark.executor.memory": "1g", "spark.hadoop.fs.s3a.secret.key": "s3cr3t"},
        "labels": {"zone": "a"},
        "probe_url": "http://127.0.0.1:9/json",  # nothing listens there: the probe fails
    }
    created = httpx.put(f"{url}/pools/east", json=spec)
    assert created.status_code == 201
    assert created.json()["conf"] == {"spark.executor.memory": "1g", "spark.hadoop.fs.s3a.secret.key": "********"}
    assert httpx.put(f"{url}/pools/east", json={**spec, "capacity": 1}).status_code == 200
    assert httpx.get(f"{url}/pools/east").json()["capacity"] == 1
    assert [p["name"] for p in httpx.get(f"{url}/pools").json()] == ["east", "local"]
    assert "s3cr3t" not in httpx.get(f"{url}/pools").text

    file_pair(runtime, tmp_path)  # placed at creation: the sticky default spreads 4 items over both pools
    info = {w["workerId"]: w for w in httpx.get(f"{url}/getClusterInfo").json()["body"]}
    assert set(info) == {"east", "local"}
    assert sorted(info["east"]["allocated"] + info["local"]["allocated"]) == sorted(
        ["fileSinkConnector", "fileSinkConnector-0", "fileSourceConnector", "fileSourceConnector-0"]
    )
    east_tasks = httpx.get(f"{url}/allocated/tasks", params={"pool": "east"}).json()["body"]
    assert sum(len(v) for v in east_tasks.values()) == sum(1 for a in info["east"]["allocated"] if a[-2:] == "-0")

    # east never answers its probe; once its heartbeat is older than the timeout, a rebalance moves its work.
    with runtime.engine.begin() as conn:
        from sqlalchemy import text

        conn.execute(text("UPDATE connect.spark_pools SET heartbeat_at = now() - interval '1 hour' WHERE name='east'"))
    result = httpx.post(f"{url}/rebalance", json={"strategy": "sticky"}).json()
    assert result["reason"] == "pool east lost" and result["moved"] == len(info["east"]["allocated"])
    east = httpx.get(f"{url}/pools/east").json()
    assert east["alive"] is False and east["probe"]["ok"] is False and east["running"] == []
    assert "ConnectError" in east["probe"]["error"] or "Connect" in east["probe"]["error"]
    (latest, *_) = httpx.get(f"{url}/rebalances", params={"limit": 1}).json()
    assert latest["reason"] == "pool east lost" and latest["moved"] == result["moved"]
    assert {m["from"] for m in latest["moves"]} == {"east"} and {m["to"] for m in latest["moves"]} == {"local"}

    # a pool nobody probes stays alive through heartbeats
    assert httpx.put(f"{url}/pools/yarn1", json={"master": "yarn"}).status_code == 201
    assert httpx.post(f"{url}/pools/yarn1/heartbeat").status_code == 204
    assert httpx.delete(f"{url}/pools/yarn1").status_code == 204
    assert httpx.delete(f"{url}/pools/yarn1").status_code == 404


def test_bad_pool_specs_are_400_with_every_problem(api: Served) -> None:
    resp = httpx.put(f"{api.url}/pools/x", json={"capacity": 0, "probe_url": 5, "extra": 1})
    assert resp.status_code == 400
    message = resp.json()["message"]
    for field in ("master", "capacity", "probe_url", "extra"):
        assert field in message, message
    bad_name = httpx.put(f"{api.url}/pools/a%20b", json={"master": "local[1]"})
    assert bad_name.status_code == 400 and "invalid pool name" in bad_name.json()["message"]
    bad_probe = httpx.put(f"{api.url}/pools/x", json={"master": "yarn", "probe_url": "ftp://x"})
    assert bad_probe.status_code == 400 and "probe URL" in bad_probe.json()["message"]
    assert httpx.post(f"{api.url}/rebalance", json={"strategy": "random"}).status_code == 400
    assert httpx.get(f"{api.url}/pools/nope").status_code == 404
