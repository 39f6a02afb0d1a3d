"""Metadata databases for tests and benchmarks: copies of one template, migrated once.

Migrating a new database to head runs every Alembic migration (a few hundred milliseconds, more
with each new one); `CREATE DATABASE … TEMPLATE` of a migrated database costs no more than making
an empty one. The template's name holds a digest of the migrations' files (`connect_tpl_<digest>`),
so a changed or added migration gets a template of its own, and a checkout never copies a schema
its migrations did not make. Templates are left on the server: another checkout (another branch)
may be using its own.

`MetadataDatabases` also takes the copying and the dropping off a test's path: a thread of its own
makes the next copy while a test runs and drops the copies that tests are done with.
"""

from __future__ import annotations

import contextlib
import hashlib
import queue
import threading
import time
import uuid
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

from sqlalchemy.engine import make_url

from connect_core.runtime.store import migrate
from connect_core.runtime.store.db import make_engine
from connect_core.runtime.store.models import SCHEMA
from connect_core.testing.databases import admin_connection, postgres_database, unique_database_name

__all__ = ["TEMPLATE_PREFIX", "MetadataDatabases", "metadata_database", "migrated_template", "migrations_digest"]

TEMPLATE_PREFIX = "connect_tpl_"

# Held (a session-level advisory lock) while a template is checked and made, so that concurrent
# test sessions, or pytest-xdist's workers, make it once and never copy a half-made one.
_TEMPLATE_LOCK = "SELECT pg_advisory_lock(hashtext('connect_core.testing.template'))"
_TEMPLATE_UNLOCK = "SELECT pg_advisory_unlock(hashtext('connect_core.testing.template'))"


