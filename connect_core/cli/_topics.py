"""`connect topics`: what each topic keeps, who reads it and how far behind; its settings
(retention, cleanup policy); cleaning the topics now; deleting one; its schema history."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape
from rich.table import Column, Table

from connect_core.cli._app import OutputOpt, app, backend, out, print_json

if TYPE_CHECKING:
    from connect_core.runtime.topics.schemas import SchemaDiff

_MAX_VERSION = 2**31 - 1  # a schema version is a Postgres integer (and Schema Registry's version id)

topics_app = typer.Typer(
    help="Topics: segments, end offsets, retention, compaction, the sinks reading them.", no_args_is_help=True
)
app.add_typer(topics_app, name="topics")


def _retention(ms: int) -> str:
    return "for ever" if ms < 0 else f"{ms / 3_600_000:g} h"


def _bytes(n: int) -> str:
    if n < 0:
        return "no limit"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:g} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return str(n)


@topics_app.command("list")
def list_topics(output: OutputOpt = "table") -> None:
    """Every topic: partitions, segments, rows and bytes kept, end offsets, retention, cleanup policy,
    its sinks' lag."""
    with backend() as svc:
        topics = svc.list_topics()
    if output == "json":
        print_json(topics)
        return
    topic = Column("topic", no_wrap=True)  # names whole; the other columns wrap
    table = Table(
        topic, "partitions", "segments", "rows kept", "size", "end offsets", "retention", "policy", "sinks (lag)"
    )
    for t in topics:
        sinks = ", ".join(f"{s['connector']}[{s['partition']}]: {s['lag']}" for s in t["sinks"]) or "none"
        ends = ", ".join(f"{p}: {o}" for p, o in sorted(t["end_offsets"].items(), key=lambda i: int(i[0])))
        retention = _retention(t["retention.ms"])
        if t.get("retention.bytes", -1) >= 0:
            retention += f", {_bytes(t['retention.bytes'])}/partition"
        table.add_row(
            t["name"],
            str(t["partitions"]),
            str(t["segments"]),
            str(t["rows"]),
            _bytes(t.get("size_bytes", 0)),
            ends,
            retention,
            t.get("cleanup.policy", "delete"),
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
    config: Annotated[
        list[str] | None,
        typer.Option(
            "--config",
            "-c",
            help="KEY=VALUE (repeatable): retention.ms, retention.bytes, cleanup.policy (delete, compact, "
            "compact,delete), delete.retention.ms, segment.bytes; KEY= (empty) goes back to the default.",
        ),
    ] = None,
) -> None:
    """Set a topic's settings (Kafka's `kafka-configs --alter --add-config`)."""
    changes: dict[str, Any] = {}
    for item in config or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise typer.BadParameter(f"`{item[:100]}` is not KEY=VALUE", param_hint="--config")
        changes[key.strip()] = value.strip() or None
    if retention_ms is not None or default_retention:
        changes["retention.ms"] = None if default_retention else retention_ms
    if not changes:
        raise typer.BadParameter("give --retention-ms MS, --default-retention or --config KEY=VALUE")
    with backend() as svc:
        topic = svc.set_topic_config(name, changes)
    out.print(
        f"{name}: retention {_retention(topic['retention.ms'])}, retention.bytes {_bytes(topic['retention.bytes'])}, "
        f"cleanup.policy {topic['cleanup.policy']}",
        highlight=False,
    )


@topics_app.command("delete")
def delete(
    name: str,
    force: Annotated[bool, typer.Option("--force", help="Delete it even while connectors read or write it.")] = False,
) -> None:
    """Delete a topic: its segments (rows, then files) and the sinks' offsets in it. Refused while a
    connector reads or writes it, unless --force."""
    with backend() as svc:
        done = svc.delete_topic(name, force)
    out.print(f"deleted topic {name}: {done['segments']} segment(s), {done['rows']} row(s)", highlight=False)


@topics_app.command("prune")
def prune(
    dry_run: Annotated[bool, typer.Option("--dry-run", help="List what would happen; change nothing.")] = False,
) -> None:
    """Clean the topics now (the rebalance sensor does it hourly): delete the segments past retention
    that every sink reading them has committed, compact `compact` topics, merge small segments."""
    with backend() as svc:
        done = svc.apply_topic_retention(dry_run)
    verb = "would delete" if dry_run else "deleted"
    out.print(f"{verb} {len(done['segments'])} segment(s), {done['rows']} row(s)")
    compacted, merged = done.get("compacted", []), done.get("merged", [])
    if compacted:
        removed = sum(c["rows_before"] - c["rows_after"] for c in compacted)
        out.print(
            f"{'would compact' if dry_run else 'compacted'} {len(compacted)} segment(s): {removed} record(s) removed"
        )
    if merged:
        count = sum(m["segments"] for m in merged)
        out.print(f"{'would merge' if dry_run else 'merged'} {count} segment(s) into {len(merged)}")
    if dry_run:
        for s in done["segments"]:
            out.print(f"  delete {s['topic']}[{s['partition']}] {s['offsets'][0]}..{s['offsets'][1]} ({s['reason']})")
        for c in compacted:
            out.print(
                f"  compact {c['topic']}[{c['partition']}] {c['start_offset']}..{c['end_offset']}: "
                f"{c['rows_before']} → {c['rows_after']} rows"
            )
        for m in merged:
            out.print(
                f"  merge {m['topic']}[{m['partition']}] {m['start_offset']}..{m['end_offset']}: "
                f"{m['segments']} segments"
            )


