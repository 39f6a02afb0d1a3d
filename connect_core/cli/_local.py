"""Commands that run next to the metadata store: task runs, the REST server, migrations, Airflow."""

from __future__ import annotations

import logging
from typing import Annotated, Any

import typer
from rich.table import Table

from connect_core.cli._app import (
    OutputOpt,
    _errors,
    app,
    err,
    java_problem,
    out,
    print_error,
    print_json,
    require_free_port,
    runtime,
)

db_app = typer.Typer(help="The metadata schema.", no_args_is_help=True)
airflow_app = typer.Typer(help="The local Airflow platform.", no_args_is_help=True)
app.add_typer(db_app, name="db")
app.add_typer(airflow_app, name="airflow")


@app.command()
def run(
    names: Annotated[list[str], typer.Argument(help="Connector(s); their tasks run in this order", metavar="NAME...")],
    master: Annotated[
        str | None, typer.Option(help="Run on this Spark master instead of the tasks' assigned pools")
    ] = None,
    task: Annotated[int | None, typer.Option(help="Run only this task (of a single connector)")] = None,
    output: OutputOpt = "table",
) -> None:
    """Run every task of the connector(s) once, through real spark-submits of the runner.

    Consecutive tasks placed on the same Spark pool share one spark-submit: they run one after
    another in one Spark application, as a Kafka Connect worker hosts many tasks — so
    `connect run shop-source shop-sink` pays one Spark start-up for a whole sync. With a warm pool
    on this machine (`connect pools start`), its worker runs them: no start-up at all."""
    if task is not None and len(names) > 1:
        raise typer.BadParameter("--task needs a single connector")
    from connect_core.runtime.execution.launcher import State, launch_names
    from connect_core.runtime.settings import Settings

    def show(level: int, line: str) -> None:  # what a worker's runs log: its warnings and errors
        if level >= logging.WARNING:
            err.print(line, highlight=False, markup=False)

    with _errors():
        launched = launch_names(Settings(), names, task=task, master=master, open_runtime=runtime, on_log=show)
    results = [dict(o.record) for o in launched.outcomes]
    if output == "json":
        print_json([{k: v for k, v in r.items() if k != "tail"} for r in results])
    else:
        _print_runs(names, results, launched.groups)
    for outcome, r in zip(launched.outcomes, results, strict=True):
        if outcome.state not in (State.SUCCEEDED, State.SKIPPED):
            problem = java_problem() if r.get("run_id") is None else None  # spark-submit never started it
            if problem:
                print_error(problem)
            elif r.get("run_id") is None and r.get("tail"):
                err.print(
                    f"{r['connector']} task {r['task_id']} exited with {r['exit_code']}; last output:\n{r['tail']}",
                    highlight=False,
                )
            raise typer.Exit(1)


def _print_runs(names: list[str], results: list[dict[str, Any]], groups: int) -> None:
    many = len(names) > 1
    table = Table(
        *(["connector"] if many else []), "task", "pool", "run", "state", "rows", "wall s", "start-up s", "work s"
    )
    for r in results:
        work = float(r.get("timings", {}).get("run_s", 0.0))
        wall = float(r.get("wall_s", 0.0))
        table.add_row(
            *([r["connector"]] if many else []),
            str(r["task_id"]),
            str(r.get("pool", "")),
            str(r.get("run_id") or ""),
            str(r.get("state")),
            str(r.get("rows", "")),
            f"{wall:.1f}",
            f"{wall - work:.1f}",
            f"{work:.1f}",
        )
    out.print(f"[bold]{', '.join(names)}[/bold]: ran {len(results)} task(s) in {groups} group(s) of runs")
    out.print(table)
    for r in results:
        if r.get("message"):
            out.print(f"{r['connector']} task {r['task_id']}: {r['message']}", highlight=False)


