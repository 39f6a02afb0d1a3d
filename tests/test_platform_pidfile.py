"""`connect airflow up`'s pid file and lock, and `connect airflow down`, against real processes.

The `up` here is a stand-in (`_STANDIN`): the real `PlatformLease` and `run_platform`, with an
`airflow` executable of the test's (`_fake_airflow`) whose `db migrate` sleeps and whose components
are `sleep`s, so no Airflow is needed. Each stand-in runs in a process (and, where it matters, a
session) of its own: a `down` that went wrong must not be able to hit pytest.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from connect_core.platform import (
    AIRFLOW_COMPONENTS,
    PlatformLease,
    PlatformRecord,
    RecordedProcess,
    airflow_environment,
    clear_stale_platform,
    lock_file,
    pid_file,
    running_platform,
    stop_platform,
)
from connect_core.runtime.settings import Settings
from connect_core.sdk.errors import FatalError
from tests.conftest import _admin

ROOT = Path(__file__).resolve().parents[1]

# `connect airflow up` as far as the pid file goes: PlatformLease + run_platform, a fake Airflow.
_STANDIN = """
import sys
from pathlib import Path
from connect_core.platform import Platform, PlatformLease, run_platform
home, airflow = Path(sys.argv[1]), sys.argv[2]
platform = Platform("http://127.0.0.1:9", "admin", "-", {"CONNECT_HOME": str(home), "AIRFLOW_HOME": str(home / "airflow")})
with PlatformLease(home, platform.url) as lease:
    code = run_platform(platform, lease, on_ready=lambda p: None, timeout=600, airflow=airflow)
sys.exit(code)
"""

# A launcher without job control (a script, CI): the stand-in `up` and a sibling share its process
# group, and it runs `down` (stop_platform) itself, in that group too.
_LAUNCHER = """
import json, os, subprocess, sys, time
from pathlib import Path
from connect_core.platform import pid_file, stop_platform
home, standin, airflow = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}  # the test reads this one's output to EOF
up = subprocess.Popen([sys.executable, "-c", standin, str(home), airflow], **quiet)
sibling = subprocess.Popen(["sleep", "600"], **quiet)
def recorded():
    try:
        return json.loads(pid_file(home).read_text())
    except (OSError, ValueError):
        return None
while not recorded() or len(recorded()["processes"]) < 4:  # every component started
    time.sleep(0.1)
recorded = recorded()
report = stop_platform(home, timeout=2)
print(json.dumps({"recorded": recorded, "sibling": sibling.pid, "up": up.pid, "ran": report.ran,
                  "killed": report.killed, "survived": report.survived}), flush=True)
print("up exit", up.wait(), flush=True)
print("launcher survived", flush=True)
"""


def _fake_airflow(tmp_path: Path, *, migrate_s: float = 0, ignore_term: bool = False) -> str:
    """An `airflow` executable: `db migrate` sleeps `migrate_s`; a component is a `sleep` with another
    in its group (as Airflow's components fork), both ignoring SIGTERM if `ignore_term` (a hung stop)."""
    path = tmp_path / "airflow"
    trap = "trap '' TERM; " if ignore_term else ""
    path.write_text(f'#!/bin/sh\nif [ "$1" = db ]; then exec sleep {migrate_s}; fi\n{trap}sleep 600 & exec sleep 600\n')
    path.chmod(0o755)
    return str(path)


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CONNECT_", "AIRFLOW"))}
    return {**env, "CONNECT_HOME": str(home), "PYTHONPATH": str(ROOT)}


def _wait(what: str, check: Callable[[], Any], timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in "ZX"


def _group(pgid: int) -> list[int]:
    """The live processes of process group `pgid`."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == pgid and fields[0] not in "ZX":
                found.append(int(entry.name))
    return found


def _start(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])


def _children(pid: int) -> list[str]:
    out = subprocess.run(["ps", "-o", "args=", "--ppid", str(pid)], capture_output=True, text=True).stdout
    return out.splitlines()


@pytest.fixture
def victim() -> Iterator[subprocess.Popen[bytes]]:
    """An unrelated process whose argv holds `airflow` and `up` (as `docker compose up airflow`)."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", "compose", "up", "airflow"])
    _wait("the victim to run", lambda: _start(proc.pid) >= 0)
    yield proc
    proc.kill()
    proc.wait()


