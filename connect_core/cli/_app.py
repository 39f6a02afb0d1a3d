"""The `connect` Typer app, its shared options and helpers."""

from __future__ import annotations

import errno
import json
import os
import re
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

from connect_core.sdk.errors import ConfigError, ConnectError, NotFoundError, RetriableError

if TYPE_CHECKING:
    from connect_core.runtime.context import Runtime
    from connect_core.runtime.management import Management

__all__ = [
    "OutputOpt",
    "app",
    "backend",
    "debugging",
    "door_problem",
    "err",
    "java_major",
    "java_problem",
    "load_config",
    "out",
    "print_error",
    "print_json",
    "require_free_port",
    "runtime",
    "settings_problem",
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
    """`error: message` on stderr, on one line whatever the terminal's width: a control character in
    it (a newline, an ESC from a hostile value) is shown escaped, never sent."""
    from connect_core.runtime.security.limits import one_line

    err.print(f"[red]error:[/red] {escape(one_line(message))}", highlight=False, soft_wrap=True)


def settings_problem(exc: BaseException) -> str | None:
    """One line naming the CONNECT_* variable(s) that do not validate, when `exc` is the Settings'
    ValidationError; None for any other error. A secret setting's value is not shown."""
    from pydantic import ValidationError

    from connect_core.runtime.security.limits import one_line
    from connect_core.runtime.settings import Settings

    if not isinstance(exc, ValidationError) or exc.title != Settings.__name__:
        return None
    problems = []
    for error in exc.errors(include_url=False):
        field = str(error["loc"][0]) if error["loc"] else ""
        annotation = str(Settings.model_fields[field].annotation) if field in Settings.model_fields else ""
        shown = "" if "Secret" in annotation else f"={one_line(str(error.get('input', '')))[:80]}"
        problems.append(f"CONNECT_{field.upper()}{shown}: {error['msg']}")
    return f"{'; '.join(problems)}; fix or unset it"


def door_problem(exc: BaseException) -> str | None:
    """One line saying what is wrong and what to do, when `exc` is a failure at the door (the metadata
    database does not answer, or its URL does not parse); None for any other error."""
    from sqlalchemy.exc import ArgumentError

    from connect_core.runtime.store.db import (
        UNAVAILABLE,
        connect_failure,
        connect_wait,
        masked_url,
        refusal_fix,
        store_fault,
    )

    settings_line = settings_problem(exc)
    if settings_line is not None:
        return settings_line
    if isinstance(exc, ArgumentError) and "URL" in str(exc):
        return (
            "CONNECT_DATABASE_URL is not a database URL; set it to postgresql://user:password@host:5432/dbname "
            "(or unset it: the embedded Postgres)"
        )
    privilege = _missing_privilege(exc)
    if privilege is None and store_fault(exc) != UNAVAILABLE:
        return None
    from connect_core.runtime.settings import Settings

    settings = Settings()
    url = settings.database_url.get_secret_value() if settings.database_url is not None else None
    where = masked_url(url) if url is not None else f"(embedded, in `{settings.pgdata}`)"
    if privilege is not None:
        return f"the metadata database {where} refused a statement: {privilege}"
    reason = connect_failure(exc, url) or "the connection was lost"
    if reason == "timeout expired":
        waited = connect_wait(settings.db_connect_timeout)
        reason = f"no answer within {waited} s (CONNECT_DB_CONNECT_TIMEOUT"
        if waited != settings.db_connect_timeout:  # the wait libpq made, not the one asked for
            reason += f" is {settings.db_connect_timeout:g}; libpq waits whole seconds, at least 2"
        reason += ")"
    if url is None:
        return (
            f"the embedded Postgres in `{settings.pgdata}` does not answer: {reason}; "
            "stop what else uses that directory, or set CONNECT_DATABASE_URL to a server"
        )
    shown = where
    if reason.startswith("FATAL: "):  # the server answered, and refused
        refusal = reason.removeprefix("FATAL: ")
        return f"the metadata database {shown} refused the connection: {refusal}; {refusal_fix(refusal)}"
    return (
        f"cannot connect to the metadata database {shown}: {reason}; start it, or set CONNECT_DATABASE_URL "
        "to one that answers (unset: the embedded Postgres)"
    )


def _missing_privilege(exc: BaseException) -> str | None:
    """What the metadata role may not do and how to grant it, when `exc` is (or was caused by) a
    refused privilege (creating the schema needs CREATE on the database); else None."""
    import psycopg2.errors

    from connect_core.runtime.security.limits import one_line

    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, psycopg2.errors.InsufficientPrivilege):
            said = one_line((current.pgerror or str(current)).strip().splitlines()[0].removeprefix("ERROR:").strip())
            if "for database" in said:
                fix = "the role needs the CREATE privilege on the database (GRANT CREATE ON DATABASE … TO …)"
            elif "for schema" in said:
                fix = "the role needs the USAGE and CREATE privileges on that schema"
            else:
                fix = "grant the role of CONNECT_DATABASE_URL that privilege, or use the schema's owner"
            return f"{said}: {fix}, or use a role that has it"
        current = current.__cause__ or current.__context__
    return None


