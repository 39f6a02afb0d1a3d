"""`connect --url <airflow>/connect …` without --token fetches a token from Airflow's `/auth/token`
(`_airflow_token`); a REST token comes from --token / CONNECT_REST_TOKEN. Against a hostile or
broken server, each CLI run (a real subprocess) prints one `error:` line, exits non-zero, within
the client's deadline, and shows neither a password nor a token."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.runtime.test_airflow_client_hostile import (
    GOOD_TOKEN,
    PASSWORD,
    URL_PASSWORD,
    Reply,
    TokenServer,
    drip,
    huge,
    json_reply,
)

#: the CLI's deadline for one exchange with Airflow (AirflowClient.timeout)
DEADLINE_S = 10.0
REST_TOKEN = "tok-Secret-123"
SECRETS = (PASSWORD, URL_PASSWORD, GOOD_TOKEN, REST_TOKEN, "S3cret-Token")


@dataclass
class Run:
    stdout: str
    stderr: str
    code: int
    took: float


@dataclass(frozen=True)
class Case:
    reply: Reply | None  # the answer to POST /auth/token; None: nothing listens
    says: str
    userinfo: str = ""


def _redirect(handler: object) -> None:
    handler.send_response(307)  # type: ignore[attr-defined]
    handler.send_header("Location", "http://127.0.0.2:9/auth/token")  # type: ignore[attr-defined]
    handler.end_headers()  # type: ignore[attr-defined]


CASES = {
    "garbage": Case(json_reply(b"<html>not json</html>"), "without a usable token (something other than JSON)"),
    "list": Case(json_reply(b"[1, 2]"), "(JSON that is an array)"),
    "no-key": Case(json_reply(b'{"token": "S3cret-Token"}'), "(a JSON object without `access_token`)"),
    "object-token": Case(json_reply(b'{"access_token": {"a": 1}}'), "an `access_token` that is not a string"),
    "crlf-token": Case(json_reply(b'{"access_token": "S3cret-Token\\r\\nX-Evil: 1"}'), "a line break (CR or LF)"),
    "huge": Case(huge, "(more than 64 KB)"),
    "slow-drip": Case(drip, f"did not answer POST /auth/token within {DEADLINE_S:g} s"),
    "refused": Case(
        json_reply({"detail": "no"}, 401), "refused a token for `admin`: HTTP 401", f"admin:{URL_PASSWORD}@"
    ),
    "redirect": Case(_redirect, "HTTP 307"),
    "unreachable": Case(None, "cannot reach Airflow at `http://admin:***@127.0.0.1:", f"admin:{URL_PASSWORD}@"),
}


def _env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONNECT_")}
    return {**env, "CONNECT_HOME": str(home), **extra}


def _connect(env: dict[str, str], *args: str) -> Run:
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "connect_core.cli", *args], env=env, capture_output=True, text=True, timeout=120
    )
    return Run(proc.stdout, proc.stderr, proc.returncode, time.monotonic() - started)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Run]]:
    """Every case's CLI run, all at once (the slow drip alone takes the whole deadline)."""
    home = tmp_path_factory.mktemp("home")
    servers: list[TokenServer] = []

    def run(case: Case) -> Run:
        if case.reply is None:
            port = _free_port()
        else:
            server = TokenServer()
            servers.append(server)
            server.replies["POST", "/auth/token"] = case.reply
            port = server.port
        airflow = f"http://{case.userinfo}127.0.0.1:{port}"
        env = _env(home, CONNECT_AIRFLOW_URL=airflow, CONNECT_AIRFLOW_PASSWORD=PASSWORD)
        return _connect(env, "--url", f"{airflow}/connect", "list")

    # the slow drip first (it mostly waits), then the others, as many at once as there are CPUs
    names = sorted(CASES, key=lambda name: name != "slow-drip")
    with ThreadPoolExecutor(max(2, os.cpu_count() or 1)) as pool:
        futures = {name: pool.submit(run, CASES[name]) for name in names}
        yield {name: future.result() for name, future in futures.items()}
    for server in servers:
        server.close()


def _one_line(run: Run, code: int = 1) -> str:
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert run.code == code and len(lines) == 1 and "Traceback" not in run.stderr, run
    assert lines[0].startswith("error: "), lines
    for secret in SECRETS:
        assert secret not in run.stdout + run.stderr, (secret, run)
    return lines[0]


@pytest.mark.parametrize("name", list(CASES))
def test_a_failed_token_fetch_is_one_line(runs: dict[str, Run], name: str) -> None:
    run = runs[name]
    line = _one_line(run)
    assert CASES[name].says in line, line
    assert "or give the REST API's token with --token" in line, line


def test_a_slow_drip_ends_by_the_deadline(runs: dict[str, Run]) -> None:
    """The reviewer's drip hung past 100 s: now the run takes the deadline and a start-up (the
    slowest of the other runs, on a machine as busy as theirs), with room."""
    start_up = max(run.took for name, run in runs.items() if name != "slow-drip")
    assert runs["slow-drip"].took < DEADLINE_S + start_up + 5.0, (runs["slow-drip"].took, start_up)


def test_a_rest_token_with_a_trailing_cr_is_sent_without_it(tmp_path: Path) -> None:
    """A CRLF env file leaves `\\r` at the token's end: dropped (a header cannot carry it, and a
    server drops whitespace around a header's value anyway), the request goes through."""
    server = TokenServer()
    try:
        server.replies["GET", "/connectors"] = json_reply([])
        run = _connect(_env(tmp_path, CONNECT_REST_TOKEN=f"{REST_TOKEN}\r"), "--url", server.url, "list")
        assert run.code == 0, run
        assert server.requests == [("GET", "/connectors", f"Bearer {REST_TOKEN}")]
    finally:
        server.close()


@pytest.mark.parametrize(
    ("token", "says"),
    [
        (f"tök-{REST_TOKEN}", "has a non-ASCII character inside"),
        (f"{REST_TOKEN} {REST_TOKEN}", "has a blank inside"),
        (f"{REST_TOKEN}\x1b[31m", "has a control character inside"),
    ],
)
def test_a_rest_token_a_header_cannot_carry_is_refused_unshown(tmp_path: Path, token: str, says: str) -> None:
    port = _free_port()
    run = _connect(_env(tmp_path, CONNECT_REST_TOKEN=token), "--url", f"http://127.0.0.1:{port}", "list")
    line = _one_line(run, code=2)
    assert f"the REST API's token (--token, CONNECT_REST_TOKEN) {says}" in line, line
