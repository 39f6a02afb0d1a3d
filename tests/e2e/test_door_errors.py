"""Failures at the door, each made to happen for real: a missing or old Java, a Python outside
`requires-python`, a busy port, a metadata database that does not answer. Each ends in one line that
says what is wrong and what to do (no traceback, no pip output), a non-zero exit, within seconds.

The scripts run on a copy of `scripts/` (and the files they read) in a temporary directory, so this
checkout's `.venv` is never touched; PATH is a sandbox of the machine's commands without `java` and
`python*`, to which a test adds its own fakes.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from connect_core.runtime.context import Runtime

ROOT = Path(__file__).resolve().parents[2]
CONNECT = str(ROOT / ".venv" / "bin" / "connect")


# -- helpers -------------------------------------------------------------------------------------


def _env(**extra: str) -> dict[str, str]:
    """This shell without the suite's settings (no `CONNECT_*`, no JAVA_HOME), plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CONNECT_", "PYTEST", "JAVA_HOME"))}
    env.pop("VIRTUAL_ENV", None)
    return {**env, "SPARK_LOCAL_IP": "127.0.0.1", "CONNECT_SKIP_CHROMIUM": "1", **extra}


def _run(cmd: list[str], env: dict[str, str], cwd: Path | None = None, bound: float = 15) -> tuple[str, str, int]:
    """(stdout, stderr, exit code), failing the test if it took longer than `bound` seconds."""
    started = time.monotonic()
    proc = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=bound + 30, check=False)
    took = time.monotonic() - started
    assert took < bound, f"{cmd} took {took:.1f} s (bound {bound} s):\n{proc.stderr}"
    return proc.stdout, proc.stderr, proc.returncode


def _one_line(stderr: str, code: int, *says: str) -> str:
    """The single line on stderr, checked: non-zero exit, no traceback, every one of `says` in it."""
    assert code != 0, stderr
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, f"expected one line, got:\n{stderr}"
    assert "Traceback" not in stderr, stderr
    for part in says:
        assert part in lines[0], f"{part!r} not in {lines[0]!r}"
    return lines[0]


