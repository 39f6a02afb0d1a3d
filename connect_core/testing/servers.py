"""Private PostgreSQL and MariaDB servers, for the change-data-capture tests and benchmarks.

Log-based capture needs server settings the machine's shared servers do not have (and must not
be given): `wal_level=logical` on PostgreSQL, a row binlog on MariaDB. So the tests and the
benchmarks start their own, from the machine's own binaries, in a temporary directory on a free
loopback port, and delete it all when they stop.

Neither server runs as root: PostgreSQL refuses to, and MariaDB should not. As root, each runs as
its packaged service user (`postgres`, `mysql`; `nobody` if that is missing), in a directory it
owns under /tmp (pytest's own temp dirs are root's and closed to others). Each server is also
told to die with the process that started it (Linux's parent-death signal), so a killed pytest
leaves no server behind, only its directory.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

import psycopg2
import pymysql

__all__ = [
    "PG_BIN",
    "MariaDbServer",
    "PgServer",
    "ServerStartError",
    "fresh_db",
    "start_binlog_mariadb",
    "start_logical_pg",
    "unique_name",
]

PG_BIN = Path(os.environ.get("CONNECT_TEST_PG_BIN", "/usr/lib/postgresql/15/bin"))
MARIADBD = Path(os.environ.get("CONNECT_TEST_MARIADBD", "/usr/sbin/mariadbd"))
MARIADB_INSTALL_DB = Path(os.environ.get("CONNECT_TEST_MARIADB_INSTALL_DB", "/usr/bin/mariadb-install-db"))

START_TIMEOUT = 30.0  # seconds; each starts in one or two
STOP_TIMEOUT = 10.0
_LOG_TAIL_LINES = 30

_PR_SET_PDEATHSIG = 1
_LIBC = ctypes.CDLL(None, use_errno=True) if sys.platform == "linux" else None


class ServerStartError(RuntimeError):
    """A test server did not start; the message ends with the tail of its log."""


def unique_name(prefix: str) -> str:
    """`prefix` and a random suffix: a valid, unquoted name for a database, slot or publication."""
    return f"{prefix}_{uuid.uuid4().hex[:12]}"


# --- what the tests get ------------------------------------------------------------------------


@dataclass(frozen=True)
class PgServer:
    """A PostgreSQL with `wal_level=logical`; `user` is a superuser, trusted without a password."""

    host: str
    port: int
    user: str
    password: str = field(repr=False)
    database: str
    data_dir: Path = field(repr=False)

    @property
    def dsn(self) -> str:
        """libpq keywords, for `psycopg2.connect`."""
        return f"host={self.host} port={self.port} user={self.user} dbname={self.database}"

    @property
    def replication_dsn(self) -> str:
        """The same, as a logical replication connection (psycopg2's `LogicalReplicationConnection`
        adds `replication=database` itself; other clients need it here)."""
        return f"{self.dsn} replication=database"

    @property
    def url(self) -> str:
        return f"postgresql://{self.user}@{self.host}:{self.port}/{self.database}"

    @property
    def jdbc_url(self) -> str:
        return f"jdbc:postgresql://{self.host}:{self.port}/{self.database}?user={self.user}"

    def connect(self, database: str | None = None) -> Any:
        """An autocommit psycopg2 connection to `database` (this server's database by default)."""
        conn = psycopg2.connect((self if database is None else replace(self, database=database)).dsn)
        conn.autocommit = True
        return conn

    def execute(self, *statements: str) -> None:
        """Run `statements`, each committed on its own."""
        _execute(self.connect(), statements)

    def rows(self, query: str, *params: Any) -> list[tuple[Any, ...]]:
        return _rows(self.connect(), query, params)

    @contextlib.contextmanager
    def fresh_database(self) -> Iterator[PgServer]:
        """This server, on a new empty database, dropped afterwards with the replication slots made
        on it (slots belong to the cluster, but each logical slot to one database)."""
        name = unique_name("cdc_test")
        admin = replace(self, database="postgres")
        admin.execute(f'CREATE DATABASE "{name}"')
        try:
            yield replace(self, database=name)
        finally:
            admin._drop_slots_of(name)
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def _drop_slots_of(self, database: str) -> None:
        # A slot still streaming cannot be dropped, and its walsender ends a moment after it is told to.
        slots = "FROM pg_replication_slots WHERE database = %s"
        deadline = time.monotonic() + STOP_TIMEOUT
        while True:
            self.rows(f"SELECT pg_terminate_backend(active_pid) {slots} AND active_pid IS NOT NULL", database)
            try:
                self.rows(f"SELECT pg_drop_replication_slot(slot_name) {slots}", database)
                return
            except psycopg2.errors.ObjectInUse:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)


