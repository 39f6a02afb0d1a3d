"""`connect apply DIR`: make the connectors what a directory of JSON files says, as `kubectl apply`.

Each `*.json` file in DIR (not in its subdirectories; names starting with `.` are skipped, as
editors' lock and swap files) holds one connector, in either shape Kafka Connect users keep:

* Kafka's create body: `{"name": "x", "config": {...}}` (with `initial_state`, used when created);
* a flat config with the name inside: `{"name": "x", "connector.class": ..., ...}`.

Every file is read and validated first (the runtime's validation, as a create or PUT does), and
every file's problems are reported; nothing is written while any file is invalid, unless
`--continue-on-error`. Then each connector is created if missing, updated if its config differs,
and left as it is otherwise (no new config version: its running tasks are not fenced), so a
second run reports every connector unchanged. Works on the metadata store, or with `--url` over
REST (`PUT /connectors/{name}/apply`). Config values are never printed: only keys.
"""

from __future__ import annotations

import json
import logging
import os
import stat
import unicodedata
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from connect_core.cli._app import OutputOpt, app, backend, err, out, print_json
from connect_core.runtime.security import mask_text
from connect_core.runtime.store.db import store_fault
from connect_core.runtime.store.states import TargetState
from connect_core.sdk.errors import ConfigError, ConnectError, RetriableError

__all__ = ["MAX_FILE_BYTES", "Manifest", "read_manifests"]

log = logging.getLogger(__name__)

#: The largest file read: a connector config, as the REST API's largest body (1 MiB).
MAX_FILE_BYTES = 1024 * 1024
#: Top-level keys of Kafka's create body.
_KAFKA_BODY_KEYS = frozenset({"name", "config", "initial_state"})


@dataclass
class Manifest:
    """One file of DIR: the connector it defines, or why it defines none."""

    file: str
    name: str | None = None
    config: dict[str, Any] = field(default_factory=dict)
    initial_state: str = TargetState.RUNNING
    problem: str | None = None


@dataclass
class Outcome:
    file: str
    name: str | None
    #: created, updated, unchanged; in a dry run: create, update, unchanged; invalid, failed, skipped
    result: str
    detail: str = ""
    changed: list[str] = field(default_factory=list)