def java_problem() -> str | None:
    """What is wrong with the Java that spark-submit starts (`$JAVA_HOME/bin/java`, else the one on
    PATH), in one line with what to do; None when it is Java 17 or newer."""
    from connect_core.runtime.spark.jvm_archive import spark_java

    home = os.environ.get("JAVA_HOME")
    java = spark_java()
    if java is None or not os.access(java, os.X_OK):
        where = f"in JAVA_HOME ({home})" if home else "on PATH"
        return f"Spark needs Java {JAVA_MIN}+ and there is no `java` {where}: {JAVA_INSTALL}, or set JAVA_HOME to a JDK"
    try:
        proc = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"`{java} -version` failed ({exc}): {JAVA_INSTALL}, or set JAVA_HOME to a working JDK"
    major = java_major(proc.stderr + proc.stdout)
    if major >= JAVA_MIN:
        return None
    version = f"Java {major}" if major else "of an unknown version"
    return (
        f"Spark needs Java {JAVA_MIN}+ but `{java}` is {version}: {JAVA_INSTALL} and put it first on PATH, "
        "or set JAVA_HOME to it"
    )


def java_major(version_output: str) -> int:
    """The major version in `java -version`'s output, 0 when it says none: the digits after its first
    `version "` (`"17.0.2"`, `"25-ea"`, `"17-internal"`), or after `1.` for Java 8 and older
    (`"1.8.0_402"`). scripts/_checks.sh `check_java` reads it the same way."""
    found = re.search(r'version "(\d{1,9})(?:\.(\d{1,9}))?', version_output)
    if not found:
        return 0
    if found[1] == "1" and found[2]:  # Java 8 and older say "1.8.0"
        return int(found[2])
    return int(found[1])


def require_free_port(host: str, port: int, option: str = "--port") -> None:
    """Raise a one-line ConfigError when `host:port` cannot be listened on (another process has it),
    before anything starts; `option` is how to choose another."""
    if not 1 <= port <= 65535:
        raise ConfigError(f"port {port} is not a TCP port; choose one of 1-65535 with `{option} N`")
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


def _airflow_token(url: str) -> str | None:
    """For a `--url` that is the REST API inside Airflow (`<airflow>/connect`), with no `--token`: a
    token from Airflow's own `/auth/token`, with the Airflow credentials this runtime has
    (CONNECT_AIRFLOW_URL/USERNAME/PASSWORD, or the local platform's), as the Connect view gets one."""
    from connect_core.runtime.airflow_client import AirflowClient
    from connect_core.runtime.settings import Settings

    airflow = AirflowClient.from_settings(Settings())
    if airflow is None or not url.rstrip("/").startswith(airflow.url.rstrip("/") + "/connect"):
        return None
    try:
        return airflow.bearer_token()
    except RetriableError as exc:  # one line, as every other: what Airflow did, and the other way in
        raise RetriableError(f"{exc}; or give the REST API's token with --token (CONNECT_REST_TOKEN)") from exc


@contextmanager
def backend() -> Iterator[Management]:
    """The management room over the local store, or over the REST API with --url (`RestClient`): the
    same interface either way, and mypy holds both to it."""
    with _errors():
        if _remote["url"]:
            from connect_core.rest.client import RestClient

            client = RestClient(_remote["url"], _remote["token"] or _airflow_token(_remote["url"]))
            try:
                yield client
            finally:
                client.close()
        else:
            from connect_core.runtime.context import Runtime
            from connect_core.runtime.management import LocalManagement

            rt = Runtime.open()
            try:
                yield LocalManagement(rt)
            finally:
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