def _fake(directory: Path, name: str, script: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(f"#!/bin/sh\n{script}\n")
    path.chmod(0o755)
    return path


def _fake_python(directory: Path, version: str, name: str = "python3") -> Path:
    """A `python` that reports `version` (and accepts every other `-c`, as the checks ask only that)."""
    return _fake(directory, name, f"echo {version}")


def _fake_java(directory: Path, version: str) -> Path:
    return _fake(directory, "java", f"echo 'openjdk version \"{version}\" 2024-01-16' >&2")


@pytest.fixture(scope="module")
def sandbox_bin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The machine's commands (/usr/bin, /bin) without `java` and `python*`, as symlinks."""
    bin_dir = tmp_path_factory.mktemp("sandbox-bin")
    for source in (Path("/usr/bin"), Path("/bin")):
        for path in source.iterdir():
            name = path.name
            if name.startswith(("java", "python")) or os.path.lexists(bin_dir / name):
                continue
            (bin_dir / name).symlink_to(path)
    return bin_dir


@pytest.fixture
def scripts_copy(tmp_path: Path) -> Path:
    """`scripts/` and the files they read, in a directory of their own (no `.venv`)."""
    dest = tmp_path / "checkout"
    shutil.copytree(ROOT / "scripts", dest / "scripts")
    (dest / "requirements").mkdir()
    shutil.copy2(ROOT / "pyproject.toml", dest / "pyproject.toml")
    shutil.copy2(ROOT / "requirements" / "constraints.txt", dest / "requirements" / "constraints.txt")
    return dest


def _bootstrap(checkout: Path, env: dict[str, str]) -> tuple[str, int]:
    _out, stderr, code = _run(["bash", "scripts/bootstrap.sh"], env, cwd=checkout, bound=10)
    assert not (checkout / ".venv").exists() or (checkout / ".venv" / "bin" / "python").is_file()
    return stderr, code


# -- scripts/bootstrap.sh: the Python ------------------------------------------------------------


@pytest.mark.parametrize("version", ["3.10", "3.13"])
def test_bootstrap_refuses_a_python_outside_requires_python(scripts_copy: Path, tmp_path: Path, version: str) -> None:
    python = _fake_python(tmp_path / "fake", version, name=f"python{version}")
    stderr, code = _bootstrap(scripts_copy, _env(PYTHON=str(python)))
    _one_line(stderr, code, f"is Python {version}", "needs Python 3.11 or 3.12", "point PYTHON at")
    assert not (scripts_copy / ".venv").exists()  # checked before anything was made


def test_bootstrap_finds_no_fitting_python_on_path(scripts_copy: Path, tmp_path: Path, sandbox_bin: Path) -> None:
    fake = tmp_path / "fake"
    _fake_python(fake, "3.13")  # only `python3`, and a too-new one
    stderr, code = _bootstrap(scripts_copy, _env(PATH=f"{fake}:{sandbox_bin}"))
    _one_line(stderr, code, "none is on PATH (python3 is 3.13)", "apt-get install python3.11", "PYTHON=")


def test_bootstrap_names_a_python_that_does_not_run(scripts_copy: Path, tmp_path: Path) -> None:
    stderr, code = _bootstrap(scripts_copy, _env(PYTHON=str(tmp_path / "python3.11")))
    _one_line(stderr, code, "is not found", "point PYTHON at")


def test_bootstrap_refuses_a_venv_made_by_another_python(scripts_copy: Path) -> None:
    _fake_python(scripts_copy / ".venv" / "bin", "3.10", name="python")
    stderr, code = _bootstrap(scripts_copy, _env())
    _one_line(stderr, code, ".venv was made by Python 3.10", "rm -rf .venv")


# -- scripts/bootstrap.sh: the Java --------------------------------------------------------------


def test_bootstrap_without_java(scripts_copy: Path, tmp_path: Path, sandbox_bin: Path) -> None:
    python = _fake_python(tmp_path / "fake", "3.11")
    stderr, code = _bootstrap(scripts_copy, _env(PATH=str(sandbox_bin), PYTHON=str(python)))
    _one_line(stderr, code, "Spark needs Java 17+", "no `java` on PATH", "apt-get install openjdk-17")


def test_bootstrap_with_java_11(scripts_copy: Path, tmp_path: Path, sandbox_bin: Path) -> None:
    fake = tmp_path / "fake"
    python = _fake_python(fake, "3.11")
    _fake_java(fake, "11.0.22")
    stderr, code = _bootstrap(scripts_copy, _env(PATH=f"{fake}:{sandbox_bin}", PYTHON=str(python)))
    _one_line(stderr, code, f"`{fake / 'java'}` is Java 11", "apt-get install openjdk-17", "JAVA_HOME")


def test_bootstrap_with_a_java_home_without_java(scripts_copy: Path, tmp_path: Path) -> None:
    python = _fake_python(tmp_path / "fake", "3.11")
    stderr, code = _bootstrap(scripts_copy, _env(PYTHON=str(python), JAVA_HOME=str(tmp_path / "jdk")))
    _one_line(stderr, code, f"no `java` in JAVA_HOME ({tmp_path / 'jdk'})")


# -- scripts/test.sh: the tests' Postgres --------------------------------------------------------


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])  # nothing listens on it once closed


def test_test_sh_names_an_unreachable_postgres_before_the_suite(scripts_copy: Path) -> None:
    stamp = hashlib.sha256(
        (ROOT / "pyproject.toml").read_bytes() + (ROOT / "requirements/constraints.txt").read_bytes()
    )
    if not (ROOT / ".venv" / f".installed-{stamp.hexdigest()[:16]}").exists():
        pytest.fail("this checkout's .venv is not current: run scripts/bootstrap.sh (or the copy would install)")
    (scripts_copy / ".venv").symlink_to(ROOT / ".venv")  # bootstrap only checks it is current
    url = f"postgresql://postgres:hunter2@127.0.0.1:{_closed_port()}/postgres"
    _out, stderr, code = _run(["bash", "scripts/test.sh"], _env(CONNECT_TEST_PG_URL=url), cwd=scripts_copy, bound=20)
    line = _one_line(stderr, code, "test.sh: no Postgres for the tests at", "Connection refused", "CONNECT_TEST_PG_URL")
    assert "postgres:***@127.0.0.1" in line and "hunter2" not in stderr


# -- the connect CLI: the metadata database ------------------------------------------------------


