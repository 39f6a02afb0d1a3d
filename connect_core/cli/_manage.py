"""Connector management commands: local (the metadata store) or remote (`--url`, the REST API).

They mirror rocketmq-connect-cli (create, stop, config, status, stop-all,
plugins --reload, cluster-info, allocated) and Kafka's verbs (pause, resume,
restart, offsets get/reset).
"""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.table import Table

from connect_core.cli._app import OutputOpt, app, backend, err, load_config, out, print_json
from connect_core.runtime.store.states import TargetState

ConfigOpt = Annotated[str, typer.Option("--config", "-c", help="JSON file of the connector config, or -")]
offsets_app = typer.Typer(help="Committed source positions / sink offsets (Kafka's offsets API).", no_args_is_help=True)
allocated_app = typer.Typer(help="What the Spark pools run (RocketMQ's allocated views).", no_args_is_help=True)
app.add_typer(offsets_app, name="offsets")
app.add_typer(allocated_app, name="allocated")


def _emit(value: Any, output: str, table: Table | None = None) -> None:
    if output == "json" or table is None:
        print_json(value)
    else:
        out.print(table)


@app.command()
def create(name: str, config: ConfigOpt) -> None:
    """Validate a connector config and register the connector (fails if it exists)."""
    with backend() as svc:
        info = svc.create(name, load_config(config))
        out.print(f"created {info['type']} connector [bold]{name}[/bold] ({len(info['tasks'])} task(s))")


@app.command()
def put(name: str, config: ConfigOpt) -> None:
    """Create the connector, or replace its config if it exists (Kafka's PUT /connectors/NAME/config)."""
    with backend() as svc:
        created, info = svc.put_config(name, load_config(config))
        verb = "created" if created else "updated"
        out.print(f"{verb} {info['type']} connector [bold]{name}[/bold] ({len(info['tasks'])} task(s))")


@app.command("list")
def list_connectors(output: OutputOpt = "table") -> None:
    """Connectors with their states."""
    with backend() as svc:
        expanded = svc.expanded(["status"])
    table = Table("connector", "type", "state", "tasks")
    for name, entry in sorted(expanded.items()):
        st = entry["status"]
        tasks = ", ".join(f"{t['id']}:{t['state']}" for t in st["tasks"])
        table.add_row(name, st["type"].upper(), st["connector"]["state"], tasks)
    _emit(sorted(expanded) if output == "json" else expanded, output, table)


def _errors_cell(counts: dict[str, int]) -> str:
    """A run's `errors.*` counts: records failed (skipped), sent to the dead-letter topic, retries."""
    shown = [
        f"{counts[key]} {label}"
        for key, label in (("failed", "failed"), ("dead_lettered", "to DLQ"), ("retried", "retries"))
        if counts.get(key)
    ]
    return ", ".join(shown)


@app.command()
def status(name: str, output: OutputOpt = "table") -> None:
    """Connector and task states (with a failed task's trace) and the last runs."""
    with backend() as svc:
        st, runs = svc.status(name), svc.runs(name, 5)
    if output == "json":
        print_json({**st, "runs": runs})
        return
    out.print(f"[bold]{name}[/bold] ({st['type'].upper()}): {st['connector']['state']}")
    tasks = Table("task", "state", "worker", "trace")
    for t in st["tasks"]:
        last = (t.get("trace") or "").strip().splitlines()
        tasks.add_row(str(t["id"]), t["state"], t.get("worker_id") or "", last[-1] if last else "")
    out.print(tasks)
    if runs:
        table = Table("run", "task", "state", "rows", "errors", "work s", "duration s", "finished")
        for r in runs:
            table.add_row(
                str(r["run_id"]),
                str(r["task"]),
                r["state"],
                str(r["stats"].get("rows", "")),
                _errors_cell(r["stats"].get("errors") or {}),
                str(r["stats"].get("work_s", "")),
                str(r.get("duration_s") or ""),
                r["finished_at"] or "",
            )
        out.print(table)


@app.command()
def config(name: str) -> None:
    """A connector's config and task configs (secrets masked)."""
    with backend() as svc:
        print_json({"name": name, "config": svc.config(name), "tasks": [t["config"] for t in svc.tasks(name)]})


@app.command()
def delete(name: str) -> None:
    """Delete a connector (its positions and offsets stay, as in Kafka Connect)."""
    with backend() as svc:
        svc.delete(name)
    out.print(f"deleted connector [bold]{name}[/bold]")


