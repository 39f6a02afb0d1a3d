"""Commands that run next to the metadata store: task runs, the REST server, migrations, Airflow."""

from __future__ import annotations

import itertools
from typing import Annotated, Any

import typer
from rich.table import Table

from connect_core.cli._app import OutputOpt, app, err, out, print_json, runtime
from connect_core.runtime.context import Runtime

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
    `connect run shop-source shop-sink` pays one Spark start-up for a whole sync."""
    from connect_core.runtime.cluster.rebalancer import place
    from connect_core.runtime.cluster.spark_connect import is_connect_master
    from connect_core.runtime.execution.submit import merge_spark_conf, run_as_client, submit_tasks

    if task is not None and len(names) > 1:
        raise typer.BadParameter("--task needs a single connector")
    with runtime() as rt:
        planned = []  # (connector, task, pool name, placement)
        for name in names:
            info = rt.connectors.get(name)
            for t in [task] if task is not None else list(range(len(info.tasks))):
                placement = None if master else place(rt.engine, rt.settings, name, t)
                planned.append((name, t, placement.pool if placement else master or "", placement))
        # consecutive tasks on the same pool and master share a spark-submit
        groups = [
            list(group)
            for _, group in itertools.groupby(planned, key=lambda p: (p[2], p[3].master if p[3] else master))
        ]
        results, pools = [], []
        for group in groups:
            target = group[0][3].master if group[0][3] else master
            if target and is_connect_master(target):  # a warm pool: this process is the client, no spark-submit
                results += run_as_client(rt, [(g[0], g[1]) for g in group], target, group[0][2] or None)
                pools += [g[2] for g in group]
                continue
            conf = merge_spark_conf(*(rt.spark_conf_for(name) for name in dict.fromkeys(g[0] for g in group)))
            results += submit_tasks(
                rt.settings,
                rt.database_url,
                [(g[0], g[1]) for g in group],
                master=master,
                placement=group[0][3],
                conf=conf,
            )
            pools += [g[2] for g in group]
    if output == "json":
        print_json(
            [
                {**r.result, "pool": p, "exit_code": r.exit_code, "wall_s": r.wall_s}
                for r, p in zip(results, pools, strict=True)
            ]
        )
    else:
        many = len(names) > 1
        table = Table(
            *(["connector"] if many else []), "task", "pool", "run", "state", "rows", "wall s", "start-up s", "work s"
        )
        for r, pool in zip(results, pools, strict=True):
            work = r.result.get("timings", {}).get("run_s", 0.0)
            table.add_row(
                *([r.connector] if many else []),
                str(r.task_id),
                pool,
                str(r.result.get("run_id", "")),
                r.state,
                str(r.result.get("rows", "")),
                f"{r.wall_s:.1f}",
                f"{r.wall_s - work:.1f}",
                f"{work:.1f}",
            )
        out.print(f"[bold]{', '.join(names)}[/bold]: ran {len(results)} task(s) in {len(groups)} group(s) of runs")
        out.print(table)
        for r in results:
            if r.result.get("message"):
                out.print(f"{r.connector} task {r.task_id}: {r.result['message']}", highlight=False)
    for r in results:
        if r.state not in ("SUCCEEDED", "SKIPPED"):
            if not r.result:
                err.print(
                    f"{r.connector} task {r.task_id} exited with {r.exit_code}; last output:\n{r.stderr_tail}",
                    highlight=False,
                )
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
    from connect_core.rest.edge import EdgePolicy
    from connect_core.runtime.settings import Settings

    settings = Settings()
    with runtime():  # migrate and check the store once, up front
        pass
    token = settings.rest_token.get_secret_value() if settings.rest_token else None
    app = create_app(
        lambda: Runtime.open(settings, upgrade=False),
        auth=[bearer_or_loopback(token)],
        edge=EdgePolicy.from_settings(settings, bound_to=host),
    )
    out.print(
        f"Connect REST API on http://{host}:{port} (OpenAPI: /docs); auth: {'bearer token' if token else 'loopback only'}"
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
    from connect_core.runtime.execution.jvm_archive import build_archive
    from connect_core.runtime.settings import Settings

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


@airflow_app.command("up")
def airflow_up(
    port: Annotated[int, typer.Option(help="Port of the Airflow UI and API (bound to 127.0.0.1)")] = 8080,
    airflow_db: Annotated[
        str, typer.Option(help="Database for Airflow's own metadata, on the same server")
    ] = "airflow",
) -> None:
    """Start Airflow (api-server, scheduler, dag-processor, triggerer) with Connect's DAGs and plugin."""
    from connect_core.platform import airflow_environment, run_platform

    with runtime() as rt:
        platform = airflow_environment(rt.settings, rt.database_url, port=port, airflow_db=airflow_db)

        def ready(p: Any) -> None:
            from connect_core.runtime.airflow_client import AirflowClient
            from connect_core.runtime.cluster.rebalancer import sync_airflow_pools

            # Every Spark pool gets its Airflow pool before the first task is scheduled.
            warning = sync_airflow_pools(rt.pools, AirflowClient(p.url, p.username, p.password))
            if warning:
                err.print(f"[yellow]warning:[/yellow] {warning}", highlight=False)
            out.print(
                f"Airflow UI: [bold]{p.url}[/bold]   user: [bold]{p.username}[/bold]   password: [bold]{p.password}[/bold]"
            )
            out.print(f"Connect view: {p.url}/connect-ui/   logs: {p.env['AIRFLOW_HOME']}/logs   (Ctrl-C stops)")

        code = run_platform(platform, on_ready=ready)
    raise typer.Exit(code)
