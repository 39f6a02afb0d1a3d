"""Auth of the REST app when it is served alone (`connect serve`), and the role check of every route.

With a token configured, every request needs `Authorization: Bearer <token>`, and the token says
the caller's role (`connect_core.runtime.security.roles`): CONNECT_REST_TOKEN is the operator's,
CONNECT_REST_CONNECTOR_TOKEN the connector role's, CONNECT_REST_VIEWER_TOKEN the viewer's. Without
any, only loopback clients are served, as operators. Inside Airflow the plugin authenticates with
Airflow's own token check and maps the user's Airflow permissions onto a role
(`connect_core.airflow.roles`).

An auth dependency tells the role by setting `request.state.connect_role`; `route_role` (on every
route, after auth) then refuses with 403, naming the role needed, what the caller's role may not do.
"""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Awaitable, Callable, Mapping

from fastapi import HTTPException, Request

from connect_core.runtime.security.roles import Role, required_role

__all__ = ["bearer_or_loopback", "route_role", "tokens_from_settings"]


def _is_loopback(host: str | None) -> bool:
    if host is None:
        return False
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def tokens_from_settings(settings: object) -> dict[Role, str]:
    """The configured bearer tokens by role (`Settings.rest_token` is the operator's)."""
    found: dict[Role, str] = {}
    for role, field in (
        (Role.operator, "rest_token"),
        (Role.connector, "rest_connector_token"),
        (Role.viewer, "rest_viewer_token"),
    ):
        secret = getattr(settings, field, None)
        value = secret.get_secret_value() if secret is not None else ""
        if value:
            found[role] = value
    if len(set(found.values())) < len(found):
        raise ValueError("two REST roles have the same token: give each role its own (CONNECT_REST_*TOKEN)")
    return found


def bearer_or_loopback(
    token: str | None = None, *, tokens: Mapping[Role, str] | None = None
) -> Callable[[Request], Awaitable[None]]:
    """`token` alone is the operator's (as before roles); `tokens` gives one per role."""
    by_role = {role: value for role, value in (tokens or {}).items() if value}
    if token:
        by_role[Role.operator] = token
    known = [(role, value.encode()) for role, value in by_role.items()]

    async def check(request: Request) -> None:
        if known:
            scheme, _, value = request.headers.get("authorization", "").partition(" ")
            given = value.strip().encode()
            matched = None
            for role, expected in known:  # every token compared, in constant time each
                if hmac.compare_digest(given, expected) and scheme.lower() == "bearer":
                    matched = role
            if matched is None:
                raise HTTPException(status_code=401, detail="a valid `Authorization: Bearer <token>` is required")
            request.state.connect_role = matched
            return
        if not _is_loopback(request.client.host if request.client else None):
            raise HTTPException(
                status_code=403,
                detail="without CONNECT_REST_TOKEN only loopback clients are served; set a token to serve others",
            )
        request.state.connect_role = Role.operator

    return check


async def route_role(request: Request) -> None:
    """403 unless the caller's role (set by the auth before) may call this route. An app whose auth
    sets no role (an embedder's all-or-nothing check) is not judged here."""
    role = getattr(request.state, "connect_role", None)
    route = request.scope.get("route")
    path = getattr(route, "path", None)
    if role is None or path is None:
        return
    needed = required_role(request.method, path, request.query_params)
    if not role.allows(needed):
        raise HTTPException(
            status_code=403,
            detail=f"`{request.method} {path}` needs the `{needed.name}` role; this caller has the `{role.name}` role",
        )
