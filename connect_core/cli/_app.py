"""The `connect` Typer app, its shared options and helpers."""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from connect_core.sdk.errors import ConfigError, ConnectError, NotFoundError

if TYPE_CHECKING:
    from connect_core.runtime.context import Runtime

__all__ = [
    "OutputOpt",
    "app",
    "backend",
    "debugging",
    "door_problem",
    "err",
    "java_problem",
    "load_config",
    "out",
    "print_error",
    "print_json",
    "require_free_port",
    "runtime",
]

app = typer.Typer(
    help="A Connect runtime on Airflow, Spark and Postgres.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,  # a traceback's locals would show the database URL's password
)
out = Console()
err = Console(stderr=True)
OutputOpt = Annotated[str, typer.Option("--output", "-o", help="table or json")]
_remote: dict[str, str | None] = {"url": None, "token": None}
_debug: dict[str, bool] = {"on": False}
JAVA_MIN = 17  # Spark 4's minimum
JAVA_INSTALL = "apt-get install openjdk-17-jre-headless"


@app.callback()
def _options(
    url: Annotated[
        str | None,
        typer.Option(
            "--url", envvar="CONNECT_REST_URL", help="Manage connectors through this REST API instead of the database."
        ),
    ] = None,
    token: Annotated[
        str | None, typer.Option("--token", envvar="CONNECT_REST_TOKEN", help="Bearer token for --url.")
    ] = None,
    debug: Annotated[
        bool, typer.Option("--debug", envvar="CONNECT_DEBUG", help="Show an error's full traceback, not one line.")
    ] = False,
) -> None:
    _remote.update(url=url, token=token)
    _debug["on"] = debug


def debugging() -> bool:
    """Whether errors show their traceback (`--debug` or CONNECT_DEBUG=1; the variable also before
    the options were parsed)."""
    return _debug["on"] or os.environ.get("CONNECT_DEBUG", "").lower() in ("1", "true", "yes", "on")


def print_error(message: str) -> None:
    """`error: message` on stderr, on one line whatever the terminal's width."""
    err.print(f"[red]error:[/red] {escape(message)}", highlight=False, soft_wrap=True)


def door_problem(exc: BaseException) -> str | None:
    """One line saying what is wrong and what to do, when `exc` is a failure at the door (the metadata
    database does not answer, or its URL does not parse); None for any other error."""
    from sqlalchemy.exc import ArgumentError

    from connect_core.runtime.store.db import UNAVAILABLE, connect_failure, masked_url, store_fault

    if isinstance(exc, ArgumentError) and "URL" in str(exc):
        return (
            "CONNECT_DATABASE_URL is not a database URL; set it to postgresql://user:password@host:5432/dbname "
            "(or unset it: the embedded Postgres)"
        )
    if store_fault(exc) != UNAVAILABLE:
        return None
    from connect_core.runtime.settings import Settings

    settings = Settings()
    reason = connect_failure(exc) or "the connection was lost"
    if reason == "timeout expired":
        reason = f"no answer within {settings.db_connect_timeout:g} s (CONNECT_DB_CONNECT_TIMEOUT)"
    if settings.database_url is None:
        return (
            f"the embedded Postgres in `{settings.pgdata}` does not answer: {reason}; "
            "stop what else uses that directory, or set CONNECT_DATABASE_URL to a server"
        )
    shown = masked_url(settings.database_url.get_secret_value())
    if reason.startswith("FATAL: "):  # the server answered, and refused
        return (
            f"the metadata database {shown} refused the connection: {reason.removeprefix('FATAL: ')}; "
            "fix the user, password or database name in CONNECT_DATABASE_URL"
        )
    return (
        f"cannot connect to the metadata database {shown}: {reason}; start it, or set CONNECT_DATABASE_URL "
        "to one that answers (unset: the embedded Postgres)"
    )