def test_cli_with_a_closed_database_port() -> None:
    url = f"postgresql://connect:hunter2@127.0.0.1:{_closed_port()}/meta"
    for command in (["list"], ["db", "upgrade"]):  # through the runtime's open; straight to the engine
        _out, stderr, code = _run([CONNECT, *command], _env(CONNECT_DATABASE_URL=url), bound=10)
        line = _one_line(stderr, code, "cannot connect to the metadata database", "Connection refused")
        assert "connect:***@127.0.0.1" in line and "CONNECT_DATABASE_URL" in line and "hunter2" not in stderr


def test_cli_with_a_database_that_does_not_answer() -> None:
    with socket.socket() as silent:  # accepts connections (the kernel does), never says a word
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        url = f"postgresql://connect@127.0.0.1:{silent.getsockname()[1]}/meta?password=hunter2"
        env = _env(CONNECT_DATABASE_URL=url, CONNECT_DB_CONNECT_TIMEOUT="2")
        _out, stderr, code = _run([CONNECT, "list"], env, bound=10)
    line = _one_line(stderr, code, "no answer within 2 s (CONNECT_DB_CONNECT_TIMEOUT)")
    assert "password=***" in line and "hunter2" not in stderr


def test_cli_with_a_wrong_database_name(pg_server: str) -> None:
    url = pg_server.rsplit("/", 1)[0] + "/connect_no_such_database"
    _out, stderr, code = _run([CONNECT, "list"], _env(CONNECT_DATABASE_URL=url), bound=10)
    _one_line(stderr, code, "refused the connection", 'database "connect_no_such_database" does not exist')


def test_cli_with_a_url_that_does_not_parse() -> None:
    _out, stderr, code = _run([CONNECT, "list"], _env(CONNECT_DATABASE_URL="not a url"), bound=10)
    _one_line(stderr, code, "CONNECT_DATABASE_URL is not a database URL")


def test_cli_debug_keeps_the_traceback() -> None:
    url = f"postgresql://connect:hunter2@127.0.0.1:{_closed_port()}/meta"
    _out, stderr, code = _run([CONNECT, "list"], _env(CONNECT_DATABASE_URL=url, CONNECT_DEBUG="1"), bound=10)
    assert code != 0 and "Traceback" in stderr and "OperationalError" in stderr, stderr
    assert "hunter2" not in stderr  # no locals in the traceback


# -- the connect CLI: Java -----------------------------------------------------------------------


@pytest.fixture
def stored_source(runtime: Runtime, tmp_path: Path) -> dict[str, str]:
    """A stored file source, and the environment of a `connect` that sees it."""
    (tmp_path / "in.txt").write_text("a\n")
    config = {
        "connector.class": "org.apache.rocketmq.connect.file.FileSourceConnector",
        "filename": str(tmp_path / "in.txt"),
        "connect.topicname": "doorTopic",
    }
    runtime.create_connector("door-source", config)
    settings = runtime.settings
    assert settings.database_url is not None
    return _env(
        CONNECT_DATABASE_URL=settings.database_url.get_secret_value(),
        CONNECT_HOME=str(settings.home),
        CONNECT_FILE_ALLOWED_PATHS=str(tmp_path),
    )


def test_connect_run_without_java(stored_source: dict[str, str], sandbox_bin: Path) -> None:
    _out, stderr, code = _run([CONNECT, "run", "door-source"], {**stored_source, "PATH": str(sandbox_bin)})
    _one_line(stderr, code, "Spark needs Java 17+", "no `java` on PATH", "apt-get install openjdk-17")


def test_connect_run_with_java_11(stored_source: dict[str, str], sandbox_bin: Path, tmp_path: Path) -> None:
    java = _fake_java(tmp_path / "fake", "11.0.22")
    env = {**stored_source, "PATH": f"{java.parent}:{sandbox_bin}"}
    _out, stderr, code = _run([CONNECT, "run", "door-source"], env)
    _one_line(stderr, code, f"`{java}` is Java 11", "apt-get install openjdk-17")


# -- the connect CLI: busy ports -----------------------------------------------------------------


@pytest.fixture
def busy_port() -> Iterator[int]:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen(1)
        yield int(holder.getsockname()[1])


