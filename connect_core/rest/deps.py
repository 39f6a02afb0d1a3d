"""FastAPI dependencies: the service over the app's runtime."""

from __future__ import annotations

from fastapi import Request

from connect_core.rest.service import ConnectService

__all__ = ["service"]


async def service(request: Request) -> ConnectService:
    svc: ConnectService = request.app.state.connect_service()
    return svc
