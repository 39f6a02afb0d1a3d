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
