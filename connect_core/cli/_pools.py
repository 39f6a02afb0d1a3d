"""Spark pool commands (local or over REST): the pools are Connect's workers."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from connect_core.cli._app import OutputOpt, _errors, app, backend, out, print_json, runtime
from connect_core.runtime.spark.connect import DEFAULT_SERVER_MEMORY, public_master
from connect_core.sdk.errors import ConfigError

#: As a managed cluster's auto-termination: an hour without a run.
DEFAULT_IDLE_MINUTES = 60.0

pools_app = typer.Typer(help="Spark pools: where tasks run (the Connect workers).", no_args_is_help=True)
app.add_typer(pools_app, name="pools")
PairsOpt = Annotated[list[str] | None, typer.Option(help="key=value (repeatable)")]


def _pairs(option: str, values: list[str] | None) -> dict[str, str]:
    pairs = {}
    for item in values or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"--{option} takes key=value, not `{item}`")
        pairs[key] = value
    return pairs


@pools_app.command("add")
def pools_add(
    name: str,
    master: Annotated[
        str, typer.Option(help="local[n], spark://host:port, yarn, k8s://… or a Spark Connect sc://host:port")
    ],
    capacity: Annotated[int, typer.Option(help="Concurrent tasks the pool takes (its Airflow pool's slots)")] = 1,
    conf: PairsOpt = None,
    label: PairsOpt = None,
    probe_url: Annotated[
        str | None, typer.Option(help="Liveness URL (default for spark://host: http://host:8080/json)")
    ] = None,
) -> None:
    """Register (or update) a Spark pool."""
    spec = {
        "master": master,
        "capacity": capacity,
        "conf": _pairs("conf", conf),
        "labels": _pairs("label", label),
        "probe_url": probe_url,
    }
    with backend() as svc:
        created, _pool = svc.put_pool(name, spec)
    out.print(
        f"{'added' if created else 'updated'} pool [bold]{name}[/bold] ({public_master(master)}, capacity {capacity})"
    )


@pools_app.command("start")
def pools_start(
    name: str,
    spark_master: Annotated[
        str, typer.Option(help="Where the server runs its work: local[n], spark://…, yarn")
    ] = "local[*]",
    port: Annotated[int | None, typer.Option(help="Its gRPC port (default: a free one)")] = None,
    bind: Annotated[str, typer.Option(help="The address it listens on")] = "127.0.0.1",
    capacity: Annotated[int, typer.Option(help="Concurrent tasks the pool takes")] = 2,
    memory: Annotated[
        str, typer.Option(help="The server's JVM heap (spark.driver.memory): bounds its memory with `local[*]`")
    ] = DEFAULT_SERVER_MEMORY,
    idle_timeout: Annotated[
        float, typer.Option(help="Minutes without a run after which server and worker stop (0: never)")
    ] = DEFAULT_IDLE_MINUTES,
    conf: PairsOpt = None,
) -> None:
    """Start a warm pool on this machine and register it as pool NAME: a Spark Connect server and a
    worker process that runs the pool's tasks as the server's clients, a session each, with no
    spark-submit, JVM or Python start-up per run."""
    from connect_core.runtime.execution.warm_pool import start_pool

    if idle_timeout < 0:
        raise typer.BadParameter("--idle-timeout is minutes, 0 or more")
    with runtime() as rt:
        info = start_pool(
            rt,
            name,
            capacity=capacity,
            spark_master=spark_master,
            port=port,
            bind=bind,
            conf={"spark.driver.memory": memory, **_pairs("conf", conf)},
            idle_timeout=idle_timeout * 60,
        )
    idle = f"stops after {idle_timeout:g} min idle" if idle_timeout else "never stops by itself"
    out.print(
        f"pool [bold]{name}[/bold]: Spark Connect server on {bind}:{info.port} (pid {info.pid}), "
        f"up in {info.started_s:.1f} s, warmed in {info.warmed_s:.1f} s; worker pid {info.worker_pid}; {idle}; "
        f"logs in {info.log_path.parent}"
    )


@pools_app.command("stop")
def pools_stop(name: str) -> None:
    """Stop the warm pool `connect pools start` started: its worker, then its Spark Connect server
    (the pool stays registered: it fails its probes, and the rebalance sensor moves its tasks)."""
    from connect_core.runtime.execution.warm_pool import stop_pool
    from connect_core.runtime.settings import Settings

    with _errors():  # no metadata store needed: a pool can be stopped while its database is down
        stopped = stop_pool(Settings(), name)
    out.print(f"pool [bold]{name}[/bold]: server {'stopped' if stopped else 'was not running'}")


@pools_app.command("remove")
def pools_remove(
    name: str, missing_ok: Annotated[bool, typer.Option(help="No error if there is no such pool")] = False
) -> None:
    """Remove a Spark pool (its work moves at the next rebalance)."""
    with backend() as svc:
        if missing_ok and name not in {p["name"] for p in svc.pools()}:
            out.print(f"no pool [bold]{name}[/bold]")
            return
        svc.delete_pool(name)
    out.print(f"removed pool [bold]{name}[/bold]")


@pools_app.command("heartbeat")
def pools_heartbeat(name: str) -> None:
    """Report a pool alive (for pools that cannot be probed, e.g. from a cron job next to YARN)."""
    with backend() as svc:
        svc.pool_heartbeat(name)


@pools_app.command("list")
def pools_list(output: OutputOpt = "table") -> None:
    """Pools with their health and what runs on them."""
    with backend() as svc:
        found = svc.pools()
    if output == "json":
        print_json(found)
        return
    table = Table("pool", "kind", "master", "capacity", "alive", "last heartbeat s", "probe", "running")
    for p in found:
        probe = p["probe"]
        table.add_row(
            p["name"],
            p.get("kind", "") + (" (standby)" if p.get("standby") else ""),
            p["master"],
            str(p["capacity"]),
            "yes" if p["alive"] else "NO",
            f"{p['seconds_since_heartbeat']:.0f}",
            "" if not probe else ("ok" if probe.get("ok") else str(probe.get("error", "failed"))),
            ", ".join(p["running"]),
        )
    out.print(table)


@app.command()
def rebalance(
    strategy: Annotated[
        str | None, typer.Option(help="sticky, default or consistent-hash (default CONNECT_REBALANCE_STRATEGY)")
    ] = None,
) -> None:
    """Probe the pools and allocate connectors and tasks over the live ones now (the sensor does this on changes)."""
    with backend() as svc:
        result = svc.rebalance(strategy)
    out.print(f"generation {result['generation']}: {result['moved']} item(s) moved ({result['reason']})")


@app.command()
def rebalances(limit: int = 10, output: OutputOpt = "table") -> None:
    """The latest rebalances: when, why, how much moved."""
    with backend() as svc:
        found = svc.rebalances(limit)
    if output == "json":
        print_json(found)
        return
    table = Table("generation", "at", "strategy", "moved", "reason")
    for r in found:
        table.add_row(str(r["generation"]), r["at"], r["strategy"], str(r["moved"]), r["reason"])
    out.print(table)