def read_manifests(directory: Path, max_bytes: int = MAX_FILE_BYTES) -> list[Manifest]:
    """Every `*.json` file of `directory`, parsed; a file that cannot be has its `problem` set."""
    try:
        root = directory.resolve(strict=True)
    except (OSError, RuntimeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else exc
        raise ConfigError(f"directory `{directory}` cannot be read: {reason}") from exc
    if not root.is_dir():
        raise ConfigError(f"`{directory}` is not a directory; give the directory that holds the *.json files")
    with os.scandir(root) as entries:
        files = sorted(e.name for e in entries if e.name.endswith(".json") and not e.name.startswith("."))
    manifests = [_manifest(root, filename, max_bytes) for filename in files]
    _flag_duplicates(manifests)
    return manifests


def _manifest(root: Path, filename: str, max_bytes: int) -> Manifest:
    try:
        body = _load(root, filename, max_bytes)
    except ConfigError as exc:
        return Manifest(filename, problem=str(exc))
    return _parse(filename, body)


def _load(root: Path, filename: str, max_bytes: int) -> Any:
    """The JSON value of `root/filename`, read only if it is a regular file inside `root` and not
    larger than `max_bytes`; ConfigError says why not."""
    try:
        real = (root / filename).resolve(strict=True)
    except (OSError, RuntimeError) as exc:  # a dangling symlink, a loop of them
        raise ConfigError(f"cannot be read: {exc.strerror if isinstance(exc, OSError) else exc}") from exc
    if not real.is_relative_to(root):
        raise ConfigError("is a symbolic link to a file outside the directory; copy the file in instead")
    try:
        # O_NOFOLLOW: not a link swapped in since; O_NONBLOCK: a FIFO does not hang the command.
        fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise ConfigError(f"cannot be opened: {exc.strerror}") from exc
    try:
        info = os.fstat(fd)  # of what was opened, not of what the name points at now
        if not stat.S_ISREG(info.st_mode):
            raise ConfigError("is not a regular file")
        if info.st_size > max_bytes:
            raise ConfigError(
                f"is {info.st_size:,} bytes, more than the {max_bytes:,} bytes a connector config may have"
            )
        data = _read_at_most(fd, max_bytes + 1)
    finally:
        os.close(fd)
    if len(data) > max_bytes:  # it grew since
        raise ConfigError(f"is more than the {max_bytes:,} bytes a connector config may have")
    try:
        return json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ConfigError(f"is not UTF-8 text (byte {exc.start})") from exc
    except json.JSONDecodeError as exc:
        raise ConfigError(f"is not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}") from exc
    except (ValueError, RecursionError) as exc:  # a number of 5,000 digits; nesting too deep for the parser
        raise ConfigError(f"is not JSON this command can read: {type(exc).__name__}") from exc


def _read_at_most(fd: int, limit: int) -> bytes:
    chunks, size = [], 0
    while size < limit:
        chunk = os.read(fd, min(65536, limit - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def _parse(filename: str, body: Any) -> Manifest:
    """Kafka's create body or a flat config with its name inside (see the module's doc)."""
    manifest = Manifest(filename)
    if not isinstance(body, dict):
        manifest.problem = 'must hold a JSON object: {"name": …, "config": {…}} or a config with `name` inside'
        return manifest
    if isinstance(body.get("config"), dict):  # Kafka's create body
        unknown = sorted(set(body) - _KAFKA_BODY_KEYS)
        if unknown:
            shown = ", ".join(f"`{_short(k)}`" for k in unknown[:5])
            manifest.problem = f"has key(s) {shown} next to `config`: a Kafka body has only name, config, initial_state"
            return manifest
        config, state = body["config"], body.get("initial_state", TargetState.RUNNING)
        if "name" in config and config["name"] != body.get("name"):
            manifest.problem = (
                f"`config.name` ({_short(config['name'])}) differs from `name` ({_short(body.get('name'))})"
            )
            return manifest
        if not isinstance(state, str):
            manifest.problem = "`initial_state` must be RUNNING, PAUSED or STOPPED"
            return manifest
        manifest.initial_state = state
    else:
        config = body
    name = body.get("name")
    if not isinstance(name, str) or not name:
        manifest.problem = "has no connector `name` (a non-empty string)"
        return manifest
    manifest.name, manifest.config = name, config
    return manifest


def _flag_duplicates(manifests: list[Manifest]) -> None:
    files: dict[str, list[str]] = {}
    for m in manifests:
        if m.name is not None:
            files.setdefault(m.name, []).append(m.file)
    for m in manifests:
        if m.name is not None and len(files[m.name]) > 1:
            m.problem = f"connector `{m.name}` is defined in {len(files[m.name])} files: {', '.join(files[m.name])}"


def _short(value: Any, limit: int = 60) -> str:
    text = value if isinstance(value, str) else json.dumps(value)
    return text if len(text) <= limit else text[:limit] + "…"


@app.command("apply")
def apply_command(
    directory: Annotated[Path, typer.Argument(help="Directory of *.json connector configs", metavar="DIR")],
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Validate and show the plan; write nothing")] = False,
    continue_on_error: Annotated[
        bool, typer.Option("--continue-on-error", help="Apply the valid files even when others are invalid")
    ] = False,
    parallel: Annotated[
        int, typer.Option(min=1, max=32, help="Connectors validated and applied at once (each its own connection)")
    ] = 4,
    output: OutputOpt = "table",
) -> None:
    """Create, update or leave unchanged every connector that DIR's *.json files define (as kubectl apply).

    Every file is validated before anything is written, and every problem is reported. Exit code:
    0 when all went well, 2 when a file is invalid, 1 when a change failed."""
    with backend() as svc:
        manifests = read_manifests(directory)
        if not manifests:
            raise ConfigError(f"no *.json files in `{directory}`: nothing to apply")
        with ThreadPoolExecutor(parallel) as pool:
            plans = list(pool.map(lambda m: _plan(svc, m), manifests))
            invalid = any(p.result in ("invalid", "failed") for p in plans)
            held_back = invalid and not continue_on_error and not dry_run
            if dry_run or held_back:
                outcomes = [_not_applied(plan, dry_run) for plan in plans]
            else:
                outcomes = list(pool.map(lambda mp: _apply(svc, *mp), zip(manifests, plans, strict=True)))
    _report(outcomes, output, dry_run=dry_run, held_back=held_back)
    if any(o.result == "failed" for o in outcomes):
        raise typer.Exit(1)
    if invalid:
        raise typer.Exit(2)


def _plan(svc: Any, m: Manifest) -> Outcome:
    """What applying `m` would do (validated by the runtime, nothing written), or why it cannot."""
    if m.problem is not None or m.name is None:
        return Outcome(m.file, m.name, "invalid", m.problem or "")
    try:
        plan = svc.apply(m.name, m.config, dry_run=True, initial_state=m.initial_state)
    except ConfigError as exc:
        return Outcome(m.file, m.name, "invalid", str(exc))
    except RetriableError:
        raise  # the store or the server is unreachable: no file can be checked, stop here
    except ConnectError as exc:
        return Outcome(m.file, m.name, "failed", str(exc))
    result = {"created": "create", "updated": "update"}.get(plan["action"], plan["action"])
    return Outcome(m.file, m.name, result, _summary(plan), list(plan["changed"]))


def _not_applied(plan: Outcome, dry_run: bool) -> Outcome:
    if dry_run or plan.result in ("invalid", "failed", "unchanged"):
        return plan
    return Outcome(plan.file, plan.name, "skipped", "not applied: other files are invalid", plan.changed)


def _apply(svc: Any, m: Manifest, plan: Outcome) -> Outcome:
    if plan.result in ("invalid", "failed", "unchanged") or m.name is None:
        return plan
    try:
        done = svc.apply(m.name, m.config, initial_state=m.initial_state)
    except Exception as exc:  # one connector's failure (a conflict, a lost store) is reported, the rest go on
        return Outcome(m.file, m.name, "failed", _failure(exc))
    return Outcome(m.file, m.name, done["action"], _summary(done), list(done["changed"]))


def _failure(exc: Exception) -> str:
    """What went wrong, in words that quote no value: a driver's error text can hold SQL parameters."""
    if isinstance(exc, ConnectError):
        return str(exc)
    fault = store_fault(exc)
    if fault is not None:
        return f"the metadata store answered {fault}; retry when it is back"
    log.debug("applying failed", exc_info=exc)
    return f"unexpected {type(exc).__name__} (its text is not shown: it can quote config values)"


def _summary(result: dict[str, Any]) -> str:
    what = f"{result['type']}, {result['tasks']} task(s)"
    if result["action"] == "updated" and result["changed"]:
        keys = result["changed"]
        what += "; changed: " + ", ".join(keys[:10]) + (f" and {len(keys) - 10} more" if len(keys) > 10 else "")
    return what


def _report(outcomes: list[Outcome], output: str, *, dry_run: bool, held_back: bool) -> None:
    counts = Counter(o.result for o in outcomes)
    for o in outcomes:  # messages may quote values: masked like every message the API returns
        o.detail = mask_text(o.detail)
    if output == "json":
        print_json({"dry_run": dry_run, "results": [asdict(o) for o in outcomes], "summary": dict(counts)})
        return
    colours = {"invalid": "red", "failed": "red", "skipped": "yellow", "unchanged": "dim"}
    table = Table("file", "connector", "result", "detail", title="dry run: nothing written" if dry_run else None)
    for o in outcomes:
        table.add_row(
            _plain(o.file),
            _plain(o.name or ""),
            Text(o.result, style=colours.get(o.result, "green")),
            _plain(o.detail),
        )
    out.print(table)
    out.print(", ".join(f"{n} {result}" for result, n in sorted(counts.items())), highlight=False)
    if held_back:
        err.print("nothing was applied: fix the invalid file(s), or pass --continue-on-error", highlight=False)


def _plain(value: str) -> Text:
    """`value` as literal text: no rich markup, and control characters (an escape sequence in a file
    name or a connector name would drive the terminal) shown as `\\xNN`."""
    return Text(
        "".join(f"\\x{ord(ch):02x}" if ch not in "\n\t" and unicodedata.category(ch) == "Cc" else ch for ch in value)
    )
