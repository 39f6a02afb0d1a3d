"""Auth of the REST app when it is served alone (`connect serve`).

With a token configured (CONNECT_REST_TOKEN), every request needs
`Authorization: Bearer <token>`. Without one, only loopback clients are
served. Inside Airflow the plugin uses Airflow's own token check instead
(`connect_core.airflow.rest_auth`).
"""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Awaitable, Callable

from fastapi import HTTPException, Request

__all__ = ["bearer_or_loopback"]


def _is_loopback(host: str | None) -> bool:
    if host is None:
        return False
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def bearer_or_loopback(token: str | None) -> Callable[[Request], Awaitable[None]]:
    async def check(request: Request) -> None:
        if token:
            given = request.headers.get("authorization", "")
            scheme, _, value = given.partition(" ")
            if scheme.lower() != "bearer" or not hmac.compare_digest(value.strip().encode(), token.encode()):
                raise HTTPException(status_code=401, detail="a valid `Authorization: Bearer <token>` is required")
            return
        if not _is_loopback(request.client.host if request.client else None):
            raise HTTPException(
                status_code=403,
                detail="without CONNECT_REST_TOKEN only loopback clients are served; set a token to serve others",
            )

    return check
