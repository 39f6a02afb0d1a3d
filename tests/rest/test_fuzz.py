"""Schemathesis fuzzes every operation of the OpenAPI spec over real HTTP: no 500 anywhere."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx

from connect_core.rest.app import create_app
from connect_core.rest.auth import bearer_or_loopback
from connect_core.runtime.context import Runtime
from connect_core.runtime.security.roles import Role
from tests.rest.conftest import Served, serve


def _schemathesis(api: Served, tmp_path: Path, *extra: str, examples: int = 25) -> None:
    proc = subprocess.run(
        [
            str(Path(sys.executable).with_name("schemathesis")),
            "run",
            f"{api.url}/openapi.json",
            "--checks",
            "not_a_server_error",
            "--max-examples",
            str(examples),
            "--request-timeout",
            "10",
            "--exclude-path",
            "/connectors/{connector}/trigger",  # needs Airflow: covered by the platform test
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=tmp_path,  # schemathesis keeps a cache in its working directory
    )
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
    print(proc.stdout[-1500:])
    assert " 0 passed" not in proc.stdout


def test_schemathesis_finds_no_server_error_in_the_connector_role(runtime: Runtime, tmp_path: Path) -> None:
    """The same over a server with roles, as the connector role: every operator route is a 403, never a 5xx."""
    tokens = {Role.operator: "fuzz-operator", Role.connector: "fuzz-connector"}
    for api in serve(create_app(lambda: runtime, auth=[bearer_or_loopback(tokens=tokens)])):
        # the OpenAPI document is read with the same header
        _schemathesis(api, tmp_path, "--header", "Authorization: Bearer fuzz-connector", examples=10)


def test_schemathesis_finds_no_server_error(api: Served, runtime: Runtime, tmp_path: Path) -> None:
    # Some state to hit: a source and a sink that exist.
    for name, config in {
        "src": {"connector.class": "FileSourceConnector", "file": str(tmp_path / "i"), "topic": "t"},
        "snk": {"connector.class": "FileSinkConnector", "file": str(tmp_path / "o"), "topics": "t"},
    }.items():
        httpx.post(f"{api.url}/connectors", json={"name": name, "config": config}).raise_for_status()
    _schemathesis(api, tmp_path)