@app.command()
def serve(
    host: Annotated[str, typer.Option(help="Address to bind (loopback by default)")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port (RocketMQ Connect's 8082 by default)", min=1, max=65535)] = 8082,
) -> None:
    """Serve the REST API (Kafka Connect's API and RocketMQ Connect's routes)."""
    import uvicorn

    from connect_core.rest.app import create_app
    from connect_core.rest.auth import bearer_or_loopback, tokens_from_settings
    from connect_core.rest.edge import EdgePolicy
    from connect_core.runtime.context import Runtime
    from connect_core.runtime.settings import Settings

    with _errors():
        settings = Settings()
        require_free_port(host, port)
    with runtime():  # migrate and check the store once, up front
        pass
    try:
        tokens = tokens_from_settings(settings)
    except ValueError as exc:
        print_error(str(exc))
        raise typer.Exit(2) from exc
    app = create_app(
        lambda: Runtime.open(settings, upgrade=False),
        auth=[bearer_or_loopback(tokens=tokens)],
        edge=EdgePolicy.from_settings(settings, bound_to=host),
    )
    shown_host = f"[{host}]" if ":" in host else host  # an IPv6 address, as a URL writes it
    out.print(
        f"Connect REST API on http://{shown_host}:{port} (OpenAPI: /docs); auth: "
        + (f"bearer tokens of the {', '.join(sorted(r.name for r in tokens))} role(s)" if tokens else "loopback only")
    )
    import gc

    gc.collect()
    gc.freeze()  # start-up objects leave the GC's view: no long collections under load
    uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False)


@app.command("spark-archive")
def spark_archive(
    force: Annotated[bool, typer.Option(help="Rebuild it even if it exists")] = False,
) -> None:
    """Build the Spark driver JVM's class-data archive: every spark-submit of a task starts faster.

    Once per JVM and Spark install (`scripts/bootstrap.sh` and the Docker image do it); runs a
    short training spark-submit on local Spark."""
    from connect_core.runtime.settings import Settings
    from connect_core.runtime.spark.jvm_archive import build_archive

    path, seconds = build_archive(Settings(), force=force)
    if seconds is None:
        out.print(f"JVM class-data archive already built: {path}", highlight=False, soft_wrap=True)
    else:
        size = path.stat().st_size / 1e6
        out.print(
            f"JVM class-data archive built in {seconds:.1f} s: {path} ({size:.0f} MB)", highlight=False, soft_wrap=True
        )


@db_app.command("upgrade")
def db_upgrade(revision: str = "head") -> None:
    """Apply migrations up to REVISION (idempotent)."""
    from connect_core.runtime.store import migrate

    with runtime(upgrade=False) as rt:
        migrate.upgrade(rt.engine, revision)
        out.print(f"metadata schema at {revision}")


@db_app.command("downgrade")
def db_downgrade(revision: str) -> None:
    """Revert migrations down to REVISION (`base` drops every table)."""
    from connect_core.runtime.store import migrate

    with runtime(upgrade=False) as rt:
        migrate.downgrade(rt.engine, revision)
        out.print(f"metadata schema at {revision}")


@airflow_app.command("dags-path")
def airflow_dags_path() -> None:
    """Print the folder of Connect's DAG files (`connect_dags.py` and its shards), in the installed package.

    `connect airflow up` uses it. For an Airflow of your own, in the same environment as
    connect-core: set its `dags_folder` to it
    (`export AIRFLOW__CORE__DAGS_FOLDER="$(connect airflow dags-path)"`), or, to keep your own
    folder, symlink its `connect_dags*.py` files into it (a symlink follows upgrades of the
    package; a copy would not)."""
    from connect_core.platform import DAGS_FOLDER

    out.print(str(DAGS_FOLDER), markup=False, highlight=False, soft_wrap=True)


@airflow_app.command("plugins-path")
def airflow_plugins_path() -> None:
    """Print the folder of Connect's Airflow plugin (`connect_plugin.py`), in the installed package.

    `connect airflow up` uses it. For an Airflow of your own: set its `plugins_folder` to it
    (`export AIRFLOW__CORE__PLUGINS_FOLDER="$(connect airflow plugins-path)"`), or symlink its
    `connect_plugin.py` into your plugins folder. One of the two, not both: Airflow skips a
    second plugin named `connect` and lists it as an import error."""
    from connect_core.platform import PLUGINS_FOLDER

    out.print(str(PLUGINS_FOLDER), markup=False, highlight=False, soft_wrap=True)


@airflow_app.command("down")
def airflow_down(
    timeout: Annotated[float, typer.Option(help="Seconds to wait for it to stop before killing it")] = 90.0,
) -> None:
    """Stop the platform `connect airflow up` runs for this data directory (CONNECT_HOME): Airflow's
    components and the warm pool it started, as Ctrl-C in its shell does. Past --timeout, kill exactly
    the processes it recorded, then it; exit 1 if any survives that."""
    from connect_core.platform import clear_stale_platform, pid_file, running_platform, stop_platform
    from connect_core.runtime.settings import Settings
    from connect_core.sdk.errors import FatalError

    with _errors():
        home = Settings().home
        found = running_platform(home)
        if found is None:
            report = clear_stale_platform(home)
            out.print(f"no platform is running for {home}", highlight=False, soft_wrap=True)
            if report.removed_stale:
                whose = f" (pid {report.stale.up.pid}, gone)" if report.stale is not None else ""
                out.print(
                    f"removed the stale `{pid_file(home)}` of a `connect airflow up`{whose}: no process holds its lock",
                    highlight=False,
                    soft_wrap=True,
                )
        else:
            out.print(f"stopping the platform at {found.url} (pid {found.up.pid})…", highlight=False)
            shown = [0.0]

            def progress(waited: float) -> None:
                if waited - shown[0] >= 10:
                    shown[0] = waited
                    out.print(f"  still stopping after {waited:.0f} s…", highlight=False)

            report = stop_platform(home, timeout=timeout, progress=progress)
        if report.killed:
            why = f"not stopped within {timeout:.0f} s" if found is not None else "left running by it"
            out.print(f"  {why}, killed: {', '.join(report.killed)}", highlight=False, soft_wrap=True)
        if report.survived:
            raise FatalError(f"still running after SIGKILL: {', '.join(report.survived)}")
        if found is not None:
            out.print("stopped")


@airflow_app.command("up")
def airflow_up(
    port: Annotated[
        int, typer.Option(help="Port of the Airflow UI and API (bound to 127.0.0.1)", min=1, max=65535)
    ] = 8080,
    airflow_db: Annotated[
        str, typer.Option(help="Database for Airflow's own metadata, on the same server")
    ] = "airflow",
    warm_pool: Annotated[
        bool | None,
        typer.Option(
            "--warm-pool/--no-warm-pool",
            help="Run the tasks on a warm pool started with the platform, `local` standing by "
            "(default: CONNECT_WARM_POOL, true)",
        ),
    ] = None,
) -> None:
    """Start Airflow (api-server, scheduler, dag-processor, triggerer) with Connect's DAGs and plugin,
    and a warm pool (a Spark Connect server and its worker) that runs the tasks while it is up."""
    from connect_core.platform import (
        STANDBY_POOL,
        WARM_POOL,
        PlatformLease,
        WarmPool,
        WorkerPaths,
        airflow_environment,
        check_database_name,
        platform_url,
        run_platform,
    )

    with _errors():
        check_database_name(airflow_db)
        require_free_port("127.0.0.1", port)  # the api-server's: its own failure would show only in its log
    # The lease first (signal handlers, lock, pid file): a Ctrl-C or `down` at any step below ends in
    # the `finally`s, which take back what was recorded (the pools' labels, the pid file).
    with runtime() as rt, PlatformLease(rt.settings.home, platform_url(port)) as lease:
        platform = airflow_environment(rt.settings, rt.database_url, port=port, airflow_db=airflow_db)
        paths = WorkerPaths(rt, platform)
        use_warm = rt.settings.warm_pool if warm_pool is None else warm_pool
        warm = WarmPool(rt, rt.database_url, lease=lease) if use_warm else None

        def ready(p: Any) -> None:
            from connect_core.runtime.airflow_client import AirflowClient
            from connect_core.runtime.cluster.rebalancer import sync_airflow_pools

            if warm is not None:
                warm.wait()
                if warm.started:
                    paths.record(WARM_POOL)
                (out if warm.started or not warm.note.startswith("no") else err).print(warm.note, highlight=False)
            # Every Spark pool gets its Airflow pool before the first task is scheduled.
            warning = sync_airflow_pools(rt.pools, AirflowClient(p.url, p.username, p.password))
            if warning:
                err.print(f"[yellow]warning:[/yellow] {warning}", highlight=False)
            out.print(
                f"Airflow UI: [bold]{p.url}[/bold]   user: [bold]{p.username}[/bold]   password: [bold]{p.password}[/bold]"
            )
            out.print(f"Connect view: {p.url}/connect-ui/   logs: {p.env['AIRFLOW_HOME']}/logs   (Ctrl-C stops)")

        try:
            paths.record(STANDBY_POOL)
            if warm is not None:
                warm.start()  # beside Airflow's start
            code = run_platform(platform, lease, on_ready=ready)
        finally:
            paths.forget()
            if warm is not None:
                warm.stop()
    raise typer.Exit(code)
