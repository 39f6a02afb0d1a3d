"""`connect topics`: what each topic keeps, who reads it and how far behind; its retention."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Column, Table

from connect_core.cli._app import OutputOpt, app, backend, out, print_json

topics_app = typer.Typer(help="Topics: segments, end offsets, retention, the sinks reading them.", no_args_is_help=True)
app.add_typer(topics_app, name="topics")


def _retention(ms: int) -> str:
    return "for ever" if ms < 0 else f"{ms / 3_600_000:g} h"


@topics_app.command("list")
def list_topics(output: OutputOpt = "table") -> None:
    """Every topic: partitions, segments and rows kept, end offsets, retention, its sinks' lag."""
    with backend() as svc:
        topics = svc.list_topics()
    if output == "json":
        print_json(topics)
        return
    topic = Column("topic", no_wrap=True)  # names whole; the other columns wrap
    table = Table(topic, "partitions", "segments", "rows kept", "end offsets", "retention", "sinks (lag)")
    for t in topics:
        sinks = ", ".join(f"{s['connector']}[{s['partition']}]: {s['lag']}" for s in t["sinks"]) or "none"
        ends = ", ".join(f"{p}: {o}" for p, o in sorted(t["end_offsets"].items(), key=lambda i: int(i[0])))
        table.add_row(
            t["name"],
            str(t["partitions"]),
            str(t["segments"]),
            str(t["rows"]),
            ends,
            _retention(t["retention.ms"]),
            sinks,
        )
    out.print(table)


@topics_app.command("describe")
def describe(name: str) -> None:
    """One topic, as JSON."""
    with backend() as svc:
        print_json(svc.describe_topic(name))


@topics_app.command("alter")
def alter(
    name: str,
    retention_ms: Annotated[
        int | None, typer.Option("--retention-ms", help="Kafka's retention.ms: -1 for ever; 0 or more, ms.")
    ] = None,
    default_retention: Annotated[
        bool, typer.Option("--default-retention", help="Back to the runtime's default retention.")
    ] = False,
) -> None:
    """Set a topic's retention."""
    if retention_ms is None and not default_retention:
        raise typer.BadParameter("give --retention-ms MS or --default-retention")
    with backend() as svc:
        topic = svc.set_topic_config(name, {"retention.ms": None if default_retention else retention_ms})
    out.print(f"{name}: retention {_retention(topic['retention.ms'])}")


@topics_app.command("prune")
def prune(
    dry_run: Annotated[bool, typer.Option("--dry-run", help="List what would go; delete nothing.")] = False,
) -> None:
    """Delete the segments past retention that every sink reading them has committed (the rebalance
    sensor does it hourly)."""
    with backend() as svc:
        done = svc.apply_topic_retention(dry_run)
    verb = "would delete" if dry_run else "deleted"
    out.print(f"{verb} {len(done['segments'])} segment(s), {done['rows']} row(s)")
