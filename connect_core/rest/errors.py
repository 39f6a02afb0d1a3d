"""Errors as Kafka Connect answers them: a status code and `{"error_code": …, "message": …}`.

`answer_for` decides, for any exception, the status, the message and the headers, once for
both dialects (Kafka's body here, RocketMQ's envelope in `rocketmq.py`):

* the SDK's errors by their class (404, 409, 400, 503);
* a metadata store that cannot be reached or did not answer in time: 503 with `Retry-After`
  and a message naming the store, never the driver's text (it quotes SQL, values and the
  server's address);
* a concurrent change that won (deadlock, lock timeout, unique key): 409, as Kafka Connect
  answers during a rebalance;
* input nested past what a recursive parser follows (RecursionError): 400, logged as one line;
* anything else: 500 with a generic message and an id that is in the server log with the
  traceback. Exception text is never echoed: it can hold SQL, values and secrets.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field

import psycopg2
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import SQLAlchemyError
from starlette.exceptions import HTTPException as StarletteHTTPException

from connect_core.runtime.cluster.runs import TaskBusyError
from connect_core.runtime.security import mask_text
from connect_core.runtime.store import db
from connect_core.runtime.store.db import check_storable
from connect_core.sdk.errors import ConflictError, ConnectError, NotFoundError, RetriableError

__all__ = [
    "RETRY_AFTER_SECONDS",
    "WARNING_HEADER",
    "ErrorAnswer",
    "answer_for",
    "install_error_handlers",
    "status_of",
    "storable_params",
    "validation_message",
    "warned",
]

log = logging.getLogger(__name__)

#: What a 503 asks the client to wait. The engine re-checks a pooled connection before each use
#: (pre-ping) and the change listener reconnects every 5 s, so a retry this much later sees a
#: store that came back.
RETRY_AFTER_SECONDS = 5

_STORE_ANSWERS = {
    db.UNAVAILABLE: (503, "The metadata store (Postgres) is unavailable; retry in a few seconds."),
    db.TIMEOUT: (503, "The metadata store (Postgres) did not answer in time; retry in a few seconds."),
    db.CONFLICT: (409, "The request conflicted with a concurrent change; read the current state and retry."),
    db.INVALID: (400, "A value in the request cannot be stored (out of range or not valid text)."),
}


#: A response header with what went only half well (a connector paused whose DAG Airflow did not
#: pause): Kafka's answers have no body for it, and its clients ignore headers they do not know.
WARNING_HEADER = "Connect-Warning"
_WARNING_CHARS = 500


def warned(warning: str | None) -> dict[str, str]:
    """The headers carrying `warning` (masked, on one line of printable ASCII), none without one."""
    if not warning:
        return {}
    text = " ".join(mask_text(warning).split())
    text = text.encode("ascii", "backslashreplace").decode("ascii")
    return {WARNING_HEADER: text if len(text) <= _WARNING_CHARS else text[: _WARNING_CHARS - 3] + "..."}


@dataclass(frozen=True)
class ErrorAnswer:
    status: int
    message: str
    headers: dict[str, str] = field(default_factory=dict)


def status_of(exc: Exception) -> int:
    return answer_for(exc).status


def answer_for(exc: BaseException) -> ErrorAnswer:
    """The status, message (masked) and headers that `exc` answers with, in either dialect."""
    if isinstance(exc, ConnectError) and not isinstance(exc, RetriableError):
        return ErrorAnswer(_status_of_connect_error(exc), mask_text(str(exc)))
    fault = db.store_fault(exc)
    if fault is not None:  # also a RetriableError raised from a driver error: its text quotes the driver
        status, message = _STORE_ANSWERS[fault]
        if status >= 500:
            log.warning("metadata store %s: %s", fault, type(exc).__name__)
        return _with_retry(ErrorAnswer(status, message))
    if isinstance(exc, RetriableError):
        return _with_retry(ErrorAnswer(503, mask_text(str(exc))))
    if isinstance(exc, RecursionError):
        # Input nested past what a recursive parser can follow (a config value the edge limits let
        # through): the caller's to fix. One line: its traceback would run to thousands.
        log.warning("a request nested too deeply to process: %s", type(exc).__name__)
        return ErrorAnswer(400, "The request is nested too deeply to process: simplify it (fewer nested levels).")
    error_id = uuid.uuid4().hex[:12]
    log.error("unexpected error %s in the REST API", error_id, exc_info=exc)
    return ErrorAnswer(500, f"Internal server error (id `{error_id}`); the server log has the details.")


def _status_of_connect_error(exc: ConnectError) -> int:
    if isinstance(exc, NotFoundError):
        return 404
    if isinstance(exc, ConflictError | TaskBusyError):
        return 409
    return 400  # ConfigError and the other errors a caller can fix


def _with_retry(answer: ErrorAnswer) -> ErrorAnswer:
    if answer.status != 503:
        return answer
    return ErrorAnswer(answer.status, answer.message, {**answer.headers, "Retry-After": str(RETRY_AFTER_SECONDS)})


def validation_message(exc: RequestValidationError) -> str:
    problems = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err.get("loc", ()) if p not in ("body",))
        problems.append(f"{loc or 'body'}: {err.get('msg')}")
    return "Invalid request: " + "; ".join(problems)


async def storable_params(request: Request) -> None:
    """A route dependency: path and query parameters the metadata store could not hold (a `%00`)
    answer 400 naming the parameter, before any route looks them up."""
    for kind, params in (("path parameter", request.path_params), ("query parameter", request.query_params)):
        for key, value in params.items():
            check_storable(key, kind)
            check_storable(value, f"{kind} `{key}`")


def _body(answer: ErrorAnswer) -> JSONResponse:
    return JSONResponse(
        status_code=answer.status,
        content={"error_code": answer.status, "message": answer.message},
        headers=answer.headers,
    )


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(ConnectError)
    async def connect_error(_request: Request, exc: ConnectError) -> JSONResponse:
        return _body(answer_for(exc))

    @app.exception_handler(RequestValidationError)
    async def bad_request(_request: Request, exc: RequestValidationError) -> JSONResponse:
        return _body(ErrorAnswer(400, mask_text(validation_message(exc))))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return _body(ErrorAnswer(exc.status_code, mask_text(str(exc.detail)), dict(exc.headers or {})))

    async def store_error(_request: Request, exc: Exception) -> JSONResponse:
        return _body(answer_for(exc))

    # Database errors get their own handlers: the catch-all below runs in Starlette's outermost
    # middleware, which logs a traceback per request (every request, while the store is down).
    app.add_exception_handler(SQLAlchemyError, store_error)
    app.add_exception_handler(psycopg2.Error, store_error)
    # Likewise a RecursionError: a 400 (`answer_for`), with no traceback logged by the middleware.
    app.add_exception_handler(RecursionError, store_error)

    @app.exception_handler(Exception)
    async def unexpected(_request: Request, exc: Exception) -> JSONResponse:
        return _body(answer_for(exc))
