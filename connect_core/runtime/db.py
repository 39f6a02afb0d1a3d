"""Connecting to the metadata Postgres: a configured server, or the embedded one."""

from __future__ import annotations

import logging
import warnings
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url

from connect_core.runtime.settings import Settings
from connect_core.sdk.errors import RetriableError

__all__ = ["database_url", "make_engine", "masked_url", "normalize_url"]

log = logging.getLogger(__name__)

# The embedded server object must live as long as the process uses it: pgserver
# stops the server when the last process holding a handle exits.
_embedded_servers: dict[str, Any] = {}


def database_url(settings: Settings) -> str:
    """The metadata store's SQLAlchemy URL, starting the embedded Postgres if none is configured."""
    if settings.database_url is not None:
        return normalize_url(settings.database_url.get_secret_value())
    return _embedded_url(settings)


def normalize_url(url: str) -> str:
    """Use psycopg2 for plain `postgresql://` URLs (SQLAlchemy 2.1 would pick psycopg 3)."""
    for plain in ("postgresql://", "postgres://"):
        if url.startswith(plain):
            return "postgresql+psycopg2://" + url[len(plain) :]
    return url


def _embedded_url(settings: Settings) -> str:
    key = str(settings.pgdata)
    if key not in _embedded_servers:
        settings.home.mkdir(parents=True, exist_ok=True)
        log.info("starting embedded Postgres in %s", settings.pgdata)
        try:
            with warnings.catch_warnings():  # platformdirs warns when XDG_RUNTIME_DIR is unset
                warnings.simplefilter("ignore")
                import pgserver  # imported lazily: only the embedded default needs it

                _embedded_servers[key] = pgserver.get_server(settings.pgdata, cleanup_mode="stop")
        except Exception as exc:
            raise RetriableError(
                f"could not start the embedded Postgres in `{settings.pgdata}`: {exc}. "
                "Check the directory is writable, or set CONNECT_DATABASE_URL to use a server."
            ) from exc
    return normalize_url(_embedded_servers[key].get_uri())


def masked_url(url: str) -> str:
    """The URL with its password hidden, for logs and messages."""
    return make_url(url).render_as_string(hide_password=True)


def make_engine(url: str, **kwargs: Any) -> Engine:
    """An engine for the metadata store; every connection uses UTC and a short lock timeout."""
    engine = create_engine(normalize_url(url), pool_pre_ping=True, future=True, **kwargs)

    @event.listens_for(engine, "connect")
    def _session_settings(dbapi_conn: Any, _record: Any) -> None:
        with dbapi_conn.cursor() as cur:
            cur.execute("SET TIME ZONE 'UTC'")
            cur.execute("SET application_name = 'connect_core'")

    return engine
