"""The README's first command, run exactly as a newcomer runs it: `bash scripts/quickstart.sh` in a fresh
copy of the checkout, on the embedded default (no `CONNECT_*` set), twice.

The copy reuses this checkout's installed `.venv` (a symlink), so the script's bootstrap only checks
that the install is current; everything after it (the embedded Postgres, the connectors, the
spark-submit runs, the status) is the script's own.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from connect_core.runtime.settings import Settings

pytestmark = pytest.mark.spark_submit

ROOT = Path(__file__).resolve().parents[2]
SEED = ["Hello ", "RocketMQ", " Connect"]


def _fresh_copy(dest: Path) -> Path:
    """The checkout's files as a clone would have them (tracked, plus new files not yet ignored)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for rel in filter(None, listed.split("\0")):
        src = ROOT / rel
        if src.is_file():  # a file deleted but not yet staged is listed too
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    (dest / ".venv").symlink_to(ROOT / ".venv")
    return dest


def _newcomer_env() -> dict[str, str]:
    """A shell with none of the suite's settings: no `CONNECT_*`, no Airflow home, the embedded default."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CONNECT_", "AIRFLOW", "PYTEST", "SPARK_"))}
    env.pop("VIRTUAL_ENV", None)
    return env


def _quickstart(checkout: Path) -> str:
    proc = subprocess.run(
        ["bash", "scripts/quickstart.sh"],
        cwd=checkout,
        env=_newcomer_env(),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, f"quickstart exited {proc.returncode}:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    return proc.stdout


def _states(out: str) -> dict[str, str]:
    return dict(re.findall(r"^(file\w+Connector) \((?:SOURCE|SINK)\): (\w+)$", out, re.MULTILINE))


def test_quickstart_script_runs_twice_on_a_fresh_copy_and_copies_each_line_once(tmp_path: Path) -> None:
    checkout = _fresh_copy(tmp_path / "clone")
    work = checkout / ".connect" / "quickstart"

    first = _quickstart(checkout)
    assert _states(first) == {"fileSourceConnector": "RUNNING", "fileSinkConnector": "RUNNING"}, first
    sink = (work / "test-sink-file.txt").read_text().splitlines()
    assert sink[:3] == SEED and len(sink) == 4 and sink[3].startswith("synced at "), sink
    assert "Hello \nRocketMQ\n Connect\n" in first  # the script shows the sink file
    assert (checkout / ".connect" / "pgdata" / "PG_VERSION").exists()  # on the embedded Postgres

    second = _quickstart(checkout)
    assert _states(second) == {"fileSourceConnector": "RUNNING", "fileSinkConnector": "RUNNING"}, second
    source = (work / "test-source-file.txt").read_text().splitlines()
    again = (work / "test-sink-file.txt").read_text().splitlines()
    assert len(source) == 5 and again == source, (source, again)  # the new line once, no line twice
    assert len(set(again)) == len(again)

    # Everything the runtime made under its home is on the list file connectors may not touch, so
    # that list (which keeps the quickstart's own folder usable) cannot fall behind the runtime.
    home = checkout / ".connect"
    protected = Settings(home=home).runtime_data_dirs()
    made = {p.name for p in home.iterdir()} - {"quickstart"}
    unprotected = {name for name in made if not any((home / name).resolve().is_relative_to(d) for d in protected)}
    assert not unprotected, f"the runtime keeps {sorted(unprotected)} under CONNECT_HOME, unprotected"
