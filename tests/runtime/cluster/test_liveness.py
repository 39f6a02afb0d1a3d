"""Pool probes over real HTTP on loopback: what counts as alive, and a probe is a heartbeat."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest
from sqlalchemy import text

from connect_core.runtime.cluster.liveness import probe, probe_all, probe_url
from connect_core.runtime.cluster.pools import PoolInfo
from connect_core.runtime.context import Runtime

ANSWERS: dict[str, tuple[int, bytes]] = {}


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        if self.path == "/json":  # as a standalone master does
            self.send_response(302)
            self.send_header("Location", "/json/")
            self.end_headers()
            return
        code, body = ANSWERS.get(self.path, (404, b"no"))
        self.send_response(code)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


def _pool(master: str, url: str | None = None) -> PoolInfo:
    return PoolInfo("p", master, {}, 1, {}, True, 0.0, url)


def _master(status: str, workers: int) -> bytes:
    return json.dumps({"status": status, "aliveworkers": workers, "cores": workers, "coresused": 0}).encode()


def test_where_pools_are_probed() -> None:
    assert probe_url(_pool("spark://m1:7077,m2:7077")) == "http://m1:8080/json"
    assert probe_url(_pool("spark://10.0.0.1:7077", "http://10.0.0.1:18080/json")) == "http://10.0.0.1:18080/json"
    assert probe_url(_pool("yarn")) is None and probe_url(_pool("local[2]")) is None


def test_a_standalone_master_is_alive_only_with_an_alive_worker(server: str) -> None:
    with httpx.Client(follow_redirects=True, timeout=2) as client:
        ANSWERS["/json/"] = (200, _master("ALIVE", 1))
        ok = probe(_pool("spark://127.0.0.1:7077", f"{server}/json"), client)
        assert ok is not None and ok.ok and ok.detail["alive_workers"] == 1
        ANSWERS["/json/"] = (200, _master("ALIVE", 0))
        no_worker = probe(_pool("spark://127.0.0.1:7077", f"{server}/json"), client)
        assert no_worker is not None and not no_worker.ok and no_worker.detail["error"] == "no alive worker"
        ANSWERS["/json/"] = (200, _master("STANDBY", 2))
        standby = probe(_pool("spark://127.0.0.1:7077", f"{server}/json"), client)
        assert standby is not None and not standby.ok
        ANSWERS["/json/"] = (200, b"<html>not json</html>")
        garbage = probe(_pool("spark://127.0.0.1:7077", f"{server}/json"), client)
        assert garbage is not None and not garbage.ok


def test_other_pools_are_alive_when_their_url_answers_2xx(server: str) -> None:
    with httpx.Client(follow_redirects=True, timeout=2) as client:
        ANSWERS["/readyz"] = (200, b"ok")
        assert probe(_pool("k8s://https://127.0.0.1:6443", f"{server}/readyz"), client).ok  # type: ignore[union-attr]
        ANSWERS["/readyz"] = (503, b"not ready")
        failed = probe(_pool("k8s://https://127.0.0.1:6443", f"{server}/readyz"), client)
        assert failed is not None and failed.detail["error"] == "HTTP 503"
        assert probe(_pool("local[*]"), client) is None and probe(_pool("yarn"), client) is None


def test_a_probe_that_answers_is_a_heartbeat(runtime: Runtime, server: str) -> None:
    ANSWERS["/json/"] = (200, _master("ALIVE", 1))
    runtime.pools.add("up", "spark://127.0.0.1:7077", probe_url=f"{server}/json")
    runtime.pools.add("down", "spark://127.0.0.1:7078", probe_url="http://127.0.0.1:9/json")
    with runtime.engine.begin() as conn:
        conn.execute(text("UPDATE connect.spark_pools SET heartbeat_at = now() - interval '1 hour'"))
    results = {r.pool: r.ok for r in probe_all(runtime.pools, heartbeat_timeout=60)}
    assert results == {"up": True, "down": False}  # `local` is not probed
    alive = {p.name: p.alive for p in runtime.pools.list(heartbeat_timeout=60)}
    assert alive == {"up": True, "down": False, "local": True}
