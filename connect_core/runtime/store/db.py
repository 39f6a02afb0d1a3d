"""Connecting to the metadata Postgres: a configured server, or the embedded one."""

from __future__ import annotations

import logging
import math
import warnings
from typing import Any
from urllib.parse import quote

import psycopg2
import psycopg2.errors
import psycopg2.extensions
from sqlalchemy import Engine, create_engine, event
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import make_url

from connect_core.runtime.security.limits import one_line
from connect_core.runtime.security.urls import URL_MASK, mask_url_credentials, url_passwords
from connect_core.runtime.settings import Settings
from connect_core.sdk.errors import ConfigError, RetriableError

__all__ = [
    "CONFLICT",
    "INVALID",
    "TIMEOUT",
    "UNAVAILABLE",
    "check_database_url",
    "check_storable",
    "connect_failure",
    "connect_wait",
    "database_url",
    "make_engine",
    "masked_url",
    "normalize_url",
    "refusal_fix",
    "store_fault",
    "unstorable",
    "url_secrets",
]

log = logging.getLogger(__name__)

# The embedded server object must live as long as the process uses it: pgserver
# stops the server when the last process holding a handle exits.
_embedded_servers: dict[str, Any] = {}


def database_url(settings: Settings) -> str:
    """The metadata store's SQLAlchemy URL, starting the embedded Postgres if none is configured."""
    if settings.database_url is not None:
        url = settings.database_url.get_secret_value()
        check_database_url(url)
        return normalize_url(url)
    return _embedded_url(settings)


_URL_FIX = "set it to postgresql://user:password@host:5432/dbname (or unset it: the embedded Postgres)"


def check_database_url(url: str) -> None:
    """Raise a one-line ConfigError when `url` (CONNECT_DATABASE_URL) is not a PostgreSQL URL that libpq
    accepts, before anything connects: the metadata store is PostgreSQL only."""
    shown = masked_url(url)
    try:
        parsed = make_url(normalize_url(url))
    except ValueError as exc:  # a port that is not a number
        raise ConfigError(
            f"CONNECT_DATABASE_URL is not a database URL ({shown}: its port is not a number); {_URL_FIX}"
        ) from exc
    except sa_exc.ArgumentError as exc:  # not shown: a string that is no URL may be all secret
        raise ConfigError(f"CONNECT_DATABASE_URL is not a database URL; {_URL_FIX}") from exc
    if parsed.get_backend_name() != "postgresql":
        raise ConfigError(
            f"CONNECT_DATABASE_URL {shown} is a {one_line(parsed.get_backend_name())} URL, and the metadata "
            f"store is PostgreSQL only; {_URL_FIX}"
        )
    if "@" in (parsed.host or ""):
        raise ConfigError(f"CONNECT_DATABASE_URL {shown} has an `@` in its password; write it as %40 in the URL")
    if parsed.port is not None and not 1 <= parsed.port <= 65535:
        raise ConfigError(f"CONNECT_DATABASE_URL {shown} has port {parsed.port}, not 1-65535; {_URL_FIX}")
    try:  # libpq's own check of the options (an unknown query parameter, a bad value): no connection
        psycopg2.extensions.parse_dsn(parsed.set(drivername="postgresql").render_as_string(hide_password=False))
    except psycopg2.ProgrammingError as exc:
        reason = str(exc).strip().splitlines()[0].removeprefix("invalid dsn: ") if str(exc).strip() else ""
        for secret in url_secrets(url):
            reason = reason.replace(secret, URL_MASK)
        raise ConfigError(
            f"CONNECT_DATABASE_URL {shown} is not a URL libpq accepts: {one_line(reason)}; {_URL_FIX}"
        ) from exc


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
    """The URL with its password hidden, for logs and messages, on one line: the userinfo's and a
    `password` or `sslpassword` query parameter's; one that does not parse is shown without its query.

    The userinfo is masked up to the authority's last `@` first (`mask_url_credentials`): a password
    with an unencoded `@` would otherwise be cut at its first one, and the rest shown as the host."""
    url = mask_url_credentials(url)
    try:
        parsed = make_url(url)
        secret = {key: URL_MASK for key in parsed.query if "password" in key.lower()}
        shown = parsed.update_query_dict(secret).render_as_string(hide_password=True)
    except (sa_exc.ArgumentError, ValueError):  # ValueError: a port that is not a number
        return one_line(_mask_password_pairs(url.partition("?")[0]))
    return one_line(shown.replace(quote(URL_MASK, safe=""), URL_MASK))