@pytest.fixture
def standins() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Stand-in `up`s (each in a session of its own), killed with their groups after the test."""
    procs: list[subprocess.Popen[bytes]] = []
    yield procs
    for proc in procs:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _standin(home: Path, airflow: str, procs: list[subprocess.Popen[bytes]]) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        [sys.executable, "-c", _STANDIN, str(home), airflow], env=_env(home), start_new_session=True
    )
    procs.append(proc)
    return proc


def _record(home: Path, pid: int, *, processes: tuple[RecordedProcess, ...] = ()) -> None:
    (home / "airflow").mkdir(parents=True, exist_ok=True, mode=0o700)
    up = RecordedProcess("`connect airflow up`", pid, _start(pid))
    pid_file(home).write_text(PlatformRecord(up, str(home.resolve()), "http://127.0.0.1:1", 0.0, processes).dump())


# 1. `down` signals only the `up` that holds the lock, checked by its start time.


def test_down_spares_an_unrelated_process_a_stale_pid_file_names(
    tmp_path: Path, victim: subprocess.Popen[bytes]
) -> None:
    home = tmp_path / "home"
    _record(home, victim.pid)  # a well-formed record, right start time and all: only the lock is missing
    down = subprocess.run(
        [sys.executable, "-m", "connect_core.cli", "airflow", "down", "--timeout", "5"],
        env=_env(home),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert down.returncode == 0, down.stderr
    assert "no platform is running" in down.stdout and "removed the stale" in down.stdout, down.stdout
    assert victim.poll() is None and _alive(victim.pid)
    assert not pid_file(home).exists()
    # The reviewer's file: the old format, no start time; the same.
    pid_file(home).write_text(json.dumps({"pid": victim.pid, "url": "http://127.0.0.1:1", "started": 0}))
    report = stop_platform(home, timeout=5)
    assert (report.ran, report.removed_stale, report.stale, report.killed) == (False, True, None, ())
    assert victim.poll() is None and not pid_file(home).exists()


def test_down_refuses_a_pid_file_that_does_not_name_the_lock_holder(
    tmp_path: Path, victim: subprocess.Popen[bytes]
) -> None:
    home = tmp_path / "home"
    with PlatformLease(home, "http://127.0.0.1:1"):
        assert running_platform(home) is not None  # this process holds the lock: it is the `up`
        _record(home, victim.pid)  # rewritten to name another process
        with pytest.raises(FatalError, match="does not name it"):
            stop_platform(home, timeout=5)
        _record(home, os.getpid())
        pid_file(home).write_text(pid_file(home).read_text().replace(str(home.resolve()), "/elsewhere"))
        with pytest.raises(FatalError, match="nothing was signalled"):
            running_platform(home)
    assert victim.poll() is None
    assert running_platform(home) is None and not pid_file(home).exists()


def test_a_reused_pid_is_never_signalled(tmp_path: Path, victim: subprocess.Popen[bytes]) -> None:
    """A stale record whose component's pid now belongs to another process (another start time)."""
    home = tmp_path / "home"
    reused = RecordedProcess("scheduler", victim.pid, _start(victim.pid) - 1, group=True)
    _record(home, os.getpid(), processes=(reused,))  # no lock held: stale
    report = clear_stale_platform(home)
    assert report.removed_stale and report.stale is not None and report.killed == ()
    assert victim.poll() is None


# 2. Past the timeout: exactly the recorded processes, never a group `up` did not create.


def test_down_stops_the_platform_and_its_components(tmp_path: Path, standins: list[subprocess.Popen[bytes]]) -> None:
    home = tmp_path / "home"
    up = _standin(home, _fake_airflow(tmp_path), standins)
    record = _wait("every component recorded", lambda: _full_record(home))
    assert running_platform(home) == record and record.up.pid == up.pid
    groups = {p.pid: _group(p.pid) for p in record.processes}
    assert all(len(members) == 2 for members in groups.values()), groups  # each component and its fork
    report = stop_platform(home, timeout=30)
    assert (report.ran, report.killed, report.survived) == (True, (), ())
    assert up.wait(5) == 0  # it stopped by itself, its components with it
    assert not any(_group(pgid) for pgid in groups) and not pid_file(home).exists()


def _full_record(home: Path) -> PlatformRecord | None:
    record = running_platform(home)
    return record if record is not None and len(record.processes) == len(AIRFLOW_COMPONENTS) else None


def test_down_past_its_timeout_kills_the_recorded_processes_and_never_the_callers_group(tmp_path: Path) -> None:
    """`up` shares its launcher's process group (no job control) and its components ignore SIGTERM:
    `down`, in that group too, kills exactly the components (their groups: `up` made them) and `up`."""
    home = tmp_path / "home"
    airflow = _fake_airflow(tmp_path, ignore_term=True)
    launcher = subprocess.run(
        [sys.executable, "-c", _LAUNCHER, str(home), _STANDIN, airflow],
        env=_env(home),
        capture_output=True,
        text=True,
        timeout=60,
        start_new_session=True,  # its group is the one that must survive
    )
    lines = launcher.stdout.splitlines()
    assert lines and lines[-1] == "launcher survived", (launcher.stdout, launcher.stderr)
    found = json.loads(lines[0])
    try:
        assert _alive(found["sibling"]), "a process of the caller's group was killed"
    finally:
        os.kill(found["sibling"], signal.SIGKILL)
    assert lines[1] == f"up exit {-signal.SIGKILL}"
    components = [p["pid"] for p in found["recorded"]["processes"]]
    assert found["ran"] and not found["survived"]
    assert found["killed"] == [
        *(f"{name} (pid {pid})" for name, pid in zip(AIRFLOW_COMPONENTS, components, strict=True)),
        f"`connect airflow up` (pid {found['up']})",
    ]
    assert not any(_group(pid) for pid in components), "a component or its fork survived"
    assert not pid_file(home).exists()


