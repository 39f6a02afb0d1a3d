"""Helpers of the secret-channel tests: distinctive secrets, a runtime that holds them, and a watch
over the command lines of a process tree (shared by tests/e2e and tests/airflow)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from pydantic import SecretStr
from sqlalchemy.engine import make_url

from connect_core.runtime.context import Runtime
from connect_core.runtime.settings import Settings

__all__ = [
    "DB_PASSWORD",
    "S3_SECRET",
    "SECRET_KEY",
    "ProcessTreeWatch",
    "assert_no_secret",
    "run_watched",
    "secret_runtime",
    "spark_processes",
    "with_password",
]

DB_PASSWORD = "Db-pw-7c41e9aa-never-in-argv"
S3_SECRET = "S3-secret-93fd01b2-never-in-argv"
SECRET_KEY = "spark.hadoop.fs.s3a.secret.key"


def with_password(database_url: str) -> str:
    """The URL with `DB_PASSWORD` in it (the trust-auth test server ignores a password)."""
    return make_url(database_url).set(password=DB_PASSWORD).render_as_string(hide_password=False)


@contextlib.contextmanager
def secret_runtime(settings: Settings, url: str) -> Iterator[Runtime]:
    """A runtime on `url` whose local Spark pool has a secret Spark setting."""
    rt = Runtime.open(settings.model_copy(update={"database_url": SecretStr(url)}))
    try:
        rt.pools.add("local", "local[*]", capacity=2, conf={SECRET_KEY: S3_SECRET})
        yield rt
    finally:
        rt.close()


class ProcessTreeWatch:
    """Polls the command line of every descendant of a process while it runs."""

    def __init__(self, root: int) -> None:
        self.root, self.cmdlines, self.pids = root, set[str](), set[int]()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()

    def _poll(self) -> None:
        while not self._stop.is_set():
            for pid in descendants(self.root):
                try:
                    cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                except OSError:
                    continue
                self.pids.add(pid)
                self.cmdlines.add(cmdline)
            time.sleep(0.05)

    def stop(self) -> set[str]:
        self._stop.set()
        self._thread.join(timeout=5)
        return self.cmdlines


def descendants(root: int) -> set[int]:
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            parents[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
    found, frontier = {root}, [root]
    while frontier:
        parent = frontier.pop()
        children = [pid for pid, ppid in parents.items() if ppid == parent and pid not in found]
        found.update(children)
        frontier.extend(children)
    return found


def run_watched(cmd: list[str], env: dict[str, str], cwd: Path) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    watch = ProcessTreeWatch(proc.pid)
    try:
        out, err = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
        cmdlines = watch.stop()
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err), cmdlines


def assert_no_secret(where: str, text: str) -> None:
    for secret in (DB_PASSWORD, S3_SECRET):
        assert secret not in text, f"{secret} found in {where}"


def spark_processes(cmdlines: set[str]) -> list[str]:
    return [c for c in cmdlines if "SparkSubmit" in c or "spark-submit" in c]