@pytest.mark.parametrize("command", [["serve"], ["airflow", "up"]])
def test_cli_on_a_busy_port(busy_port: int, command: list[str]) -> None:
    # The database would not answer either: the port is checked first, before anything starts.
    env = _env(CONNECT_DATABASE_URL=f"postgresql://u@127.0.0.1:{_closed_port()}/x")
    out, stderr, code = _run([CONNECT, *command, "--port", str(busy_port)], env, bound=10)
    _one_line(stderr, code, f"port {busy_port} on 127.0.0.1 is already in use", "`--port N`")
    assert "Connect REST API on" not in out  # nothing claimed to serve


def test_masked_url_hides_every_password() -> None:
    from connect_core.runtime.store.db import masked_url

    shown = masked_url("postgresql://u:one@h/db?sslpassword=two&password=three&sslmode=require")
    assert shown == "postgresql://u:***@h/db?password=***&sslmode=require&sslpassword=***", shown
    assert masked_url("not a url://u:one@h?password=two") == "not a url://u:***@h"  # unparsed: no query


# -- the review's door cases: every one a single line, no password, no traceback -----------------


def _checks(checkout: Path, function: str, env: dict[str, str]) -> tuple[str, int]:
    """Run one function of scripts/_checks.sh in `checkout`: (stderr, exit code)."""
    _out, stderr, code = _run(["bash", "-c", f". scripts/_checks.sh && {function}"], env, cwd=checkout, bound=15)
    return stderr, code


@pytest.mark.parametrize("version", ["25-ea", "22-ea", "17-internal", "17.0.2", "21", "1.8.0_402", "11.0.22", "16"])
def test_bootstrap_and_the_cli_read_a_java_version_alike(
    scripts_copy: Path, tmp_path: Path, sandbox_bin: Path, version: str
) -> None:
    from connect_core.cli._app import JAVA_MIN, java_major

    java = _fake_java(tmp_path / "fake", version)
    cli_accepts = java_major(f'openjdk version "{version}" 2024-01-16') >= JAVA_MIN
    stderr, code = _checks(scripts_copy, "check_java", _env(PATH=f"{java.parent}:{sandbox_bin}"))
    assert (code == 0) == cli_accepts, stderr
    assert cli_accepts == (version.split(".")[0].split("-")[0] not in ("1", "11", "16"))


def test_bootstrap_gives_up_on_a_java_that_hangs(scripts_copy: Path, tmp_path: Path, sandbox_bin: Path) -> None:
    java = _fake(tmp_path / "fake", "java", "sleep 60")
    stderr, code = _checks(scripts_copy, "check_java", _env(PATH=f"{java.parent}:{sandbox_bin}", PROBE_SECONDS="2"))
    _one_line(stderr, code, "-version` did not answer within 2 s")


def test_bootstrap_gives_up_on_a_python_that_hangs(scripts_copy: Path, tmp_path: Path) -> None:
    python = _fake(tmp_path / "fake", "python3.11", "sleep 60")
    stderr, code = _bootstrap(scripts_copy, _env(PYTHON=str(python), PROBE_SECONDS="2"))
    _one_line(stderr, code, "did not answer within 2 s", "point PYTHON at")


def test_bootstrap_says_a_python_is_not_executable(scripts_copy: Path, tmp_path: Path) -> None:
    python = tmp_path / "python3.11"
    python.write_text("not a program")
    stderr, code = _bootstrap(scripts_copy, _env(PYTHON=str(python)))
    _one_line(stderr, code, "is not executable", "point PYTHON at")


def test_bootstrap_reads_the_first_line_of_a_talkative_python(scripts_copy: Path, tmp_path: Path) -> None:
    python = _fake(tmp_path / "fake", "python3.10", "echo 3.10; echo 'a second line'")
    stderr, code = _bootstrap(scripts_copy, _env(PYTHON=str(python)))
    _one_line(stderr, code, "is Python 3.10:")


@pytest.fixture
def venv_copy(scripts_copy: Path) -> Path:
    (scripts_copy / ".venv").symlink_to(ROOT / ".venv")
    return scripts_copy


@pytest.mark.parametrize(
    "url",
    [
        "host=127.0.0.1 port=1 user=postgres password=S3cretKV",  # libpq's key=value form: no URL
        "S3cretKV",  # anything that does not parse is not echoed at all
        "postgresql://postgres:S3c@ret@127.0.0.1:1/postgres",
    ],
)
def test_test_sh_never_shows_the_test_database_password(venv_copy: Path, url: str) -> None:
    stderr, code = _checks(venv_copy, "check_test_pg", _env(CONNECT_TEST_PG_URL=url))
    line = _one_line(stderr, code, "test.sh:", "CONNECT_TEST_PG_URL")
    assert "S3c" not in line and "ret@" not in line and "KV" not in line, line