def _set_state(names: list[str], state: str) -> None:
    with backend() as svc:
        for name in names:
            warning = svc.set_state(name, state)
            out.print(f"connector [bold]{name}[/bold] is {state}")
            if warning:
                err.print(f"warning: its DAG was not updated: {warning}", highlight=False)


@app.command()
def pause(name: str) -> None:
    """Pause a connector: its DAG is paused and its tasks do not run."""
    _set_state([name], TargetState.PAUSED)


@app.command()
def resume(name: str) -> None:
    """Resume a paused or stopped connector."""
    _set_state([name], TargetState.RUNNING)


@app.command()
def stop(name: str) -> None:
    """Stop a connector: no runs; config and offsets stay (unlike RocketMQ's stop, it can be resumed)."""
    _set_state([name], TargetState.STOPPED)


@app.command("stop-all")
def stop_all() -> None:
    """Stop every connector."""
    with backend() as svc:
        names = svc.names()
    _set_state(names, TargetState.STOPPED)


@app.command()
def restart(
    name: str,
    include_tasks: Annotated[bool, typer.Option("--include-tasks", help="Restart the tasks too")] = False,
    only_failed: Annotated[bool, typer.Option("--only-failed", help="Only FAILED tasks")] = False,
) -> None:
    """Clear failed task states (and trigger a run when Airflow is there)."""
    with backend() as svc:
        st = svc.restart(name, include_tasks=include_tasks, only_failed=only_failed)
    out.print(f"restarted [bold]{name}[/bold]: " + ", ".join(f"{t['id']}:{t['state']}" for t in st["tasks"]))


@app.command()
def trigger(name: str) -> None:
    """Start a run of the connector's DAG in Airflow now."""
    with backend() as svc:
        run = svc.trigger(name)
    out.print(f"triggered DAG run [bold]{run['dag_run_id']}[/bold] of {run.get('dag_id', name)}")


@app.command()
def plugins(
    output: OutputOpt = "table",
    reload: Annotated[bool, typer.Option("--reload", help="Scan entry points and the plugin path again")] = False,
) -> None:
    """Plugins: connectors, transformations and predicates (entry points and CONNECT_PLUGIN_PATH)."""
    with backend() as svc:
        if reload:
            svc.reload_plugins()
        found = svc.plugins()
    table = Table()
    # Names are what configs use (`transforms.x.type=Cast$Value`): never cut short, whatever the width.
    table.add_column("name", min_width=max((len(p["name"]) for p in found), default=4), no_wrap=True)
    table.add_column("type")
    table.add_column("version")
    table.add_column("class", overflow="fold")
    table.add_column("aliases", overflow="fold")
    for p in found:
        table.add_row(p["name"], p["type"], p["version"], p["class"], "\n".join(p["aliases"]))
    _emit(found, output, table)


@app.command("cluster-info")
def cluster_info(output: OutputOpt = "table") -> None:
    """Workers of the cluster (RocketMQ's getClusterInfo)."""
    with backend() as svc:
        workers = svc.cluster_info()
    table = Table("worker (Spark pool)", "spark master", "alive", "allocated")
    for w in workers:
        table.add_row(w["workerId"], w["sparkMaster"], str(w["alive"]), ", ".join(w["allocated"]))
    _emit(workers, output, table)


PoolOpt = Annotated[str | None, typer.Option(help="Only what this Spark pool runs")]


@allocated_app.command("connectors")
def allocated_connectors(pool: PoolOpt = None) -> None:
    """Connector configs allocated to a Spark pool, or to any (secrets masked)."""
    with backend() as svc:
        print_json(svc.allocated_connectors(pool))


@allocated_app.command("tasks")
def allocated_tasks(pool: PoolOpt = None) -> None:
    """Task configs allocated to a Spark pool, or to any (secrets masked)."""
    with backend() as svc:
        print_json(svc.allocated_tasks(pool))


@offsets_app.command("get")
def offsets_get(name: str, output: OutputOpt = "table") -> None:
    """Committed positions (source) or offsets (sink)."""
    with backend() as svc:
        offsets = svc.offsets(name)
    table = Table("partition", "offset")
    for entry in offsets["offsets"]:
        table.add_row(str(entry["partition"]), str(entry["offset"]))
    _emit(offsets, output, table)


@offsets_app.command("reset")
def offsets_reset(
    name: str,
    to_time: Annotated[
        str | None,
        typer.Option("--to-time", help="A sink's offsets to the first records committed at or after this ISO time."),
    ] = None,
) -> None:
    """Forget every position/offset (the connector must be STOPPED): its next run starts over; with
    --to-time, a sink replays from that time."""
    with backend() as svc:
        out.print(svc.reset_offsets(name, to_time)["message"])
