"""`connect schema`: the shape a connector last let through per topic, a change it paused on
(`schema.propagation`), and accepting that change; `connect snapshot` and `connect resync`: re-reading
tables of a source."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from connect_core.cli._app import OutputOpt, app, backend, err, out, print_json
from connect_core.runtime.security.limits import one_line

schema_app = typer.Typer(
    help="Schema contracts: what each connector let through, and the changes it paused on.", no_args_is_help=True
)
app.add_typer(schema_app, name="schema")


@schema_app.command("show")
def show(name: str, output: OutputOpt = "table") -> None:
    """Each topic's shape as the connector last let it through, and the change it paused on."""
    with backend() as svc:
        found = svc.schemas(name)
    if output == "json":
        print_json(found)
        return
    table = Table("topic", "columns", "key", "pending change")
    for topic, ref in found["topics"].items():
        columns = ", ".join(f"{c['name']} {c['type']}" for c in ref["schema"].get("columns", []))
        key = ", ".join(str(k) for k in ref["schema"].get("key", []))
        table.add_row(_text(topic), _text(columns), _text(key), _pending(ref))
    out.print(table)


def _text(value: str) -> str:
    """Names from the records, as text for the terminal: control characters escaped (an ESC must not
    reach it), markup escaped."""
    return escape(one_line(str(value)))


def _pending(ref: dict[str, Any]) -> str:
    pending = ref.get("pending")
    if not pending:
        return ""
    state = "accepted, next run applies it" if pending.get("accepted") else "waiting: `connect schema accept`"
    return _text(f"{pending['reason']} ({state})")


@schema_app.command("accept")
def accept(
    name: str,
    topic: Annotated[
        list[str] | None, typer.Option("--topic", "-t", help="A topic whose change to accept (default: all).")
    ] = None,
) -> None:
    """Accept the schema change the connector paused on, and resume it: its next run lets the
    change through to the target."""
    for given in topic or []:
        if not given.isprintable() or given.encode("utf-8", "surrogatepass").decode("utf-8", "replace") != given:
            err.print(f"[red]error:[/red] --topic {_text(given)!r} is no topic name")
            raise typer.Exit(2)
    with backend() as svc:
        result = svc.accept_schema(name, topic or None)
    if result.get("warning"):
        err.print(f"[yellow]warning:[/yellow] {escape(result['warning'])}")
    then = "resumed" if result.get("resumed") else "not paused: its state is unchanged"
    out.print(f"accepted the change of {_text(', '.join(result['accepted']))}; `{_text(name)}` {then}")


@app.command("snapshot")
def snapshot(
    name: str,
    tables: Annotated[list[str] | None, typer.Argument(help="Tables to re-read (`schema.table`).")] = None,
    stop: Annotated[bool, typer.Option("--stop", help="Stop the incremental snapshot (of TABLES, or all).")] = False,
    pause: Annotated[bool, typer.Option("--pause", help="Pause the incremental snapshot.")] = False,
    resume: Annotated[bool, typer.Option("--resume", help="Resume a paused incremental snapshot.")] = False,
) -> None:
    """Re-read tables of a CDC source while its changes keep streaming (an incremental snapshot, sent
    as Debezium's signal over REST); or stop, pause or resume one."""
    chosen = [kind for kind, on in (("stop", stop), ("pause", pause), ("resume", resume)) if on]
    if len(chosen) > 1 or (not chosen and not tables):
        err.print("[red]error:[/red] name the tables to snapshot, or one of --stop, --pause, --resume")
        raise typer.Exit(2)
    kind = f"{chosen[0]}-snapshot" if chosen else "execute-snapshot"
    data: dict[str, Any] = {"data-collections": list(tables)} if tables else {}
    if kind == "execute-snapshot":
        data["type"] = "incremental"
    with backend() as svc:
        sent = svc.send_signal(name, None, kind, data)
    out.print(f"signal {_text(sent['id'])} ({kind}) queued for `{_text(name)}`'s next run")


@app.command("resync")
def resync(
    name: str,
    table: Annotated[str, typer.Option("--table", "-t", help="The table to re-read, as `table.whitelist` names it.")],
    mode: Annotated[
        str,
        typer.Option(
            "--mode", help="retain: re-read rows are upserted; replace: the sinks swap the re-read copy in at its end."
        ),
    ] = "retain",
) -> None:
    """Re-read one table of a JDBC source from the beginning, the other tables keeping their positions
    (Airbyte's refresh); under `replace` the JDBC and lakehouse sinks swap the new copy in at its end."""
    with backend() as svc:
        sent = svc.resync(name, table, mode)
    out.print(
        f"re-read of {_text(sent['table'])} ({_text(sent['mode'])}) queued for `{_text(name)}`'s next run "
        f"(signal {_text(sent['id'])})"
    )