def test_an_empty_test_database_url_is_unset_for_test_sh_and_conftest(venv_copy: Path) -> None:
    stderr, code = _checks(venv_copy, "check_test_pg", _env(CONNECT_TEST_PG_URL=""))
    assert code == 0, stderr  # the default: the machine's Postgres
    read = "import tests.conftest as c; print(c.SERVER_URL)"
    out, stderr, code = _run([str(ROOT / ".venv/bin/python"), "-c", read], _env(CONNECT_TEST_PG_URL=""), cwd=ROOT)
    assert code == 0 and out.strip() == "postgresql://postgres@127.0.0.1:5432/postgres", stderr


def test_conftest_never_shows_the_test_database_password() -> None:
    url = "postgresql://postgres:S3c@ret@127.0.0.1:1/postgres"
    test = "tests/e2e/test_door_errors.py::test_cli_with_a_wrong_database_name"
    cmd = [str(ROOT / ".venv/bin/python"), "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider", test]
    out, stderr, code = _run(cmd, _env(CONNECT_TEST_PG_URL=url), cwd=ROOT, bound=60)
    assert code != 0 and "no Postgres at postgresql://postgres:***@127.0.0.1:1/postgres" in out, out + stderr
    assert "S3c" not in out + stderr and "ret@" not in out + stderr


def test_cli_over_rest_never_shows_the_url_password() -> None:
    url = f"http://user:S3cretURL@127.0.0.1:{_closed_port()}"
    _out, stderr, code = _run([CONNECT, "--url", url, "list"], _env(), bound=10)
    line = _one_line(stderr, code, "cannot reach the Connect REST API at", "user:***@127.0.0.1")
    assert "S3cret" not in stderr, line


@pytest.mark.parametrize(
    "url", ["http://127.0.0.1:{port}?token=x", "http://127.0.0.1:{port}#x", "ftp://127.0.0.1:{port}"]
)
def test_cli_over_rest_refuses_a_url_that_is_no_base_url(busy_port: int, url: str) -> None:
    _out, stderr, code = _run([CONNECT, "--url", url.format(port=busy_port), "list"], _env(), bound=10)
    _one_line(stderr, code, "is not an http(s) base URL")
    assert code == 2


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("postgresql://u:S3cret@127.0.0.1:5432/postgres?foo=bar", 'invalid URI query parameter: "foo"'),
        ("postgresql://u:S3cret@127.0.0.1:abc/x", "its port is not a number"),
        ("postgresql://u:S3cret@[::1:1/x", "its port is not a number"),
        ("postgresql://u:S3cret@127.0.0.1:99999/x", "not 1-65535"),
        ("mysql://u:S3cret@127.0.0.1/x", "is a mysql URL, and the metadata store is PostgreSQL only"),
        ("sqlite:///x.db", "is a sqlite URL, and the metadata store is PostgreSQL only"),
        ("postgresql://postgres:S3c@ret@127.0.0.1:1/x", "has an `@` in its password; write it as %40"),
        ("garbage S3cret", "CONNECT_DATABASE_URL is not a database URL;"),
    ],
)
def test_cli_with_a_database_url_that_cannot_work(url: str, says: str, tmp_path: Path) -> None:
    env = _env(CONNECT_DATABASE_URL=url, CONNECT_HOME=str(tmp_path))
    _out, stderr, code = _run([CONNECT, "list"], env, bound=10)
    line = _one_line(stderr, code, says)
    assert "S3c" not in line and "ret@" not in line, line


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://u:S3cret@127.0.0.1:{port}/x\nerror: forged line",
        "postgresql://u:S3cret@127.0.0.1:{port}/x\r\x1b[2Jerror: forged",
        "postgresql://u:S3cret@bad\x1b[2J\nerror forged/x",  # the host: neither encoded nor cut by libpq's line
    ],
)
def test_cli_shows_control_characters_of_a_database_url_escaped(url: str, tmp_path: Path) -> None:
    url = url.format(port=_closed_port())
    _out, stderr, code = _run([CONNECT, "list"], _env(CONNECT_DATABASE_URL=url, CONNECT_HOME=str(tmp_path)))
    _one_line(stderr, code, "cannot connect to the metadata database")
    assert "\x1b" not in stderr and "\r" not in stderr and "S3cret" not in stderr


