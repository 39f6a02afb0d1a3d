"""Errors as Kafka Connect answers them: a status code and `{"error_code": …, "message": …}`."""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from connect_core.runtime.connectors_store import ConnectorExistsError
from connect_core.runtime.runs import TaskBusyError
from connect_core.runtime.security import mask_text
from connect_core.sdk.errors import ConfigError, ConnectError, NotFoundError, RetriableError

__all__ = ["install_error_handlers", "status_of", "validation_message"]

log = logging.getLogger(__name__)


def status_of(exc: Exception) -> int:
    if isinstance(exc, NotFoundError):
        return 404
    if isinstance(exc, ConnectorExistsError | TaskBusyError):
        return 409
    if isinstance(exc, ConfigError):
        return 400
    if isinstance(exc, RetriableError):
        return 503
    if isinstance(exc, ConnectError):
        return 400
    return 500


def validation_message(exc: RequestValidationError) -> str:
    problems = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err.get("loc", ()) if p not in ("body",))
        problems.append(f"{loc or 'body'}: {err.get('msg')}")
    return "Invalid request: " + "; ".join(problems)


def _body(code: int, message: str) -> JSONResponse:
    return JSONResponse(status_code=code, content={"error_code": code, "message": mask_text(message)})


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(ConnectError)
    async def connect_error(_request: Request, exc: ConnectError) -> JSONResponse:
        return _body(status_of(exc), str(exc))

    @app.exception_handler(RequestValidationError)
    async def bad_request(_request: Request, exc: RequestValidationError) -> JSONResponse:
        return _body(400, validation_message(exc))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return _body(exc.status_code, str(exc.detail))

    @app.exception_handler(Exception)
    async def unexpected(_request: Request, exc: Exception) -> JSONResponse:
        log.exception("unexpected error in the REST API")
        return _body(500, f"{type(exc).__name__}: {exc}")
