"""The `connect` command (Typer): manage connectors in the metadata store and run them."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from connect_core.runtime.context import Runtime
from connect_core.runtime.secrets import mask_config
from connect_core.sdk.errors import ConfigError, ConnectError, NotFoundError

__all__ = ["app", "main"]

app = typer.Typer(help="A Connect runtime on Spark and Postgres.", no_args_is_help=True, add_completion=False)
db_app = typer.Typer(help="The metadata schema.", no_args_is_help=True)
app.add_typer(db_app, name="db")
airflow_app = typer.Typer(help="The local Airflow platform.", no_args_is_help=True)
app.add_typer(airflow_app, name="airflow")

out = Console()
err = Console(stderr=True)

OutputOpt = Annotated[str, typer.Option("--output", "-o", help="table or json")]


@contextmanager
def _runtime(upgrade: bool = True) -> Iterator[Runtime]:
    """Open the runtime; turn the errors a user can act on into a message and exit code."""
    runtime = None
    try:
        runtime = Runtime.open(upgrade=upgrade)
        yield runtime
    except ConfigError as exc:
        err.print(f"[red]error:[/red] {exc}", markup=True, highlight=False)
        raise typer.Exit(2) from exc
    except NotFoundError as exc:
        err.print(f"[red]error:[/red] {exc}", highlight=False)
        raise typer.Exit(4) from exc
    except ConnectError as exc:
        err.print(f"[red]error:[/red] {exc}", highlight=False)
        raise typer.Exit(1) from exc
    finally:
        if runtime is not None:
            runtime.close()


def _print_json(value: Any) -> None:
    out.print_json(json.dumps(value, default=str))


def _load_config(path: str) -> dict[str, Any]:
    text = sys.stdin.read() if path == "-" else Path(path).read_text()
    try:
        config = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"config file `{path}` is not valid JSON: {exc}") from exc
    if not isinstance(config, dict):
        raise ConfigError(f"config file `{path}` must hold a JSON object of config keys")
    return config


ConfigOpt = Annotated[str, typer.Option("--config", "-c", help="JSON file of the connector config, or -")]


@app.command()
def create(name: str, config: ConfigOpt) -> None:
    """Validate a connector config and register the connector (fails if it exists)."""
    _save(name, config, allow_update=False)


@app.command()
def put(name: str, config: ConfigOpt) -> None:
    """Create the connector, or update its config if it exists (Kafka's PUT /connectors/NAME/config)."""
    _save(name, config, allow_update=True)


def _save(name: str, config_path: str, *, allow_update: bool) -> None:
    with _runtime() as rt:
        config = _load_config(config_path)
        if allow_update and name in rt.connectors.names():
            info = rt.update_connector(name, config)
            verb = "updated"
        else:
            info = rt.create_connector(name, config)
            verb = "created"
        out.print(
            f"{verb} {info.type} connector [bold]{name}[/bold] "
            f"({info.connector_class}, {len(info.tasks)} task(s), config version {info.config_version})"
        )


@app.command("list")
def list_connectors(output: OutputOpt = "table") -> None:
    """List registered connectors."""
    with _runtime() as rt:
        rows = [rt.connectors.status(name) for name in rt.connectors.names()]
        if output == "json":
            _print_json([r.name for r in rows])
            return
        table = Table("connector", "type", "state", "tasks")
        for r in rows:
            table.add_row(r.name, r.type.upper(), r.state, ", ".join(f"{t.id}:{t.state}" for t in r.tasks))
        out.print(table)


@app.command()
def status(name: str, output: OutputOpt = "table") -> None:
    """Connector and task states (with the trace of a failed task) and the last runs."""
    with _runtime() as rt:
        st = rt.connectors.status(name)
        runs = rt.connectors.last_runs(name, limit=5)
        if output == "json":
            _print_json(
                {
                    "name": st.name,
                    "type": st.type.upper(),
                    "connector": {"state": st.state, "trace": st.trace, "worker_id": st.worker_id},
                    "tasks": [
                        {"id": t.id, "state": t.state, "trace": t.trace, "worker_id": t.worker_id} for t in st.tasks
                    ],
                    "runs": runs,
                }
            )
            return
        out.print(f"[bold]{st.name}[/bold] ({st.type.upper()}): {st.state}")
        table = Table("task", "state", "worker", "trace")
        for t in st.tasks:
            table.add_row(
                str(t.id), t.state, t.worker_id or "", (t.trace or "").strip().splitlines()[-1:][0] if t.trace else ""
            )
        out.print(table)
        if runs:
            runs_table = Table("run", "task", "state", "rows", "work s", "finished")
            for r in runs:
                runs_table.add_row(
                    str(r["run_id"]),
                    str(r["task"]),
                    r["state"],
                    str(r["stats"].get("rows", "")),
                    str(r["stats"].get("work_s", "")),
                    r["finished_at"] or "",
                )
            out.print(runs_table)


@app.command()
def config(name: str) -> None:
    """Show a connector's config (secrets masked) and its task configs."""
    with _runtime() as rt:
        info = rt.connectors.get(name)
        _print_json(
            {
                "name": name,
                "config": mask_config(info.config),
                "tasks": [mask_config(t) for t in info.tasks],
                "target_state": info.target_state,
            }
        )


@app.command()
def delete(name: str) -> None:
    """Delete a connector (its positions and offsets stay, as in Kafka Connect)."""
    with _runtime() as rt:
        rt.connectors.delete(name)
        out.print(f"deleted connector [bold]{name}[/bold]")


def _set_state(name: str, state: str) -> None:
    with _runtime() as rt:
        warning = rt.set_target_state(name, state)
        out.print(f"connector [bold]{name}[/bold] is {state}")
        if warning:
            err.print(f"warning: its DAG was not updated: {warning}", highlight=False)


@app.command()
def pause(name: str) -> None:
    """Pause a connector: its DAG is paused and its tasks do not run."""
    _set_state(name, "PAUSED")


@app.command()
def resume(name: str) -> None:
    """Resume a paused or stopped connector."""
    _set_state(name, "RUNNING")


@app.command()
def stop(name: str) -> None:
    """Stop a connector: its DAG loses its schedule and its tasks skip; config and offsets stay."""
    _set_state(name, "STOPPED")


@app.command()
def trigger(name: str) -> None:
    """Start a run of the connector's DAG in Airflow now (needs `connect airflow up` or CONNECT_AIRFLOW_URL)."""
    from connect_core.runtime.airflow_client import AirflowClient

    with _runtime() as rt:
        rt.connectors.get(name)
        client = AirflowClient.from_settings(rt.settings)
        if client is None:
            raise ConfigError("no Airflow configured: run `connect airflow up` or set CONNECT_AIRFLOW_URL")
        out.print(f"triggered DAG run [bold]{client.trigger(name)}[/bold] of {name}")


@app.command()
def plugins(output: OutputOpt = "table") -> None:
    """List the connector plugins found (entry points and CONNECT_PLUGIN_PATH)."""
    with _runtime(upgrade=False) as rt:
        found = rt.registry.plugins().values()
        if output == "json":
            _print_json(
                [
                    {"class": p.class_path, "name": p.name, "type": p.type, "version": p.version, "aliases": p.aliases}
                    for p in found
                ]
            )
            return
        table = Table("name", "type", "version", "class", "aliases")
        for p in sorted(found, key=lambda p: p.name):
            table.add_row(p.name, p.type, p.version, p.class_path, "\n".join(p.aliases))
        out.print(table)


@app.command()
def run(
    name: str,
    master: Annotated[str | None, typer.Option(help="Spark master (default CONNECT_SPARK_MASTER or local[*])")] = None,
    task: Annotated[int | None, typer.Option(help="Run only this task")] = None,
    output: OutputOpt = "table",
) -> None:
    """Run every task of a connector once, each through a real spark-submit of the runner."""
    from connect_core.runtime.submit import submit_task

    with _runtime() as rt:
        info = rt.connectors.get(name)
        task_ids = [task] if task is not None else list(range(len(info.tasks)))
        results = [submit_task(rt.settings, rt.database_url, name, t, master=master) for t in task_ids]
    if output == "json":
        _print_json([{**r.result, "exit_code": r.exit_code, "wall_s": r.wall_s} for r in results])
    else:
        table = Table("task", "run", "state", "rows", "wall s", "start-up s", "work s")
        for r in results:
            work = r.result.get("timings", {}).get("run_s", 0.0)
            table.add_row(
                str(r.task_id),
                str(r.result.get("run_id", "")),
                r.state,
                str(r.result.get("rows", "")),
                f"{r.wall_s:.1f}",
                f"{r.wall_s - work:.1f}",
                f"{work:.1f}",
            )
        out.print(f"[bold]{name}[/bold]: ran {len(results)} task(s)")
        out.print(table)
        for r in results:
            if r.result.get("message"):
                out.print(f"task {r.task_id}: {r.result['message']}", highlight=False)
    for r in results:
        if r.state not in ("SUCCEEDED", "SKIPPED"):
            if not r.result:
                err.print(f"task {r.task_id} exited with {r.exit_code}; last output:\n{r.stderr_tail}", highlight=False)
            raise typer.Exit(1)


@app.command()
def serve(
    host: Annotated[str, typer.Option(help="Address to bind (loopback by default)")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port (RocketMQ Connect's 8082 by default)")] = 8082,
) -> None:
    """Serve the REST API (Kafka Connect's API and RocketMQ Connect's routes)."""
    import uvicorn

    from connect_core.rest.app import create_app
    from connect_core.rest.auth import bearer_or_loopback
    from connect_core.runtime.settings import Settings

    settings = Settings()
    with _runtime():  # migrate and check the store once, up front
        pass
    token = settings.rest_token.get_secret_value() if settings.rest_token else None
    app = create_app(lambda: Runtime.open(settings, upgrade=False), auth=[bearer_or_loopback(token)])
    out.print(
        f"Connect REST API on http://{host}:{port} (OpenAPI: /docs); auth: {'bearer token' if token else 'loopback only'}"
    )
    uvicorn.run(app, host=host, port=port, log_level="warning")


@db_app.command("upgrade")
def db_upgrade(revision: str = "head") -> None:
    """Apply migrations up to REVISION (idempotent)."""
    from connect_core.runtime import migrate

    with _runtime(upgrade=False) as rt:
        migrate.upgrade(rt.engine, revision)
        out.print(f"metadata schema at {revision}")


@db_app.command("downgrade")
def db_downgrade(revision: str) -> None:
    """Revert migrations down to REVISION (`base` drops every table)."""
    from connect_core.runtime import migrate

    with _runtime(upgrade=False) as rt:
        migrate.downgrade(rt.engine, revision)
        out.print(f"metadata schema at {revision}")


@airflow_app.command("up")
def airflow_up(
    port: Annotated[int, typer.Option(help="Port of the Airflow UI and API (bound to 127.0.0.1)")] = 8080,
    airflow_db: Annotated[
        str, typer.Option(help="Database for Airflow's own metadata, on the same server")
    ] = "airflow",
) -> None:
    """Start Airflow (api-server, scheduler, dag-processor, triggerer) with Connect's DAGs and plugin."""
    from connect_core.platform import airflow_environment, run_platform

    with _runtime() as rt:
        platform = airflow_environment(rt.settings, rt.database_url, port=port, airflow_db=airflow_db)

        def ready(p: Any) -> None:
            out.print(
                f"Airflow UI: [bold]{p.url}[/bold]   user: [bold]{p.username}[/bold]   password: [bold]{p.password}[/bold]"
            )
            out.print(f"Connect view: {p.url}/connect-ui/   logs: {p.env['AIRFLOW_HOME']}/logs   (Ctrl-C stops)")

        code = run_platform(platform, on_ready=ready)
    raise typer.Exit(code)


def main() -> None:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    app()


if __name__ == "__main__":
    main()