def test_print_error_escapes_control_characters(capsys: pytest.CaptureFixture[str]) -> None:
    from connect_core.cli._app import print_error

    print_error("a\nerror: forged\r\x1b[31mred\u2028end")
    stderr = capsys.readouterr().err
    assert stderr.count("\n") == 1 and "\x1b" not in stderr and "\r" not in stderr, repr(stderr)
    assert "a\\nerror: forged\\r\\x1b[31mred\\u2028end" in stderr


@pytest.mark.parametrize("value", ["inf", "1e400", "abc", "0", "nan", "-1", "100000"])
@pytest.mark.parametrize("command", [["list"], ["serve", "--port", "{port}"]])
def test_cli_with_a_bad_connect_timeout(value: str, command: list[str], tmp_path: Path) -> None:
    argv = [part.format(port=_closed_port()) for part in command]
    env = _env(CONNECT_DB_CONNECT_TIMEOUT=value, CONNECT_HOME=str(tmp_path))
    out, stderr, code = _run([CONNECT, *argv], env, bound=10)
    _one_line(stderr, code, f"CONNECT_DB_CONNECT_TIMEOUT={value}:")
    assert "Connect REST API on" not in out


def test_cli_says_the_wait_libpq_really_makes() -> None:
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        url = f"postgresql://connect@127.0.0.1:{silent.getsockname()[1]}/meta"
        _out, stderr, code = _run([CONNECT, "list"], _env(CONNECT_DATABASE_URL=url, CONNECT_DB_CONNECT_TIMEOUT="0.5"))
    _one_line(stderr, code, "no answer within 2 s (CONNECT_DB_CONNECT_TIMEOUT is 0.5; libpq waits whole seconds")


def _refusing_postgres(listener: socket.socket, sqlstate: str, message: str) -> None:
    """Answer each connection as a Postgres that refuses it: no SSL, then a FATAL ErrorResponse."""
    import struct
    import threading

    def serve() -> None:
        while True:
            try:
                conn, _address = listener.accept()
            except OSError:
                return
            with conn:
                while True:
                    head = conn.recv(8)
                    if len(head) < 8:
                        break
                    length, code = struct.unpack("!ii", head)
                    if code in (80877103, 80877104):  # SSLRequest, GSSENCRequest: not here
                        conn.sendall(b"N")
                        continue
                    conn.recv(length - 8)  # the startup packet's parameters
                    fields = b"".join(
                        kind + text.encode() + b"\0"
                        for kind, text in ((b"S", "FATAL"), (b"V", "FATAL"), (b"C", sqlstate), (b"M", message))
                    )
                    conn.sendall(b"E" + struct.pack("!i", len(fields) + 5) + fields + b"\0")
                    break

    threading.Thread(target=serve, daemon=True).start()


@pytest.mark.parametrize(
    ("sqlstate", "message", "fix"),
    [
        ("57P03", "the database system is not currently accepting connections", "not taking connections now"),
        ("57P03", "the database system is starting up", "not taking connections now"),
        ("53300", "sorry, too many clients already", "not taking connections now"),
        ("28P01", 'password authentication failed for user "u"', "fix the user, password or database name"),
    ],
)
def test_cli_words_a_refusal_by_what_the_server_said(sqlstate: str, message: str, fix: str) -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        _refusing_postgres(listener, sqlstate, message)
        url = f"postgresql://u:S3cret@127.0.0.1:{listener.getsockname()[1]}/meta"
        _out, stderr, code = _run([CONNECT, "list"], _env(CONNECT_DATABASE_URL=url))
    line = _one_line(stderr, code, "refused the connection", message, fix)
    assert "S3cret" not in line


@pytest.fixture
def role_without_create(pg_server: str) -> Iterator[str]:
    """A database, and the URL of a role that may connect to it but not create a schema in it."""
    import uuid

    import psycopg2
    from psycopg2 import sql
    from sqlalchemy.engine import make_url

    name = f"connect_test_noc_{uuid.uuid4().hex[:8]}"
    admin = psycopg2.connect(make_url(pg_server).set(drivername="postgresql").render_as_string(hide_password=False))
    admin.autocommit = True
    with admin.cursor() as cur:
        cur.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        cur.execute(sql.SQL("CREATE ROLE {} LOGIN PASSWORD 'S3cretRole'").format(sql.Identifier(name)))
    yield (
        make_url(pg_server)
        .set(database=name, username=name, password="S3cretRole")
        .render_as_string(hide_password=False)
    )
    with admin.cursor() as cur:
        cur.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
        cur.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(name)))
    admin.close()