@dataclass(frozen=True)
class MariaDbServer:
    """A MariaDB with a full-image row binlog and GTIDs. `user` is the capture user (SELECT, RELOAD,
    LOCK TABLES, REPLICATION SLAVE, REPLICATION CLIENT on everything); `admin_user` makes the
    tables and rows it captures."""

    host: str
    port: int
    user: str
    password: str = field(repr=False)
    database: str
    admin_user: str
    admin_password: str = field(repr=False)
    data_dir: Path = field(repr=False)

    @property
    def url(self) -> str:
        return f"mysql+pymysql://{self.user}:{self.password}@{self.host}:{self.port}/{self.database}"

    @property
    def jdbc_url(self) -> str:
        return f"jdbc:mariadb://{self.host}:{self.port}/{self.database}?user={self.user}&password={self.password}"

    def connect(self, *, admin: bool = False, database: str | None = None) -> Any:
        """An autocommit pymysql connection, as the capture user or (`admin`) as root."""
        return pymysql.connect(
            host=self.host,
            port=self.port,
            user=self.admin_user if admin else self.user,
            password=self.admin_password if admin else self.password,
            database=self.database if database is None else database,
            autocommit=True,
            charset="utf8mb4",
        )

    def execute(self, *statements: str) -> None:
        """Run `statements` as the admin user, in this server's database."""
        _execute(self.connect(admin=True), statements)

    def rows(self, query: str, *params: Any) -> list[tuple[Any, ...]]:
        """`query`'s rows, as the capture user."""
        return _rows(self.connect(), query, params)

    @contextlib.contextmanager
    def fresh_database(self) -> Iterator[MariaDbServer]:
        """This server, on a new empty database, dropped afterwards."""
        name = unique_name("cdc_test")
        self.execute(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
        try:
            yield replace(self, database=name)
        finally:
            self.execute(f"DROP DATABASE IF EXISTS `{name}`")


_Server = TypeVar("_Server", PgServer, MariaDbServer)


def _execute(conn: Any, statements: Sequence[str]) -> None:
    """Run `statements` on `conn` (autocommit: each committed on its own), then close it."""
    try:
        with conn.cursor() as cur:
            for statement in statements:
                cur.execute(statement)
    finally:
        conn.close()


def _rows(conn: Any, query: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
    """`query`'s rows on `conn`, then close it."""
    try:
        with conn.cursor() as cur:
            cur.execute(query, params or None)  # no params: a `%` in `query` is no placeholder
            return list(cur.fetchall())
    finally:
        conn.close()


def fresh_db(server: _Server) -> contextlib.AbstractContextManager[_Server]:
    """`with fresh_db(server) as db:` the server on a new database of the test's own."""
    return server.fresh_database()


# --- starting and stopping -------------------------------------------------------------------


@contextlib.contextmanager
def start_logical_pg(*settings: str) -> Iterator[PgServer]:
    """A PostgreSQL 15 ready for logical replication (`pgoutput`), with a database `cdc`; `settings`
    (`name=value`) are added to, or override, the server's."""
    # SIGQUIT is PostgreSQL's immediate shutdown: its fast one (SIGINT) waits for every logical
    # replication client to confirm the last WAL, which a test's leftover stream never does.
    with _Instance("pg", ("postgres",), stop_with=signal.SIGQUIT, die_with=signal.SIGQUIT) as inst:
        data = inst.dir / "data"
        initdb = [str(PG_BIN / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust", "--encoding=UTF8"]
        inst.run([*initdb, "--locale=C", "--no-sync"])
        # Trust on loopback only, replication connections included; the socket is the test's own.
        (data / "pg_hba.conf").write_text(
            "local all all trust\nhost all all 127.0.0.1/32 trust\n"
            "local replication all trust\nhost replication all 127.0.0.1/32 trust\n"
        )
        config = (
            "wal_level=logical",
            "max_replication_slots=10",
            "max_wal_senders=10",
            "fsync=off",  # a throwaway cluster: durability buys nothing, speed does
            "synchronous_commit=off",
            "full_page_writes=off",
            *settings,
        )
        options = [arg for setting in config for arg in ("-c", setting)]
        listen = ["-p", str(inst.port), "-h", "127.0.0.1", "-k", str(inst.dir)]
        inst.spawn([str(PG_BIN / "postgres"), "-D", str(data), *listen, *options])
        server = PgServer("127.0.0.1", inst.port, "postgres", "", "postgres", data)
        inst.wait_until_ready(lambda: psycopg2.connect(server.dsn, connect_timeout=2).close())
        server.execute("CREATE DATABASE cdc")
        yield replace(server, database="cdc")


@contextlib.contextmanager
def start_binlog_mariadb(*options: str) -> Iterator[MariaDbServer]:
    """A MariaDB 10.11 writing a full-image row binlog, with a database `cdc` and a capture user `cdc`;
    `options` (`--name=value`) are added to the server's command line."""
    password = secrets.token_urlsafe(12)
    with _Instance("mariadb", ("mysql",), stop_with=signal.SIGTERM, die_with=signal.SIGKILL) as inst:
        data = inst.dir / "data"
        init = inst.dir / "init.sql"
        init.write_text(
            "FLUSH PRIVILEGES;\n"  # bootstrap runs without the grant tables, which CREATE USER needs
            "CREATE DATABASE cdc CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;\n"
            f"CREATE USER 'cdc'@'%' IDENTIFIED BY '{password}';\n"
            "GRANT SELECT, RELOAD, LOCK TABLES, REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO 'cdc'@'%';\n"
        )
        small = ["--innodb-buffer-pool-size=32M", "--innodb-log-file-size=16M"]
        install = [
            str(MARIADB_INSTALL_DB),
            "--no-defaults",
            f"--datadir={data}",
            "--skip-test-db",
            "--skip-name-resolve",
        ]
        inst.run([*install, "--auth-root-authentication-method=normal", f"--extra-file={init}", *small])
        inst.spawn(
            [
                str(MARIADBD),
                "--no-defaults",  # nothing of the machine's server's /etc/mysql
                f"--datadir={data}",
                f"--port={inst.port}",
                "--bind-address=127.0.0.1",
                f"--socket={inst.dir / 'mysqld.sock'}",  # not the shared server's
                f"--pid-file={inst.dir / 'mysqld.pid'}",
                f"--tmpdir={inst.dir}",
                "--skip-name-resolve",
                "--character-set-server=utf8mb4",
                "--collation-server=utf8mb4_bin",
                f"--log-bin={data / 'binlog'}",
                "--binlog-format=ROW",
                "--binlog-row-image=FULL",
                "--binlog-row-metadata=FULL",  # column names in the log
                "--server-id=1",
                "--innodb-flush-log-at-trx-commit=0",
                *small,
                *options,
            ]
        )
        server = MariaDbServer("127.0.0.1", inst.port, "cdc", password, "cdc", "root", "", data)
        inst.wait_until_ready(lambda: server.connect().close())
        yield server


class _Instance:
    """A server process of the tests' own: its directory and port, its one-off set-up commands, the
    process and its log. Leaving the `with` stops the process (`stop_with`, then `die_with` if it
    takes too long, as when the test process dies) and deletes the directory."""

    def __init__(
        self, kind: str, service_users: Sequence[str], *, stop_with: signal.Signals, die_with: signal.Signals
    ) -> None:
        self.kind = kind
        self.stop_with = stop_with
        self.die_with = die_with
        self.run_as = _unprivileged_user(service_users)
        self.dir = Path(tempfile.mkdtemp(prefix=f"connect-cdc-{kind}-"))
        if self.run_as is not None:
            os.chown(self.dir, self.run_as.pw_uid, self.run_as.pw_gid)
        self.log = self.dir / "server.log"
        self.port = _free_port()
        self.process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> _Instance:
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self._stop()
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)

    def run(self, argv: list[str]) -> None:
        """A set-up command, to its end; its output is the error when it fails."""
        try:
            subprocess.run(argv, check=True, capture_output=True, timeout=START_TIMEOUT, **self._as_service())
        except subprocess.CalledProcessError as exc:
            output = (exc.stdout + exc.stderr).decode(errors="replace")
            raise ServerStartError(f"`{Path(argv[0]).name}` failed ({exc.returncode}):\n{_tail(output)}") from exc
        except subprocess.TimeoutExpired as exc:
            raise ServerStartError(f"`{Path(argv[0]).name}` took over {START_TIMEOUT:.0f}s") from exc

    def spawn(self, argv: list[str]) -> None:
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                preexec_fn=self._die_with_parent,
                **self._as_service(),
            )

    def wait_until_ready(self, probe: Callable[[], None]) -> None:
        """Until `probe` (a connection) succeeds; fails early when the server exits, else after the timeout."""
        assert self.process is not None
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            try:
                probe()
                return
            except Exception as exc:
                if self.process.poll() is not None:
                    raise ServerStartError(self._failure(f"exited with {self.process.returncode}")) from exc
                if time.monotonic() > deadline:
                    raise ServerStartError(
                        self._failure(f"not accepting connections after {START_TIMEOUT:.0f}s: {exc}")
                    ) from exc
            time.sleep(0.05)

    def _failure(self, what: str) -> str:
        log = self.log.read_text(errors="replace") if self.log.exists() else ""
        return f"the test {self.kind} server on 127.0.0.1:{self.port} {what}; its log ends:\n{_tail(log)}"

    def _stop(self) -> None:
        process = self.process
        if process is None or process.poll() is not None:
            return
        for sig in (self.stop_with, self.die_with, signal.SIGKILL):
            process.send_signal(sig)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(STOP_TIMEOUT)
                return

    def _as_service(self) -> dict[str, Any]:
        if self.run_as is None:
            return {"cwd": self.dir}
        return {"cwd": self.dir, "user": self.run_as.pw_uid, "group": self.run_as.pw_gid, "extra_groups": []}

    def _die_with_parent(self) -> None:
        # Runs in the child after it switched user (which would clear the setting), before exec.
        if _LIBC is not None:
            _LIBC.prctl(_PR_SET_PDEATHSIG, int(self.die_with))


def _unprivileged_user(candidates: Sequence[str]) -> pwd.struct_passwd | None:
    """Whom a server runs as: None (ourselves) unless we are root."""
    if os.geteuid() != 0:
        return None
    for name in (*candidates, "nobody"):
        with contextlib.suppress(KeyError):
            return pwd.getpwnam(name)
    raise ServerStartError(f"running as root, and none of {', '.join(candidates)}, nobody exists to run a server as")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _tail(text: str) -> str:
    return "\n".join(text.rstrip().splitlines()[-_LOG_TAIL_LINES:])