def java_problem() -> str | None:
    """What is wrong with the Java that spark-submit starts (`$JAVA_HOME/bin/java`, else the one on
    PATH), in one line with what to do; None when it is Java 17 or newer."""
    home = os.environ.get("JAVA_HOME")
    java = str(Path(home, "bin", "java")) if home else shutil.which("java")
    if java is None or not os.access(java, os.X_OK):
        where = f"in JAVA_HOME ({home})" if home else "on PATH"
        return f"Spark needs Java {JAVA_MIN}+ and there is no `java` {where}: {JAVA_INSTALL}, or set JAVA_HOME to a JDK"
    try:
        proc = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"`{java} -version` failed ({exc}): {JAVA_INSTALL}, or set JAVA_HOME to a working JDK"
    found = re.search(r'version "(\d+)(?:\.(\d+))?', proc.stderr + proc.stdout)
    major = int(found[1]) if found else 0
    if major == 1 and found and found[2]:  # Java 8 and older say "1.8.0"
        major = int(found[2])
    if major >= JAVA_MIN:
        return None
    version = f"Java {major}" if major else "of an unknown version"
    return (
        f"Spark needs Java {JAVA_MIN}+ but `{java}` is {version}: {JAVA_INSTALL} and put it first on PATH, "
        "or set JAVA_HOME to it"
    )


def require_free_port(host: str, port: int, option: str = "--port") -> None:
    """Raise a one-line ConfigError when `host:port` cannot be listened on (another process has it),
    before anything starts; `option` is how to choose another."""
    try:
        family, kind, proto, _name, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except socket.gaierror as exc:
        raise ConfigError(f"cannot listen on `{host}`: {exc.strerror}; choose an address of this machine") from exc
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the servers do: TIME_WAIT is free
        try:
            probe.bind(address)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise ConfigError(
                    f"port {port} on {host} is already in use by another process; stop it, or choose another "
                    f"port with `{option} N`"
                ) from exc
            raise ConfigError(
                f"cannot listen on {host}:{port}: {exc.strerror}; choose an address of this machine, or another "
                f"port with `{option} N`"
            ) from exc


@contextmanager
def _errors() -> Iterator[None]:
    """Turn the errors a user can act on into a message and an exit code (with --debug, a traceback)."""
    try:
        yield
    except typer.Exit:
        raise
    except Exception as exc:
        door = door_problem(exc)
        code = 1 if door else 2 if isinstance(exc, ConfigError) else 4 if isinstance(exc, NotFoundError) else 1
        if debugging() or not (door or isinstance(exc, ConnectError)):
            raise
        print_error(door or str(exc))
        raise typer.Exit(code) from exc


@contextmanager
def runtime(upgrade: bool = True) -> Iterator[Runtime]:
    """The local runtime (metadata store); for commands that only work next to it."""
    from connect_core.runtime.context import Runtime

    with _errors():
        rt = Runtime.open(upgrade=upgrade)
        try:
            yield rt
        finally:
            rt.close()


@contextmanager
def backend() -> Iterator[Any]:
    """`ConnectService` over the local store, or `RestClient` with --url: the same methods either way."""
    with _errors():
        if _remote["url"]:
            from connect_core.rest.client import RestClient

            client = RestClient(_remote["url"], _remote["token"])
            try:
                yield client
            finally:
                client.close()
        else:
            from connect_core.rest.service import ConnectService
            from connect_core.runtime.context import Runtime

            rt = Runtime.open()
            service = ConnectService(rt)
            try:
                yield service
            finally:
                service.close()
                rt.close()


def print_json(value: Any) -> None:
    out.print_json(json.dumps(value, default=str))


def load_config(path: str) -> dict[str, Any]:
    text = sys.stdin.read() if path == "-" else Path(path).read_text()
    try:
        config = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"config file `{path}` is not valid JSON: {exc}") from exc
    if not isinstance(config, dict):
        raise ConfigError(f"config file `{path}` must hold a JSON object of config keys")
    return config
