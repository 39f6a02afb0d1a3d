"""Benches' HTTP servers: a process of its own on a free loopback port, ready once it answers."""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence

import httpx

__all__ = ["free_port", "start_http"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_http(
    argv: Callable[[int], Sequence[str]], probe: str = "/", env: Mapping[str, str] | None = None, timeout: float = 60
) -> tuple[subprocess.Popen[bytes], str]:
    """Start `argv(port)`; the process and its base URL once `probe` answers (it is killed if it never does)."""
    port = free_port()
    server = subprocess.Popen(list(argv(port)), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout
    while True:
        try:
            httpx.get(f"{base}{probe}", timeout=1)
            return server, base
        except httpx.HTTPError:
            if time.monotonic() > deadline:
                server.terminate()
                raise
            time.sleep(0.2)
