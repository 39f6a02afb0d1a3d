"""Asking a warm pool's worker (`worker.py`) to run tasks: what `connect run` and the Airflow
operator do first on a Spark Connect pool, so that the run costs neither a Python interpreter nor
its imports (about 1.5 s, most of a small sync's time).

Imports only the standard library and the SDK's errors: `connect run` reaches here before anything
heavy is loaded.
The worker answers only processes of its own user (checked by the socket's peer credentials) that
name the same metadata store (`fingerprint`). Any worker that cannot be used, or is not there, is
`None`: the caller runs the tasks itself.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import struct
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlsplit

from connect_core.sdk.errors import ConfigError, ConnectError, NotFoundError, RetriableError

if TYPE_CHECKING:
    from connect_core.runtime.settings import Settings

__all__ = [
    "MAX_REQUEST_BYTES",
    "WorkerGone",
    "find_worker",
    "fingerprint",
    "ping",
    "run_on_worker",
    "worker_files",
]

#: The largest request a worker reads (a run of at most a thousand connectors fits).
MAX_REQUEST_BYTES = 256 * 1024
_CONNECT_TIMEOUT_S = 2.0
#: A worker sends a keep-alive every `KEEPALIVE_S` while it runs a request; silence this long is a dead one.
KEEPALIVE_S = 10.0
_SILENCE_S = 6 * KEEPALIVE_S


class WorkerGone(RetriableError):
    """The worker stopped answering after it took the request: its runs may have committed or not
    (each run's record says), so the caller must not simply run them again."""


def worker_files(home: Path | str, pool: str) -> tuple[Path, Path, Path]:
    """The pool's worker socket, its process file and its log, under `CONNECT_HOME/pools` (`+` is in
    no pool name, so no other pool's server files, `<name>.json` and `<name>.log`, are these)."""
    folder = Path(home) / "pools"
    return folder / f"{pool}.sock", folder / f"{pool}+worker.json", folder / f"{pool}+worker.log"


def fingerprint(settings: Settings) -> str:
    """What a process's runs work on: its metadata store, however its URL is spelled
    (`postgresql://` or `postgresql+psycopg2://`, a default port or not: user, host, port, database
    and query, never the password; or the embedded store of its home), its topics and its plugins.
    A worker serves only callers with its own fingerprint (a hash: nothing of it can be read back)."""
    url = settings.database_url.get_secret_value() if settings.database_url else None
    if not url:
        store = f"embedded:{Path(settings.home).resolve() / 'pgdata'}"
    else:
        parts = urlsplit(url)
        try:
            port = parts.port or 5432
        except ValueError:
            port = 0
        query = sorted(parse_qsl(parts.query, keep_blank_values=True))
        store = f"{parts.username or ''}@{(parts.hostname or '').lower()}:{port}{parts.path}?{query}"
    # And the security settings its runs are judged by (resolved): a worker started with wider
    # `file.allowed.paths` or config providers must not run a caller's tasks by its own rules.
    security = [
        [str(d) for d in settings.allowed_file_dirs()],
        settings.config_providers,
        [str(d) for d in settings.provider_file_dirs()],
        settings.config_providers_env_allowlist_pattern,
    ]
    name = json.dumps([store, settings.topics_base, settings.plugin_path, security])
    return hashlib.sha256(name.encode()).hexdigest()


def _connect(path: Path, timeout: float | None) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(_CONNECT_TIMEOUT_S)
        sock.connect(str(path))
        creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        if struct.unpack("3i", creds)[1] != os.getuid():  # a socket another user planted: never talk to it
            raise ConnectionRefusedError(f"{path} is served by another user")
    except OSError:
        sock.close()
        raise
    sock.settimeout(timeout)
    return sock


def _send(sock: socket.socket, message: dict[str, Any]) -> None:
    sock.sendall(json.dumps(message).encode() + b"\n")


def ping(path: Path, timeout: float = 2.0) -> dict[str, Any] | None:
    """The worker's answer to `ping` (`pool`, `fingerprint`, `pid`), or None if none answers."""
    try:
        with _connect(path, timeout) as sock:
            _send(sock, {"op": "ping"})
            line = sock.makefile("rb").readline(MAX_REQUEST_BYTES)
        answer = json.loads(line) if line else None
    except (OSError, ValueError):
        return None
    return answer if isinstance(answer, dict) and answer.get("ok") else None


def find_worker(home: Path | str, fingerprint_: str, pool: str | None = None) -> Path | None:
    """The socket of a live worker on this machine for the metadata store `fingerprint_` (of `pool`
    if given, else of any warm pool)."""
    folder = Path(home) / "pools"
    candidates = [worker_files(home, pool)[0]] if pool else sorted(folder.glob("*.sock"))
    for path in candidates:
        if path.is_socket():
            answer = ping(path)
            if answer is not None and fingerprint_ in (answer.get("fingerprint"), *answer.get("also_serves", ())):
                return path
    return None


def run_on_worker(
    path: Path,
    fingerprint_: str,
    names: Sequence[str],
    *,
    task: int | None = None,
    tasks: Sequence[tuple[str, int]] | None = None,
    master: str | None = None,
    on_log: Callable[[int, str], None] | None = None,
) -> dict[str, Any] | None:
    """Have the worker at `path` run the tasks (as `connect run` would; with `tasks`, exactly those
    tasks of `names`, in that order): its answer
    (`results`: each run's record with its `pool`, `exit_code` and `wall_s`; `groups`), what the
    runs log going to `on_log(level, line)` meanwhile; or None when
    the worker refused before running anything (another metadata store, busy, going away).
    Raises what the worker reports as the user's error (`ConfigError`, `NotFoundError`), and
    `WorkerGone` when it dies mid-request."""
    request: dict[str, Any] = {"op": "run", "fingerprint": fingerprint_, "names": list(names), "task": task}
    request["master"] = master
    if tasks is not None:
        request["tasks"] = [[name, number] for name, number in tasks]
    try:
        sock = _connect(path, None)
    except OSError:
        return None
    try:
        try:
            _send(sock, request)
        except OSError:
            return None
        accepted = False
        sock.settimeout(_SILENCE_S)  # a running request says something (a keep-alive at least) this often
        for raw in sock.makefile("rb"):
            message = json.loads(raw)
            if message.get("accepted"):
                accepted = True
            elif "log" in message:
                if on_log is not None:
                    on_log(int(message.get("level", 20)), str(message["log"]))
            elif "results" in message:
                return dict(message)
            elif "error" in message:
                _raise(message, accepted)
                return None
        raise WorkerGone(f"the pool worker at {path} stopped answering mid-request; see its log")
    except (OSError, ValueError) as exc:
        raise WorkerGone(f"the pool worker at {path} stopped answering mid-request: {exc}") from exc
    finally:
        sock.close()


def _raise(message: dict[str, Any], accepted: bool) -> None:
    """A refusal (`code` refused) is None for the caller; a user error is raised as the CLI's own."""
    code = message.get("code")
    if code == "refused" and not accepted:
        return
    error: type[ConnectError] = {"config": ConfigError, "not_found": NotFoundError}.get(str(code), ConnectError)
    raise error(str(message["error"]))
