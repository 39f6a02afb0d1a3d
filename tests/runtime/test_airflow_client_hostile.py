"""`AirflowClient` against a hostile or broken Airflow: a real HTTP server on 127.0.0.1 (threads, in
the test) answers `/auth/token` and the API the way the test asks. Every failure is one
`RetriableError` line that names Airflow without its URL's password and never shows a token; a
slow drip ends by the client's deadline, a huge body is cut after a bounded read."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from connect_core.runtime.airflow_client import API_ANSWER_MAX_BYTES, TOKEN_ANSWER_MAX_BYTES, AirflowClient
from connect_core.sdk.errors import RetriableError

PASSWORD = "Airfl0w-Passw0rd"
URL_PASSWORD = "UrlPassw0rd-9"
GOOD_TOKEN = "eyJhbGciOi.Good-Token_42"
#: the client's deadline in these tests: short, so a hostile server costs the suite little
DEADLINE = 1.5

Reply = Callable[[BaseHTTPRequestHandler], None]


class TokenServer:
    """A threaded HTTP server whose answer to each (method, path) is a function of the handler."""

    def __init__(self) -> None:
        self.replies: dict[tuple[str, str], Reply] = {}
        self.requests: list[tuple[str, str, str | None]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_args: Any) -> None:
                pass

            def _answer(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                if length:
                    self.rfile.read(length)
                path = self.path.split("?")[0]
                server.requests.append((self.command, path, self.headers.get("Authorization")))
                reply = server.replies.get((self.command, path))
                if reply is None:
                    self.send_response(404)
                    self.end_headers()
                    return
                try:
                    reply(self)
                except OSError:  # the client hung up: what a bounded read does
                    pass

            do_GET = do_POST = do_PATCH = do_DELETE = _answer

        self._http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._http.daemon_threads = True
        self._http.sent = 0  # type: ignore[attr-defined]  # body bytes `huge` wrote
        self.port = self._http.server_address[1]
        self._thread = threading.Thread(target=self._http.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def sent(self) -> int:
        return int(self._http.sent)  # type: ignore[attr-defined]

    def close(self) -> None:
        self._http.shutdown()
        self._http.server_close()


@pytest.fixture
def airflow() -> Iterator[TokenServer]:
    server = TokenServer()
    yield server
    server.close()


def _client(server: TokenServer, *, userinfo: str = "") -> AirflowClient:
    return AirflowClient(f"http://{userinfo}127.0.0.1:{server.port}", "admin", PASSWORD, timeout=DEADLINE)


def json_reply(body: Any, status: int = 200) -> Reply:
    def reply(handler: BaseHTTPRequestHandler) -> None:
        raw = body if isinstance(body, bytes) else json.dumps(body).encode()
        handler.send_response(status)
        handler.send_header("content-length", str(len(raw)))
        handler.end_headers()
        handler.wfile.write(raw)

    return reply


def _failure(client: AirflowClient, call: Callable[[AirflowClient], Any] | None = None) -> str:
    """The one-line message of the RetriableError the call raises (default: fetching a token)."""
    with pytest.raises(RetriableError) as raised:
        (call or AirflowClient.bearer_token)(client)
    message = str(raised.value)
    assert "\n" not in message and "Traceback" not in message, message
    for secret in (PASSWORD, URL_PASSWORD, GOOD_TOKEN, "S3cret-Token"):
        assert secret not in message, message
    return message


def test_a_good_token_is_fetched_once_and_sent(airflow: TokenServer) -> None:
    airflow.replies["POST", "/auth/token"] = json_reply({"access_token": GOOD_TOKEN})
    airflow.replies["GET", "/api/v2/pools"] = json_reply({"pools": [{"name": "connect_p", "slots": 3}]})
    client = _client(airflow)
    assert client.bearer_token() == GOOD_TOKEN
    assert client.pools() == {"connect_p": 3}
    assert airflow.requests[-1] == ("GET", "/api/v2/pools", f"Bearer {GOOD_TOKEN}")
    assert [r[1] for r in airflow.requests].count("/auth/token") == 1
    assert PASSWORD not in repr(client) and GOOD_TOKEN not in repr(client)


def drip(handler: BaseHTTPRequestHandler) -> None:
    """A body of a byte a second: each read gets one within its timeout."""
    handler.send_response(200)
    handler.end_headers()
    for _ in range(100):
        handler.wfile.write(b" ")
        handler.wfile.flush()
        time.sleep(1.0)


def test_a_slow_drip_ends_by_the_deadline(airflow: TokenServer) -> None:
    """A byte a second never trips a read timeout; the whole exchange still ends at the deadline,
    not at the first byte after it."""
    airflow.replies["POST", "/auth/token"] = drip
    started = time.monotonic()
    message = _failure(_client(airflow))
    took = time.monotonic() - started
    assert DEADLINE - 0.1 < took < DEADLINE + 0.4, took
    assert f"did not answer POST /auth/token within {DEADLINE:g} s" in message, message


def test_headers_dripped_end_by_the_deadline_too(airflow: TokenServer) -> None:
    def drip_headers(handler: BaseHTTPRequestHandler) -> None:
        handler.wfile.write(b"HTTP/1.1 200 OK\r\n")
        for n in range(100):
            handler.wfile.write(f"X-Slow-{n}: 1\r\n".encode())
            handler.wfile.flush()
            time.sleep(0.3)

    airflow.replies["POST", "/auth/token"] = drip_headers
    started = time.monotonic()
    message = _failure(_client(airflow))
    assert time.monotonic() - started < DEADLINE + 0.4
    assert "did not answer" in message, message


def huge(handler: BaseHTTPRequestHandler) -> None:
    """300 MB of blanks (valid JSON's leading whitespace), announced; the server counts what it wrote."""
    handler.send_response(200)
    handler.send_header("content-length", str(300 * 1024 * 1024))
    handler.end_headers()
    chunk = b" " * 65536
    for _ in range(300 * 16):
        handler.wfile.write(chunk)
        handler.server.sent += len(chunk)  # type: ignore[attr-defined]


def test_a_huge_body_is_cut_after_a_bounded_read(airflow: TokenServer) -> None:
    """300 MB announced: the client reads a little more than 64 KB and hangs up."""
    airflow.replies["POST", "/auth/token"] = huge
    started = time.monotonic()
    message = _failure(_client(airflow))
    assert time.monotonic() - started < DEADLINE, "cut at once, not at the deadline"
    assert f"more than {TOKEN_ANSWER_MAX_BYTES // 1024} KB" in message, message
    time.sleep(0.2)  # the server's writes fail once the client is gone
    assert airflow.sent < 16 * 1024 * 1024, airflow.sent  # socket buffers, not 300 MB


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (b"<html>not json</html>", "something other than JSON"),
        (b"[" * 60_000, "something other than JSON"),  # nested past Python's stack
        (b"[1, 2]", "JSON that is an array"),
        (b'"S3cret-Token"', "JSON that is no object"),
        (b'{"token": "S3cret-Token"}', "without `access_token`"),
        (b'{"access_token": {"a": 1}}', "an `access_token` that is not a string"),
        (b'{"access_token": 12345}', "an `access_token` that is not a string"),
        (b'{"access_token": ""}', "an `access_token` that is empty"),
        (b'{"access_token": "S3cret-Token\\r\\nX-Evil: 1"}', "has a line break (CR or LF) inside"),
        (b'{"access_token": "S3cret-Token "}', "has a blank at its end"),
        (b'{"access_token": "S3cret-T\\u00f6ken"}', "has a non-ASCII character inside"),
        (b'{"access_token": "S3cret-\\u001bToken"}', "has a control character inside"),
    ],
)
def test_an_answer_without_a_usable_token_is_one_line(airflow: TokenServer, body: bytes, says: str) -> None:
    airflow.replies["POST", "/auth/token"] = json_reply(body)
    message = _failure(_client(airflow))
    assert message.startswith(f"Airflow at `http://127.0.0.1:{airflow.port}` answered /auth/token without"), message
    assert says in message and "CONNECT_AIRFLOW_URL" in message, message