@cache
def migrations_digest(directory: Path = migrate.MIGRATIONS_DIR) -> str:
    """A digest of the migrations' files (their paths and contents), 16 hex digits."""
    digest = hashlib.sha256()
    for path in sorted(p for p in directory.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        digest.update(path.relative_to(directory).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def migrated_template(server_url: str) -> str:
    """The name of the server's template database at this checkout's migrations' head, made (under
    an advisory lock) if it is not there yet."""
    name = TEMPLATE_PREFIX + migrations_digest()
    admin = admin_connection(server_url)
    try:
        with admin.cursor() as cur:
            cur.execute(_TEMPLATE_LOCK)
            try:
                # `datistemplate` is set last: a database of this name without it was left half-made.
                cur.execute("SELECT datistemplate FROM pg_database WHERE datname = %s", (name,))
                found = cur.fetchone()
                if found is None or not found[0]:
                    cur.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
                    cur.execute(f'CREATE DATABASE "{name}"')
                    engine = make_engine(make_url(server_url).set(database=name).render_as_string(hide_password=False))
                    try:
                        migrate.upgrade(engine)
                    finally:
                        engine.dispose()  # a template with a connection open cannot be copied
                    # No connections from now on (copies need none), and marked done.
                    cur.execute(f'ALTER DATABASE "{name}" WITH ALLOW_CONNECTIONS false IS_TEMPLATE true')
            finally:
                cur.execute(_TEMPLATE_UNLOCK)
    finally:
        admin.close()
    return name


@contextlib.contextmanager
def metadata_database(server_url: str, template: str | None = None) -> Iterator[str]:
    """The URL of a new metadata database on the server of `server_url`, dropped on exit: a copy of
    `template` (see `migrated_template`) with a cluster id of its own, or, without one, empty."""
    with postgres_database(server_url, unique_database_name(), template=template) as url:
        if template is not None:
            _new_cluster_id(url)
        yield url


class MetadataDatabases:
    """Copies of `template` on the server of `server_url`, made `ahead` at a time and dropped after
    use on a thread of their own: `take` returns a ready one (waiting only when tests outrun the
    thread), `give_back` hands one back to be dropped. `close` drops what is left; it raises what
    went wrong with a drop, as a drop in a test's teardown would have."""

    def __init__(self, server_url: str, template: str, *, ahead: int = 1) -> None:
        self._server_url, self._template = server_url, template
        self._ready: queue.Queue[str | BaseException] = queue.Queue()
        self._lock = threading.Condition()
        self._to_make = ahead
        self._to_drop: list[str] = []
        self._closing = False
        self._drop_errors: list[BaseException] = []
        self._thread = threading.Thread(target=self._work, name="metadata-databases", daemon=True)
        self._thread.start()

    def take(self, timeout: float = 300.0) -> str:
        """The URL of a fresh copy, at the migrations' head, with a cluster id of its own."""
        with self._lock:
            self._to_make += 1  # the one after it
            self._lock.notify()
        deadline = time.monotonic() + timeout
        while True:
            try:
                made = self._ready.get(timeout=1.0)
                break
            except queue.Empty:
                if not self._thread.is_alive() or time.monotonic() > deadline:
                    raise RuntimeError(f"no copy of the metadata template `{self._template}` was made") from None
        if isinstance(made, BaseException):
            raise RuntimeError(
                f"could not copy the metadata template `{self._template}`: {str(made).strip()}"
            ) from made
        return made

    def give_back(self, url: str) -> None:
        """`url`'s database is done with: it is dropped (with whatever is still connected to it)."""
        with self._lock:
            self._to_drop.append(url)
            self._lock.notify()

    def close(self) -> None:
        with self._lock:
            self._closing = True
            self._lock.notify()
        self._thread.join()
        if self._drop_errors:
            raise RuntimeError(f"{len(self._drop_errors)} metadata database(s) not dropped") from self._drop_errors[0]

    def _work(self) -> None:
        admin: Any = None
        while True:
            with self._lock:
                while not (self._to_make or self._to_drop or self._closing):
                    self._lock.wait()
                making = self._to_make > 0 and not self._closing  # first: a test may be waiting for it
                if making:
                    self._to_make -= 1
                    dropping = ""
                elif self._to_drop:
                    dropping = self._to_drop.pop(0)
                else:  # closing, every handed-back copy dropped: then the unused ones, then done
                    self._to_drop = [made for made in _drain(self._ready) if isinstance(made, str)]
                    if self._to_drop:
                        continue
                    if admin is not None:
                        admin.close()
                    return
            try:
                admin = admin or admin_connection(self._server_url)
                if making:
                    self._ready.put(self._make(admin))
                else:
                    self._drop(admin, dropping)
            except Exception as exc:
                if admin is not None:
                    admin.close()
                    admin = None  # a new connection for the next one
                if making:
                    self._ready.put(exc)  # to the test that takes it
                else:
                    self._drop_errors.append(exc)

    def _make(self, admin: Any) -> str:
        name = unique_database_name()
        with admin.cursor() as cur:
            cur.execute(f'CREATE DATABASE "{name}" TEMPLATE "{self._template}"')
        url = make_url(self._server_url).set(database=name).render_as_string(hide_password=False)
        try:
            _new_cluster_id(url)
        except Exception:
            self._drop(admin, url)
            raise
        return url

    @staticmethod
    def _drop(admin: Any, url: str) -> None:
        with admin.cursor() as cur:
            cur.execute(f'DROP DATABASE IF EXISTS "{make_url(url).database}" WITH (FORCE)')


def _drain(ready: queue.Queue[str | BaseException]) -> list[str | BaseException]:
    items = []
    with contextlib.suppress(queue.Empty):
        while True:
            items.append(ready.get_nowait())
    return items


def _new_cluster_id(url: str) -> None:
    # Migration 0005 gives each database a random identity; copies of one template would share it.
    conn = admin_connection(url)
    try:
        with conn.cursor() as cur:
            cur.execute(f'UPDATE "{SCHEMA}".cluster SET cluster_id = %s', (str(uuid.uuid4()),))
    finally:
        conn.close()
