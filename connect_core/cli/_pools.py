"""Spark pool commands (local or over REST): the pools are Connect's workers."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from connect_core.cli._app import OutputOpt, app, backend, out, print_json
from connect_core.sdk.errors import ConfigError

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
    master: Annotated[str, typer.Option(help="local[n], spark://host:port, yarn or k8s://…")],
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
    out.print(f"{'added' if created else 'updated'} pool [bold]{name}[/bold] ({master}, capacity {capacity})")


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
    table = Table("pool", "master", "capacity", "alive", "last heartbeat s", "probe", "running")
    for p in found:
        probe = p["probe"]
        table.add_row(
            p["name"],
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