def test_cli_with_a_role_that_may_not_create_the_schema(role_without_create: str, tmp_path: Path) -> None:
    env = _env(CONNECT_DATABASE_URL=role_without_create, CONNECT_HOME=str(tmp_path))
    _out, stderr, code = _run([CONNECT, "list"], env)
    line = _one_line(stderr, code, "refused a statement: permission denied for database", "CREATE privilege")
    assert "S3cretRole" not in line


@pytest.mark.parametrize("port", ["65536", "0", "-1", "99999999999999999999"])
@pytest.mark.parametrize("command", [["serve"], ["airflow", "up"]])
def test_cli_refuses_a_port_outside_1_65535(port: str, command: list[str]) -> None:
    out, stderr, code = _run([CONNECT, *command, "--port", port], _env(), bound=10)
    assert code == 2 and "Invalid value for '--port'" in stderr, stderr
    assert "Traceback" not in stderr and "Connect REST API on" not in out


def test_require_free_port_refuses_a_port_outside_1_65535() -> None:
    from connect_core.cli._app import require_free_port
    from connect_core.sdk.errors import ConfigError

    for port in (0, 65536, 10**20):
        with pytest.raises(ConfigError, match="not a TCP port"):
            require_free_port("127.0.0.1", port)


def test_serve_on_ipv6_loopback_names_its_url_as_a_url(database_url: str, tmp_path: Path) -> None:
    port = _closed_port()
    env = _env(CONNECT_DATABASE_URL=database_url, CONNECT_HOME=str(tmp_path))
    proc = subprocess.Popen(
        [CONNECT, "serve", "--host", "::1", "--port", str(port)], env=env, stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    assert f"Connect REST API on http://[::1]:{port} " in line, line


def test_airflow_up_refuses_a_database_name_that_is_no_plain_name(tmp_path: Path) -> None:
    env = _env(CONNECT_HOME=str(tmp_path), CONNECT_DATABASE_URL=f"postgresql://u@127.0.0.1:{_closed_port()}/x")
    _out, stderr, code = _run([CONNECT, "airflow", "up", "--airflow-db", 'a"b'], env, bound=10)
    _one_line(stderr, code, '--airflow-db `a"b` is not a plain database name')
    assert code == 2


def test_the_airflow_database_is_created_by_identifier(pg_server: str) -> None:
    import uuid

    import psycopg2

    from connect_core.platform import _ensure_database

    name = f"connect-test-{uuid.uuid4().hex[:8]}"  # a `-`: only quoted as an identifier does it work
    url = _ensure_database(pg_server, name)
    assert url.endswith(f"/{name}")
    admin = psycopg2.connect(pg_server.replace("postgresql+psycopg2://", "postgresql://"))
    admin.autocommit = True
    with admin.cursor() as cur:
        cur.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,))
        assert cur.fetchone() == (1,)
        cur.execute(f'DROP DATABASE "{name}"')
    admin.close()


def test_masked_url_masks_up_to_the_last_at() -> None:
    from connect_core.runtime.security.urls import mask_url_credentials
    from connect_core.runtime.store.db import connect_failure, masked_url

    url = "postgresql://postgres:S3c@ret@127.0.0.1:1/x"
    assert masked_url(url) == "postgresql://postgres:***@127.0.0.1:1/x"
    assert mask_url_credentials(url) == "postgresql://postgres:***@127.0.0.1:1/x"
    assert masked_url("host=h password=S3cretKV sslpassword='a b' user=u") == (
        "host=h password=*** sslpassword=*** user=u"
    )
    import psycopg2

    try:  # libpq, given the URL as SQLAlchemy cut it, echoes the host: `ret@127.0.0.1`
        psycopg2.connect(host="ret@127.0.0.1", port=1, user="postgres", password="S3c", connect_timeout=2)
    except psycopg2.OperationalError as exc:
        reason = connect_failure(exc, url)
    assert reason is not None and "ret@" not in reason and "***@127.0.0.1" in reason, reason
