"""A real HTTP server (uvicorn on a free loopback port) serving the REST app over the test's store."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import uvicorn

from connect_core.rest.app import create_app
from connect_core.rest.auth import bearer_or_loopback
from connect_core.runtime.context import Runtime


class Served:
    def __init__(self, url: str) -> None:
        self.url = url


def serve(app: Any) -> Iterator[Served]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.05)
    yield Served(f"http://127.0.0.1:{port}")
    server.should_exit = True
    thread.join(timeout=10)


@pytest.fixture
def make_api(runtime: Runtime) -> Iterator[Callable[..., Served]]:
    servers: list[Iterator[Served]] = []

    def start(token: str | None = None) -> Served:
        gen = serve(create_app(lambda: runtime, auth=[bearer_or_loopback(token)]))
        servers.append(gen)
        return next(gen)

    yield start
    for gen in servers:
        next(gen, None)


@pytest.fixture
def api(make_api: Callable[..., Served]) -> Served:
    return make_api()
