"""Probing Spark pools: a probe that answers is the pool's heartbeat.

* `local[…]`: the runner's own machine, alive without probing.
* `spark://host:port` (standalone): the master's JSON status endpoint (its web
  UI's `/json`, `http://host:8080/json` unless the pool names another URL);
  alive when the master is `ALIVE` with at least one alive worker.
* `sc://host:port` (a Spark Connect server): a gRPC handshake with the server.
* anything else with a probe URL (YARN's RM `/ws/v1/cluster/info`, a
  Kubernetes API `/readyz`, …): alive when the URL answers 2xx.
* anything else without one: heartbeats come from outside
  (`connect pools heartbeat NAME`, `POST /pools/NAME/heartbeat`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx

from connect_core.runtime.cluster.pools import PoolInfo, PoolStore
from connect_core.runtime.spark.connect import is_connect_master, public_master, reachable

__all__ = ["ProbeResult", "probe", "probe_all", "probe_one", "probe_url"]

log = logging.getLogger(__name__)

STANDALONE_UI_PORT = 8080


@dataclass(frozen=True)
class ProbeResult:
    pool: str
    ok: bool
    detail: dict[str, Any]


def probe_url(pool: PoolInfo) -> str | None:
    """Where `pool` is probed, or None when it is not probed (local, or heartbeats from outside)."""
    if pool.probe_url:
        return pool.probe_url
    if pool.master.startswith("spark://"):
        first = pool.master.removeprefix("spark://").split(",")[0]
        host = urlsplit(f"//{first}").hostname
        return f"http://{host}:{STANDALONE_UI_PORT}/json" if host else None
    return None


def probe(pool: PoolInfo, client: httpx.Client) -> ProbeResult | None:
    if is_connect_master(pool.master) and not pool.probe_url:
        error = reachable(pool.master, timeout=client.timeout.connect or 2.0)
        found: dict[str, Any] = {"url": public_master(pool.master), **({"error": error} if error else {})}
        return ProbeResult(pool.name, error is None, found)
    url = probe_url(pool)
    if url is None or pool.master.startswith("local"):
        return None
    try:
        resp = client.get(url)
    except httpx.HTTPError as exc:
        return ProbeResult(pool.name, False, {"url": url, "error": f"{type(exc).__name__}: {exc}"})
    if not resp.is_success:
        return ProbeResult(pool.name, False, {"url": url, "error": f"HTTP {resp.status_code}"})
    if not pool.master.startswith("spark://"):
        return ProbeResult(pool.name, True, {"url": url})
    try:
        status = resp.json()
    except ValueError:
        return ProbeResult(pool.name, False, {"url": url, "error": "not a Spark master's JSON status"})
    detail = {
        "url": url,
        "status": status.get("status"),
        "alive_workers": status.get("aliveworkers", 0),
        "cores": status.get("cores", 0),
        "cores_used": status.get("coresused", 0),
        "active_apps": len(status.get("activeapps") or []),
    }
    ok = detail["status"] == "ALIVE" and int(detail["alive_workers"]) > 0
    if not ok:
        detail["error"] = "master not ALIVE" if detail["status"] != "ALIVE" else "no alive worker"
    return ProbeResult(pool.name, ok, detail)


def probe_one(store: PoolStore, pool: PoolInfo, timeout: float = 2.0) -> bool:
    """Probe `pool` now and record it; True when it answered as alive."""
    with httpx.Client(timeout=timeout, follow_redirects=True) as client:
        result = probe(pool, client)
    if result is None:
        return False
    store.record_probe(pool.name, result.ok, result.detail)
    return result.ok


def probe_all(store: PoolStore, heartbeat_timeout: float, timeout: float = 2.0) -> list[ProbeResult]:
    """Probe every probeable pool once and record what each said (a success is a heartbeat)."""
    results = []
    with httpx.Client(timeout=timeout, follow_redirects=True) as client:  # a master redirects /json to /json/
        for pool in store.list(heartbeat_timeout):
            result = probe(pool, client)
            if result is None:
                continue
            if not result.ok and pool.probe.get("ok", True):
                log.warning("Spark pool `%s` failed its probe: %s", pool.name, result.detail.get("error"))
            store.record_probe(pool.name, result.ok, result.detail)
            results.append(result)
    return results