@topics_app.command("schema")
def schema(
    name: str,
    version: Annotated[
        int | None,
        typer.Option(
            "--version", min=1, max=_MAX_VERSION, help="This version of the topic's schema (default: the latest)."
        ),
    ] = None,
    diff: Annotated[
        tuple[int, int] | None,
        typer.Option(
            "--diff",
            help="What changed from version A to version B: columns added, dropped, retyped, key.",
            metavar="A B",
        ),
    ] = None,
    output: OutputOpt = "table",
) -> None:
    """A topic's schema (its value columns, their types and nullability, its key columns) from the
    topic's schema history, or what changed between two versions (--diff A B)."""
    from connect_core.runtime.topics.schemas import diff_schemas

    if diff is not None and not all(1 <= v <= _MAX_VERSION for v in diff):
        raise typer.BadParameter(f"versions are numbered from 1 to {_MAX_VERSION}", param_hint="--diff")
    with backend() as svc:
        if diff is None:
            found = svc.topic_schema(name, version)
        else:
            old, new = (svc.topic_schema(name, v) for v in diff)
    if diff is None:
        if output == "json":
            print_json(found)
        else:
            _print_schema(found)
        return
    changes = diff_schemas(old["schema"], new["schema"])
    if output == "json":
        print_json({"topic": name, "from": old["version"], "to": new["version"], **changes.to_dict()})
        return
    out.print(f"{_shown(name)}: version {old['version']} → {new['version']}", highlight=False)
    for line in _diff_lines(changes):
        out.print(f"  {_shown(line)}", highlight=False)


def _print_schema(found: dict[str, Any]) -> None:
    by = f" of `{found['connector']}`" if found.get("connector") else ""
    out.print(
        f"{_shown(found['topic'])}: version {found['version']} (id {found['id']}), introduced by run "
        f"{found['run_id']}{_shown(by)} at {_shown(str(found['created_at']))}",
        highlight=False,
        soft_wrap=True,
    )
    schema = found["schema"]
    key = set(schema.get("key", []))
    table = Table("#", Column("column", no_wrap=True), "type", "nullable", "key")
    for i, column in enumerate(schema.get("columns", []), start=1):
        table.add_row(
            str(i),
            _shown(column["name"]),
            _shown(column["type"]),
            "yes" if column["nullable"] else "no",
            "key" if column["name"] in key else "",
        )
    out.print(table)
    missing = [k for k in schema.get("key", []) if k not in {c["name"] for c in schema.get("columns", [])}]
    if schema.get("key_type"):
        out.print(f"key: {_shown(schema['key_type'])} (not a struct of columns)", highlight=False)
    elif missing:
        out.print(f"key columns not in the value: {_shown(', '.join(missing))}", highlight=False)


def _shown(text: str) -> str:
    """A name or type from the records (a source table's, a JSON document's) as literal text on one
    line: no rich markup, and a control character (an ESC would drive the terminal) escaped."""
    from connect_core.runtime.security.limits import one_line

    return escape(one_line(text))


def _nullable(flag: bool) -> str:
    return "nullable" if flag else "not null"


def _diff_lines(changes: SchemaDiff) -> list[str]:
    if changes.empty:
        return ["no changes"]
    lines = [f"+ added      {c['name']} {c['type']} ({_nullable(c['nullable'])})" for c in changes.added]
    lines += [f"- dropped    {c['name']} {c['type']}" for c in changes.dropped]
    lines += [f"~ retyped    {c['name']}: {c['from']} → {c['to']}" for c in changes.retyped]
    lines += [f"~ nested     {n}: its nested fields' nullability" for n in changes.nested]
    lines += [f"~ nullable   {c['name']}: {_nullable(c['from'])} → {_nullable(c['to'])}" for c in changes.nullability]
    if changes.key is not None:
        lines.append(f"~ key        {_key(changes.key['from'])} → {_key(changes.key['to'])}")
    return lines


def _key(key: list[str] | str) -> str:
    """Key columns as `a, b` (`none` for no key); a key that is no struct of columns, as its type."""
    if isinstance(key, str):
        return key
    return ", ".join(key) or "none"