# 3. A signal at any step of the start leaves nothing behind.


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_during_migrate_leaves_no_pid_file(
    tmp_path: Path, standins: list[subprocess.Popen[bytes]], sig: signal.Signals
) -> None:
    home = tmp_path / "home"
    up = _standin(home, _fake_airflow(tmp_path, migrate_s=60), standins)
    _wait("`airflow db migrate`", lambda: any("sleep 60" in c for c in _children(up.pid)))
    assert running_platform(home) is not None
    if sig == signal.SIGINT:
        os.killpg(up.pid, sig)  # Ctrl-C: the terminal signals the whole foreground group
    else:
        os.kill(up.pid, sig)  # `connect airflow down`
    assert up.wait(15) == 0
    assert not pid_file(home).exists() and running_platform(home) is None
    assert not _group(up.pid), "`airflow db migrate` outlived `up`"


def test_a_second_up_for_the_same_home_is_refused(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with PlatformLease(home, "http://127.0.0.1:1"):
        with pytest.raises(FatalError, match="already runs for"):
            PlatformLease(home, "http://127.0.0.1:2").__enter__()
        assert json.loads(pid_file(home).read_text())["url"] == "http://127.0.0.1:1"
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL  # given back


# 4. The password files are this user's alone from their first byte.


def test_the_password_files_are_private_from_creation(tmp_path: Path, pg_server: str) -> None:
    home = tmp_path / "home"
    (home / "airflow").mkdir(parents=True, mode=0o755)  # made before, by an older version
    settings = Settings(home=home, database_url=pg_server)
    airflow_db = f"airflow_modes_{uuid.uuid4().hex[:8]}"
    exposed: list[str] = []
    done = threading.Event()

    def poll() -> None:  # another local user, listing and reading the folder as fast as it can
        while not done.is_set():
            for entry in os.scandir(home / "airflow"):
                try:
                    if entry.stat(follow_symlinks=False).st_mode & 0o077:
                        exposed.append(entry.name)
                except FileNotFoundError:
                    pass

    poller = threading.Thread(target=poll)
    poller.start()
    try:
        for _ in range(100):
            (home / "airflow" / "api.json").unlink(missing_ok=True)
            airflow_environment(settings, pg_server, port=1, airflow_db=airflow_db)
    finally:
        done.set()
        poller.join()
        admin = _admin(pg_server)
        with admin.cursor() as cur:
            cur.execute(f'DROP DATABASE IF EXISTS "{airflow_db}" WITH (FORCE)')
        admin.close()
    assert exposed == []
    assert stat.S_IMODE((home / "airflow").stat().st_mode) == 0o700
    names = {"api.json", "simple_auth_manager_passwords.json", "admin-password", "jwt-secret", "api-secret-key"}
    assert {p.name for p in (home / "airflow").iterdir()} == names  # no temporary file left
    assert all(stat.S_IMODE((home / "airflow" / n).stat().st_mode) == 0o600 for n in names)


# 5. A planted link is replaced, never written or read through.


def test_a_pid_file_link_is_replaced_not_followed(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / "airflow").mkdir(parents=True, mode=0o700)
    target = tmp_path / "bashrc"
    target.write_text("export IMPORTANT=1\n")
    pid_file(home).symlink_to(target)
    with PlatformLease(home, "http://127.0.0.1:1"):
        assert not pid_file(home).is_symlink() and json.loads(pid_file(home).read_text())["pid"] == os.getpid()
        assert target.read_text() == "export IMPORTANT=1\n"
    assert not pid_file(home).exists() and target.read_text() == "export IMPORTANT=1\n"
    # A link to a well-formed record is not read either (stale: removed, the link only).
    record = tmp_path / "record.json"
    _record(tmp_path / "other", os.getpid())
    record.write_text(pid_file(tmp_path / "other").read_text())
    pid_file(home).symlink_to(record)
    report = clear_stale_platform(home)
    assert report.removed_stale and report.stale is None and record.exists()
    assert lock_file(home).exists() and not lock_file(home).is_symlink()