def _mask_password_pairs(text: str) -> str:
    """`text` with the value of every `…password=value` pair masked: libpq's `key=value` form
    (`host=h password='a b'`), which is no URL. A plain scan: linear in the length of `text`."""
    out: list[str] = []
    lowered, start = text.lower(), 0
    while (found := lowered.find("password", start)) >= 0:
        value = found + len("password")
        while value < len(text) and text[value] == " ":
            value += 1
        if value >= len(text) or text[value] != "=":
            out.append(text[start:value])
            start = value
            continue
        value += 1
        while value < len(text) and text[value] == " ":
            value += 1
        end = value
        if end < len(text) and text[end] == "'":  # quoted: up to the closing quote, `\'` inside
            end += 1
            while end < len(text) and text[end] != "'":
                end += 2 if text[end] == "\\" else 1
            end = min(end + 1, len(text))
        else:
            while end < len(text) and not text[end].isspace() and text[end] != "&":
                end += 1
        out.append(text[start:value] + URL_MASK)
        start = end
    out.append(text[start:])
    return "".join(out)


def url_secrets(url: str) -> list[str]:
    """The secrets of a database URL that a driver's message may echo: the userinfo's password (and,
    when it holds an unencoded `@`, each part of it: a parser that cut it at the first `@` shows the
    rest as the host), and the value of every `…password=` query parameter; longest first."""
    found: set[str] = set()
    for password in url_passwords(url):
        found.add(password)
        found.update(part for part in password.split("@") if len(part) > 1)
    query = url.partition("?")[2]
    for pair in query.split("&"):
        key, _eq, value = pair.partition("=")
        if "password" in key.lower() and value:
            found.add(value)
    return sorted(found, key=len, reverse=True)