def test_a_refusal_names_the_url_without_its_password(airflow: TokenServer) -> None:
    airflow.replies["POST", "/auth/token"] = json_reply({"detail": "bad"}, status=401)
    message = _failure(_client(airflow, userinfo=f"admin:{URL_PASSWORD}@"))
    assert f"Airflow at `http://admin:***@127.0.0.1:{airflow.port}` refused a token for `admin`: HTTP 401" in message
    assert "CONNECT_AIRFLOW_PASSWORD" in message


def test_a_redirect_is_not_followed(airflow: TokenServer) -> None:
    def redirect(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(307)
        handler.send_header("Location", f"http://127.0.0.2:{airflow.port}/auth/token")
        handler.end_headers()

    airflow.replies["POST", "/auth/token"] = redirect
    assert "HTTP 307" in _failure(_client(airflow))
    assert len(airflow.requests) == 1  # the password went nowhere else


def test_an_unreachable_airflow_is_one_line() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # closed once the block ends: nothing listens there
    client = AirflowClient(f"http://admin:{URL_PASSWORD}@127.0.0.1:{port}", "admin", PASSWORD, timeout=DEADLINE)
    message = _failure(client)
    assert message.startswith(f"cannot reach Airflow at `http://admin:***@127.0.0.1:{port}`: "), message


def test_the_api_calls_share_the_bounds(airflow: TokenServer) -> None:
    """pools / trigger / dag read Airflow's API through the same bounded exchange."""
    airflow.replies["POST", "/auth/token"] = json_reply({"access_token": GOOD_TOKEN})
    client = _client(airflow)
    airflow.replies["GET", "/api/v2/pools"] = huge
    assert f"longer than {API_ANSWER_MAX_BYTES // 1024 // 1024} MB" in _failure(client, AirflowClient.pools)

    airflow.replies["GET", "/api/v2/pools"] = json_reply(b"<html>a login page</html>")
    assert "with something other than JSON" in _failure(client, AirflowClient.pools)
    airflow.replies["GET", "/api/v2/pools"] = json_reply({"pools": [{"name": "x"}]})
    assert "without a list of pools" in _failure(client, AirflowClient.pools)
    airflow.replies["POST", "/api/v2/dags/connect__c/dagRuns"] = json_reply([1])
    assert "without a `dag_run_id`" in _failure(client, lambda c: c.trigger("c", wait_s=0))

    airflow.replies["GET", "/api/v2/dags/connect__c"] = drip
    started = time.monotonic()
    assert "did not answer GET /api/v2/dags/connect__c" in _failure(client, lambda c: c.dag("c"))
    assert time.monotonic() - started < DEADLINE + 0.4
