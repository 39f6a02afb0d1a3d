"""Airflow fixtures: a real Airflow metadata database (Postgres) migrated once per session."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from tests.conftest import _admin

ROOT = Path(__file__).resolve().parents[2]
# Importing Airflow in this process (DAG factory tests) must not touch ~/airflow.
os.environ.setdefault("AIRFLOW_HOME", tempfile.mkdtemp(prefix="connect-airflow-home-"))
os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")


@pytest.fixture(scope="session")
def airflow_db(pg_server: str) -> Iterator[str]:
    """A migrated Airflow metadata database, dropped after the session."""
    name = f"airflow_test_{uuid.uuid4().hex[:10]}"
    admin = _admin(pg_server)
    with admin.cursor() as cur:
        cur.execute(f'CREATE DATABASE "{name}"')
    url = make_url(pg_server).set(drivername="postgresql+psycopg2", database=name)
    env = airflow_env_vars(url.render_as_string(hide_password=False), Path(tempfile.mkdtemp()))
    subprocess.run([_airflow(), "db", "migrate"], env={**os.environ, **env}, check=True, capture_output=True)
    yield url.render_as_string(hide_password=False)
    with admin.cursor() as cur:
        cur.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    admin.close()


def _airflow() -> str:
    return str(Path(sys.executable).with_name("airflow"))


def airflow_env_vars(airflow_db_url: str, home: Path) -> dict[str, str]:
    return {
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": airflow_db_url,
        "AIRFLOW__CORE__DAGS_FOLDER": str(ROOT / "dags"),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(ROOT / "plugins"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "SPARK_LOCAL_IP": "127.0.0.1",
    }


class AirflowCli:
    """`airflow …` with this test's Airflow database and Connect metadata store."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env

    def __call__(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            [_airflow(), *args], env=self.env, capture_output=True, text=True, timeout=600, check=False
        )
        if check and proc.returncode != 0:
            raise AssertionError(
                f"airflow {' '.join(args)} exited {proc.returncode}:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
            )
        return proc


@pytest.fixture
def airflow(airflow_db: str, database_url: str, tmp_path: Path) -> AirflowCli:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CONNECT_", "AIRFLOW"))}
    env.update(airflow_env_vars(airflow_db, tmp_path / "airflow-home"))
    # File connectors of a test use its tmp_path (`file.allowed.paths`).
    env.update(
        CONNECT_DATABASE_URL=database_url, CONNECT_HOME=str(tmp_path / "home"), CONNECT_FILE_ALLOWED_PATHS=str(tmp_path)
    )
    return AirflowCli(env)
