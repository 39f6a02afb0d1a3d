"""A Postgres server of the test's own, on a free loopback port, that a test can stop and start.

The binaries are the ones the `pgserver` wheel (the embedded metadata store) ships, so the
tests need nothing the project does not already depend on. Postgres refuses to run as root:
as root, the server runs as `postgres` or `pgserver` (the user the embedded store creates).
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

import pgserver

__all__ = ["ThrowawayPostgres"]

_BIN = Path(pgserver.__file__).parent / "pginstall" / "bin"


def _run_as() -> str | None:
    if os.geteuid() != 0:
        return None
    for user in ("postgres", "pgserver"):
        try:
            pwd.getpwnam(user)
            return user
        except KeyError:
            continue
    raise RuntimeError("running as root, and no `postgres` or `pgserver` user to run a Postgres server as")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ThrowawayPostgres:
    def __init__(self) -> None:
        self.user = _run_as()
        self.dir = Path(tempfile.mkdtemp(prefix="connect-pg-"))  # under /tmp: reachable by `user`
        self.data = self.dir / "data"
        self.port = _free_port()
        if self.user is not None:
            entry = pwd.getpwnam(self.user)
            os.chown(self.dir, entry.pw_uid, entry.pw_gid)
        self._pg("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "--encoding=UTF8", "--no-sync")

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def start(self) -> None:
        options = f"-p {self.port} -h 127.0.0.1 -k {self.dir} -c fsync=off"
        self._pg("pg_ctl", "-D", str(self.data), "-l", str(self.dir / "log"), "-o", options, "-w", "start")

    def stop(self, mode: str = "fast") -> None:
        """`fast` disconnects every client and shuts down; `immediate` is a crash (no checkpoint)."""
        self._pg("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop")

    def close(self) -> None:
        if (self.data / "postmaster.pid").exists():
            self.stop("immediate")
        shutil.rmtree(self.dir, ignore_errors=True)

    def _pg(self, program: str, *args: str) -> None:
        subprocess.run(
            [str(_BIN / program), *args], check=True, user=self.user, capture_output=True, timeout=60, cwd=self.dir
        )
