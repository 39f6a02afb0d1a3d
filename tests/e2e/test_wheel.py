"""A wheel that installs: built from this checkout, installed with its dependencies into a fresh
virtualenv outside it, and used from a directory outside it. The migrations, the built-in
connectors, the DAG and plugin folders and the file quickstart all come from the installed
package, none from the checkout.

The checkout's `connect_core/_migrations`, `_dags` and `_plugins` are symlinks to the top-level
`migrations/`, `dags/` and `plugins/`; the wheel holds their copies (pyproject.toml).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CONSTRAINTS = ROOT / "requirements" / "constraints.txt"
QUICKSTART = ROOT / "examples" / "quickstart"
#: What the build reads. Built from a copy, so the build's `build/` and `*.egg-info` stay out of the checkout.
BUILD_INPUTS = ("pyproject.toml", "README.md", "connect_core", "migrations", "dags", "plugins")
#: The packaged folders, by the path they have inside the package.
PACKAGED = {"_migrations": "migrations", "_dags": "dags", "_plugins": "plugins"}
SOURCE_TEXT = "Hello \nRocketMQ\n Connect\nfrom a wheel\n"


def _run(args: list[str], *, cwd: Path, env: dict[str, str] | None = None, timeout: float = 300) -> str:
    proc = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    assert proc.returncode == 0, (
        f"{' '.join(args)} exited {proc.returncode}:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    )
    return proc.stdout


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    src = tmp_path_factory.mktemp("src")
    for name in BUILD_INPUTS:
        path = ROOT / name
        if path.is_dir():
            ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
            shutil.copytree(path, src / name, symlinks=True, ignore=ignore)  # the package's symlinks stay links
        else:
            shutil.copy2(path, src / name)
    dist = tmp_path_factory.mktemp("dist")
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "--wheel-dir", str(dist), str(src)], cwd=dist)
    (found,) = dist.glob("connect_core-*.whl")
    return found


def test_the_wheel_holds_every_module_and_the_migrations_dags_and_plugin(wheel: Path) -> None:
    """Every Python file the package reaches (through its symlinks) is in the wheel, as a file."""
    expected = set()
    for dirpath, dirnames, filenames in os.walk(ROOT / "connect_core", followlinks=True):
        dirnames[:] = [d for d in dirnames if d != "__pycache__"]
        rel = Path(dirpath).relative_to(ROOT)
        expected |= {(rel / f).as_posix() for f in filenames if f.endswith(".py")}
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        links = [i.filename for i in zf.infolist() if (i.external_attr >> 16) & 0o170000 == 0o120000]
    assert {n for n in names if n.endswith(".py")} == expected
    assert not links
    for packaged, top in PACKAGED.items():
        prefix = f"connect_core/{packaged}/"
        shipped = {n.removeprefix(prefix) for n in names if n.startswith(prefix)}
        in_checkout = {p.relative_to(ROOT / top).as_posix() for p in (ROOT / top).rglob("*.py")}
        assert in_checkout <= shipped, packaged
    assert "connect_core/_migrations/script.py.mako" in names  # `alembic revision` needs it
    assert "connect_core/_dags/connect_dags.py" in names
    assert "connect_core/_plugins/connect_plugin.py" in names


@pytest.mark.spark_submit
def test_the_wheel_installs_into_a_fresh_venv_and_runs_the_file_quickstart_outside_the_checkout(
    wheel: Path, empty_database_url: str, tmp_path: Path
) -> None:
    started = time.monotonic()
    venv = tmp_path / "venv"
    # The base interpreter's own venv: no --system-site-packages, nothing shared with the checkout's .venv.
    _run([sys.executable, "-m", "venv", str(venv)], cwd=tmp_path)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "--disable-pip-version-check", "--quiet"]
    # --no-compile: Python compiles what the commands import, not all of pyspark, numpy, pyarrow … up front.
    _run([*pip, "install", "--no-compile", "-c", str(CONSTRAINTS), str(wheel)], cwd=tmp_path, timeout=600)
    installed = time.monotonic()

    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    keep = {k: v for k, v in os.environ.items() if not k.startswith(("CONNECT_", "AIRFLOW", "PYTHON", "SPARK_"))}
    keep.pop("VIRTUAL_ENV", None)
    path = [p for p in keep.get("PATH", "").split(os.pathsep) if p and not Path(p).resolve().is_relative_to(ROOT)]
    env = keep | {
        "PATH": os.pathsep.join([str(venv / "bin"), *path]),
        "CONNECT_HOME": str(home),
        "CONNECT_DATABASE_URL": empty_database_url,  # the wheel's own migrations make the schema
        "SPARK_LOCAL_IP": "127.0.0.1",
    }

    def connect(*args: str) -> str:
        return _run([str(venv / "bin" / "connect"), *args], cwd=work, env=env)

    # Nothing the installed package uses resolves into the checkout.
    probe = (
        "import json, sys, connect_core, connect_core.platform as p, connect_core.runtime.store.migrate as m;"
        "print(json.dumps({'module': connect_core.__file__, 'migrations': str(m.MIGRATIONS_DIR),"
        " 'dags': str(p.DAGS_FOLDER), 'plugins': str(p.PLUGINS_FOLDER), 'sys.path': sys.path}))"
    )
    where = json.loads(_run([str(venv / "bin" / "python"), "-c", probe], cwd=work, env=env))
    for key in ("module", "migrations", "dags", "plugins"):
        assert Path(where[key]).resolve().is_relative_to(venv.resolve()), (key, where[key])
    assert not [p for p in where["sys.path"] if p and Path(p).resolve().is_relative_to(ROOT)], where["sys.path"]

    assert "metadata schema at head" in connect("db", "upgrade")

    plugins = {p["name"] for p in json.loads(connect("plugins", "--output", "json"))}
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    built_in = set(pyproject["project"]["entry-points"]["connect_core.connectors"])
    assert built_in <= plugins, built_in - plugins

    dags = Path(connect("airflow", "dags-path").strip())
    assert (dags / "connect_dags.py").is_file()
    assert dags == Path(where["dags"])
    plugin = Path(connect("airflow", "plugins-path").strip())
    assert (plugin / "connect_plugin.py").is_file()

    # The file quickstart (examples/quickstart), from this working directory.
    for config in QUICKSTART.glob("file-*.json"):
        shutil.copy(config, work / config.name)
    (work / "test-source-file.txt").write_text(SOURCE_TEXT)
    connect("put", "fileSourceConnector", "--config", "file-source.json")
    connect("put", "fileSinkConnector", "--config", "file-sink.json")
    ran = json.loads(connect("run", "fileSourceConnector", "fileSinkConnector", "--output", "json"))
    assert [r["state"] for r in ran] == ["SUCCEEDED", "SUCCEEDED"], ran
    assert (work / "test-sink-file.txt").read_text() == SOURCE_TEXT

    # Measured on the 2-core CI machine with a warm pip cache; reported with -rP.
    print(f"venv and install: {installed - started:.1f} s; the commands: {time.monotonic() - installed:.1f} s")