def connect_failure(exc: BaseException, url: str | None = None) -> str | None:
    """Why a connection to Postgres failed, in one line (libpq's first line, without its `connection to
    server at … failed:` preamble, control characters escaped), if `exc` is or was caused by a failed
    connection; else None. With the `url` that was connected to, its secrets are masked in the reason
    (libpq echoes the host, which may hold the tail of a password)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, psycopg2.OperationalError) and current.pgcode is None:
            first = next((" ".join(line.split()) for line in str(current).splitlines() if line.strip()), "")
            reason = first.partition(" failed: ")[2] if first.startswith("connection to server") else first
            for secret in url_secrets(url) if url else ():
                reason = reason.replace(secret, URL_MASK)
            return one_line(reason) or type(current).__name__
        current = current.__cause__ or current.__context__
    return None


def connect_wait(connect_timeout: float) -> int:
    """How long libpq really waits for a connection given `connect_timeout` (CONNECT_DB_CONNECT_TIMEOUT):
    whole seconds, at least 2 (libpq's own minimum)."""
    return max(2, math.ceil(connect_timeout))


# What the server says when it answered and refused, and what to do about it; the first match wins.
_REFUSALS = (
    (
        ("starting up", "shutting down", "not currently accepting", "in recovery mode", "too many clients"),
        "the server is up but not taking connections now: wait for it and run again, or check its state",
    ),
    (
        ("does not exist", "authentication failed", "pg_hba.conf", "not permitted to log in", "permission denied"),
        "fix the user, password or database name in CONNECT_DATABASE_URL",
    ),
)


def refusal_fix(reason: str) -> str:
    """What to do when the server refused a connection for `reason` (its FATAL message)."""
    lowered = reason.lower()
    for signs, fix in _REFUSALS:
        if any(sign in lowered for sign in signs):
            return fix
    return "check the server's log, and CONNECT_DATABASE_URL"


_DEFAULT_CONNECT_TIMEOUT: float = Settings.model_fields["db_connect_timeout"].default
_DEFAULT_STATEMENT_TIMEOUT: float = Settings.model_fields["db_statement_timeout"].default


def make_engine(
    url: str,
    *,
    connect_timeout: float = _DEFAULT_CONNECT_TIMEOUT,
    statement_timeout: float = _DEFAULT_STATEMENT_TIMEOUT,
    **kwargs: Any,
) -> Engine:
    """An engine for the metadata store whose every wait is bounded.

    A connection attempt gives up after `connect_timeout` (libpq's `connect_timeout`; waiting for a
    pooled connection too), a statement after `statement_timeout` (0: unbounded), a wait for another
    transaction's lock after half of it, so that a lock conflict surfaces as such rather than as a
    statement timeout. TCP keepalives and `tcp_user_timeout` notice a server that vanished from the
    network (a stopped server closes its sockets, which is noticed at once). Every connection uses UTC,
    and no JIT.
    """
    connect_args = dict(kwargs.pop("connect_args", {}))
    connect_args.setdefault("connect_timeout", connect_wait(connect_timeout))
    connect_args.setdefault("keepalives", 1)
    connect_args.setdefault("keepalives_idle", 10)
    connect_args.setdefault("keepalives_interval", 5)
    connect_args.setdefault("keepalives_count", 3)
    if statement_timeout > 0:
        connect_args.setdefault("tcp_user_timeout", int(statement_timeout * 1000))
    kwargs.setdefault("pool_timeout", connect_timeout)
    engine = create_engine(normalize_url(url), pool_pre_ping=True, connect_args=connect_args, **kwargs)
    statement_ms = int(statement_timeout * 1000)
    lock_ms = statement_ms // 2

    @event.listens_for(engine, "connect")
    def _session_settings(dbapi_conn: Any, _record: Any) -> None:
        with dbapi_conn.cursor() as cur:
            cur.execute("SET TIME ZONE 'UTC'")
            cur.execute("SET application_name = 'connect_core'")
            cur.execute(f"SET statement_timeout = {statement_ms}")
            cur.execute(f"SET lock_timeout = {lock_ms}")
            cur.execute("SET jit = off")  # short OLTP queries: JIT compiling costs ~20 ms and saves nothing
        dbapi_conn.commit()  # SET inside psycopg2's implicit transaction: keep it past a later rollback

    return engine


def unstorable(value: Any) -> tuple[tuple[str | int, ...], str] | None:
    """Where in `value` (a JSON-like value) Postgres would refuse it, and why; None if it can be stored.

    Postgres `text` and `jsonb` cannot hold a NUL character, UTF-8 has no unpaired surrogate
    (JSON's `\\ud800`) and JSON has no NaN or Infinity (Python's json accepts them). The answer is the
    path of keys (and list indices) down to the first offending key or value. Iterative and linear: a hostile body
    cannot make it recurse or backtrack.
    """
    stack: list[tuple[tuple[str | int, ...], Any]] = [((), value)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, str):
            why = _unstorable_text(item)
            if why:
                return path, why
        elif isinstance(item, float) and not math.isfinite(item):
            return path, "a number JSON cannot represent (NaN or Infinity)"
        elif isinstance(item, dict):
            for key, child in reversed(item.items()):
                key_text = str(key)
                why = _unstorable_text(key_text)
                if why:
                    return (*path, key_text), f"a key with {why}"
                stack.append(((*path, key_text), child))
        elif isinstance(item, list | tuple):
            stack.extend(((*path, i), child) for i, child in reversed(list(enumerate(item))))
    return None


def _unstorable_text(text: str) -> str | None:
    if "\x00" in text:
        return "a NUL character (\\u0000)"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "an unpaired surrogate (not valid Unicode)"
    return None


def check_storable(value: Any, what: str) -> None:
    """Raise a ConfigError (400) naming the key of `value` the metadata store cannot hold.

    `what` names the value: "connector name", "config", "offsets" …
    """
    found = unstorable(value)
    if found is None:
        return
    path, why = found
    where = "".join(f"[{p}]" if isinstance(p, int) else f".{_printable(p)}" for p in path).lstrip(".")
    subject = f"{what} key `{where}`" if where else what
    raise ConfigError(
        f"{subject} contains {why}, which the metadata store cannot hold; remove it",
        {where or what: [f"contains {why}"]},
    )


def _printable(key: str) -> str:
    """A key for a message: control characters escaped, long keys cut (they may be hostile)."""
    shown = "".join(c if c.isprintable() else f"\\u{ord(c):04x}" for c in key[:100])
    return shown + ("…" if len(key) > 100 else "")


# What a failed metadata operation means for its caller (see `store_fault`).
UNAVAILABLE = "unavailable"  # no connection: the server is down, unreachable, restarting, or the pool is exhausted
TIMEOUT = "timeout"  # the server did not finish a statement within `statement_timeout`
CONFLICT = "conflict"  # a concurrent change won: deadlock, serialization failure, lock timeout, unique key
INVALID = "invalid"  # a value the store cannot hold (out of range, not valid text)


def store_fault(exc: BaseException) -> str | None:
    """What kind of metadata-store failure `exc` is, or was caused by (its `__cause__`/`__context__`
    chain is walked: SQLAlchemy wraps the driver's error, the runtime wraps SQLAlchemy's); None when
    no store failure is involved. One place knows psycopg2's classes, so no caller matches driver text."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        fault = _fault_of(current)
        if fault is not None:
            return fault
        current = current.__cause__ or current.__context__
    return None


def _fault_of(exc: BaseException) -> str | None:
    # Subclasses before their bases: psycopg2 files a statement timeout, a lock timeout and a
    # deadlock under OperationalError, the class of a lost connection.
    if isinstance(exc, psycopg2.errors.QueryCanceled):
        return TIMEOUT
    if isinstance(exc, psycopg2.errors.LockNotAvailable | psycopg2.errors.TransactionRollbackError):
        return CONFLICT
    if isinstance(exc, psycopg2.IntegrityError):
        return CONFLICT
    if isinstance(exc, psycopg2.DataError):
        return INVALID
    if isinstance(exc, psycopg2.OperationalError | psycopg2.InterfaceError):
        return UNAVAILABLE
    if isinstance(exc, sa_exc.TimeoutError | sa_exc.DisconnectionError):  # pool exhausted; connection lost
        return UNAVAILABLE
    if isinstance(exc, sa_exc.DBAPIError) and exc.connection_invalidated:
        return UNAVAILABLE
    return None
