"""The REST app's edge: what every request passes before any route sees it.

A pure ASGI middleware, so it runs before FastAPI reads or parses anything:

* **Host** (DNS rebinding): the Host header must name this server (the address it is bound
  to, `localhost`, loopback, or `CONNECT_REST_ALLOWED_HOSTS`); otherwise 421.
* **Cross-site browser requests**: a request a browser marks as coming from another site
  (`Sec-Fetch-Site: cross-site|same-site`) or whose `Origin` is not this server's own (nor in
  `CONNECT_REST_ALLOWED_ORIGINS`) is refused with 403, whatever its method — RocketMQ's GET
  routes change state, and a page must not drive them through an `<img>` tag. curl, the CLI
  and other non-browser clients send neither header and are unaffected.
* **Size and shape**: a body over `CONNECT_REST_MAX_BODY_BYTES` is answered 413 at once (by
  its Content-Length, or as soon as a chunked body passes the limit); a JSON body nested
  deeper than `CONNECT_REST_MAX_DEPTH`, or holding a string longer than
  `CONNECT_REST_MAX_VALUE_BYTES`, or a NUL character, is answered 400 naming where.

Errors have Kafka Connect's body: `{"error_code": …, "message": …}`.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from dataclasses import dataclass, field
from typing import Any

from connect_core.runtime.security.limits import ShapeError, check_json_shape
from connect_core.runtime.settings import Settings

__all__ = ["EdgeMiddleware", "EdgePolicy"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

_LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
_SAFE_FETCH_SITES = frozenset({"same-origin", "none"})
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


@dataclass(frozen=True)
class EdgePolicy:
    """The limits and allow-lists of the edge. `allowed_hosts=None` accepts any Host (for an app
    mounted inside another server, Airflow's api-server, whose own configuration decides)."""

    max_body_bytes: int = 1024 * 1024
    max_value_bytes: int = 128 * 1024
    max_depth: int = 32
    allowed_hosts: frozenset[str] | None = _LOOPBACK_NAMES
    allowed_origins: frozenset[str] = field(default_factory=frozenset)

    @classmethod
    def from_settings(cls, settings: Settings, *, bound_to: str | None = "127.0.0.1") -> EdgePolicy:
        """The policy of a server bound to `bound_to` (None: mounted in another server; no Host check)."""
        hosts: frozenset[str] | None = None
        if bound_to is not None:
            extra = _csv(settings.rest_allowed_hosts)
            hosts = None if "*" in extra else _LOOPBACK_NAMES | {bound_to.lower()} | extra | _machine_names(bound_to)
        return cls(
            max_body_bytes=settings.rest_max_body_bytes,
            max_value_bytes=settings.rest_max_value_bytes,
            max_depth=settings.rest_max_depth,
            allowed_hosts=hosts,
            allowed_origins=frozenset(o.rstrip("/") for o in _csv(settings.rest_allowed_origins)),
        )


def _csv(value: str) -> frozenset[str]:
    return frozenset(v.strip().lower() for v in value.split(",") if v.strip())


def _machine_names(bound_to: str) -> frozenset[str]:
    """Bound to every interface, the server also answers to this machine's names and addresses."""
    if bound_to not in ("0.0.0.0", "::", ""):
        return frozenset()
    names = {socket.gethostname().lower(), socket.getfqdn().lower()}
    try:
        names |= set(socket.gethostbyname_ex(socket.gethostname())[2])
    except OSError:
        pass
    return frozenset(names)


class EdgeMiddleware:
    def __init__(self, app: ASGIApp, policy: EdgePolicy) -> None:
        self.app = app
        self.policy = policy

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = _headers(scope)
        refusal = self._refusal(scope, headers)
        if refusal is not None:
            await _answer(send, *refusal)
            return
        if scope["method"] not in _BODY_METHODS:
            await self.app(scope, receive, send)
            return
        declared = headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self.policy.max_body_bytes:
            await _answer(send, 413, self._too_large())
            return
        body = await self._read(receive)
        if body is None:
            await _answer(send, 413, self._too_large())
            return
        problem = self._shape(body, headers)
        if problem is not None:
            await _answer(send, 400, problem)
            return
        await self.app(scope, _replay(body, receive), send)

    # -- who may ask ------------------------------------------------------------

    def _refusal(self, scope: Scope, headers: dict[str, str]) -> tuple[int, str] | None:
        host = headers.get("host", "")
        if self.policy.allowed_hosts is not None and _host_name(host) not in self.policy.allowed_hosts:
            return 421, (
                f"this server does not answer to the Host `{host[:100]}`: add the name to "
                "CONNECT_REST_ALLOWED_HOSTS if it is one of its names"
            )
        site = headers.get("sec-fetch-site")
        origin = headers.get("origin")
        if origin is not None and not self._own_origin(origin, scope, host):
            return 403, (
                f"cross-origin requests from `{origin[:100]}` are refused: add the origin to "
                "CONNECT_REST_ALLOWED_ORIGINS to allow it"
            )
        if site is not None and site not in _SAFE_FETCH_SITES and not self._own_origin(origin, scope, host):
            return 403, "cross-site requests are refused (Sec-Fetch-Site); call the API from its own origin or a client"
        return None

    def _own_origin(self, origin: str | None, scope: Scope, host: str) -> bool:
        if origin is None:
            return False
        origin = origin.rstrip("/").lower()
        if origin in self.policy.allowed_origins:
            return True
        return origin == f"{scope.get('scheme', 'http')}://{host.lower()}"

    # -- what they send -----------------------------------------------------------

    async def _read(self, receive: Receive) -> bytes | None:
        """The whole body, or None as soon as it passes the limit."""
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return b"".join(chunks)
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.policy.max_body_bytes:
                return None
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)

    def _shape(self, body: bytes, headers: dict[str, str]) -> str | None:
        if not body.strip():
            return None
        content_type = headers.get("content-type", "application/json")
        if "json" not in content_type and "text/plain" not in content_type:
            return None
        try:
            value = json.loads(body)
        except RecursionError:
            return f"the request body is nested too deeply (at most {self.policy.max_depth} levels)"
        except ValueError:
            return None  # not JSON: the route answers with the parse error
        try:
            check_json_shape(value, max_depth=self.policy.max_depth, max_value_bytes=self.policy.max_value_bytes)
        except ShapeError as exc:
            return f"the request body is refused: {exc}"
        return None

    def _too_large(self) -> str:
        return f"the request body is larger than {self.policy.max_body_bytes} bytes (CONNECT_REST_MAX_BODY_BYTES)"


def _headers(scope: Scope) -> dict[str, str]:
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", ())}


def _host_name(host: str) -> str:
    """`name:port`, `[::1]:port` → the name, lowercased."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1 : host.find("]")] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def _replay(body: bytes, receive: Receive) -> Receive:
    """The body read already, then the client's own messages (a later disconnect)."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


async def _answer(send: Send, status: int, message: str) -> None:
    payload = json.dumps({"error_code": status, "message": message}).encode()
    headers: Iterable[tuple[bytes, bytes]] = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(payload)).encode()),
        (b"connection", b"close"),
    ]
    await send({"type": "http.response.start", "status": status, "headers": list(headers)})
    await send({"type": "http.response.body", "body": payload})
