"""`connect schema`: the shape a connector last let through per topic, a change it paused on
(`schema.propagation`), and accepting that change."""

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
