"""The `connect` Typer app, its shared options and helpers."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console

from connect_core.sdk.errors import ConfigError, ConnectError, NotFoundError

if TYPE_CHECKING:
    from connect_core.runtime.context import Runtime

__all__ = ["OutputOpt", "app", "backend", "err", "load_config", "out", "print_json", "runtime"]

app = typer.Typer(help="A Connect runtime on Airflow, Spark and Postgres.", no_args_is_help=True, add_completion=False)
out = Console()
err = Console(stderr=True)
OutputOpt = Annotated[str, typer.Option("--output", "-o", help="table or json")]
_remote: dict[str, str | None] = {"url": None, "token": None}


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
) -> None:
    _remote.update(url=url, token=token)


@contextmanager
def _errors() -> Iterator[None]:
    """Turn the errors a user can act on into a message and an exit code."""
    try:
        yield
    except ConfigError as exc:
        err.print(f"[red]error:[/red] {exc}", highlight=False)
        raise typer.Exit(2) from exc
    except NotFoundError as exc:
        err.print(f"[red]error:[/red] {exc}", highlight=False)
        raise typer.Exit(4) from exc
    except ConnectError as exc:
        err.print(f"[red]error:[/red] {exc}", highlight=False)
        raise typer.Exit(1) from exc


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
