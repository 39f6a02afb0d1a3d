"""A venv of its own for the benches' dlt runs: dlt never goes into the project's `.venv`.

Installing dlt into `.venv` upgrades packages the product pins (setuptools among them, see
docs/research/jdbc-bench-alternatives.md §1), so the benches run dlt with the interpreter of a
separate venv at `~/.cache/connect-core/bench-dlt-venv`, created on first use from this interpreter
(`python -m venv`) with the pinned requirements below. A marker file records what was installed
(requirements + Python version); a venv whose marker differs is rebuilt, one that matches is reused.

    .venv/bin/python bench/_dlt_env.py          # create it if needed and print its python
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

VENV = Path(os.environ.get("CONNECT_BENCH_DLT_VENV", Path.home() / ".cache" / "connect-core" / "bench-dlt-venv"))
# dlt 1.31.0 with connectorx 0.4.6 and ADBC (parquet loaded by binary COPY) is the combination
# jdbc-bench-alternatives.md measured; pymysql and psycopg2 are what `_jdbc_data` (imported by the
# dlt job) needs; dlt requires setuptools>=65.6, and 81+ no longer ships pkg_resources. The extra is
# spelled `sql-database`, as dlt's metadata names it: pip 26 installs nothing for `sql_database`
# (so no SQLAlchemy). pyarrow: dlt's parquet writer and connectorx's arrow_stream need it, and
# neither extra brings it (in .venv the product had it).
REQUIREMENTS = (
    "dlt[postgres,sql-database]==1.31.0",
    "connectorx==0.4.6",
    "pymysql",
    "psycopg2-binary",
    "adbc-driver-postgresql",
    "pyarrow",
    "setuptools<81",
)
MARKER = ".connect-bench-dlt.json"


def _python(venv: Path) -> Path:
    return venv / "bin" / "python"


def _wanted() -> dict[str, object]:
    return {"requirements": list(REQUIREMENTS), "python": list(sys.version_info[:3])}


def _installed(venv: Path) -> dict[str, object] | None:
    try:
        return json.loads((venv / MARKER).read_text())
    except (OSError, ValueError):
        return None


def dlt_python(venv: Path = VENV) -> str:
    """The python of the dlt venv, created (or rebuilt when its requirements changed) first."""
    python = _python(venv)
    if python.exists() and _installed(venv) == _wanted():
        return str(python)
    started = time.perf_counter()
    if venv.exists():
        print(f"dlt venv: {venv} is stale or incomplete (marker {_installed(venv)}); rebuilding", flush=True)
        shutil.rmtree(venv)
    venv.parent.mkdir(parents=True, exist_ok=True)
    print(f"dlt venv: creating {venv} with {sys.executable} -m venv", flush=True)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(python), "-m", "pip", "--disable-pip-version-check", "install", "--quiet"]
    print(f"dlt venv: pip install {' '.join(REQUIREMENTS)}", flush=True)
    proc = subprocess.run([*pip, *REQUIREMENTS], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"installing dlt into {venv} failed:\n{(proc.stdout + proc.stderr)[-3000:]}")
    check = (
        "import dlt, connectorx, adbc_driver_postgresql, pyarrow, psycopg2, pymysql, sqlalchemy; print(dlt.__version__)"
    )
    imported = subprocess.run([str(python), "-c", check], capture_output=True, text=True, check=False)
    if imported.returncode != 0:
        raise RuntimeError(f"the dlt venv {venv} misses a module after pip install:\n{imported.stderr[-2000:]}")
    version = imported.stdout.strip()
    (venv / MARKER).write_text(json.dumps(_wanted()))  # written last: a marker means a complete install
    print(f"dlt venv: dlt {version} ready in {time.perf_counter() - started:.0f} s: {python}", flush=True)
    return str(python)


if __name__ == "__main__":
    print(dlt_python())
