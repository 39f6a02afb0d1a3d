"""Talking to Airflow's REST API v2 (no Airflow import): pause/unpause a connector's DAG, trigger a run.

Configured by CONNECT_AIRFLOW_URL / CONNECT_AIRFLOW_USERNAME / CONNECT_AIRFLOW_PASSWORD,
or by the file `connect airflow up` leaves in `$CONNECT_HOME/airflow/api.json`.

Airflow's answers are read as hostile input: each exchange ends by one deadline (a server that
drips a byte now and then never trips a read timeout), reads at most a bounded number of bytes,
and every way it can fail (unreachable, refused, too slow, too long, not the JSON expected) is one
`RetriableError` that names Airflow by its URL without the URL's password.
"""

from __future__ import annotations

import json
import logging
import re
import socket
import string
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import httpx

from connect_core.runtime.security.urls import mask_url_credentials, token_problem
from connect_core.runtime.settings import Settings
from connect_core.sdk.errors import ConfigError, RetriableError

__all__ = [
    "AIRFLOW_POOL_PREFIX",
    "API_ANSWER_MAX_BYTES",
    "DAG_ID_CHARS",
    "DAG_ID_MAX",
    "DAG_PREFIX",
    "TOKEN_ANSWER_MAX_BYTES",
    "AirflowClient",
    "airflow_pool_for",
    "connector_for_dag",
    "dag_id_for",
]

log = logging.getLogger(__name__)

#: How long a trigger waits for a DAG that is not there yet (a connector created seconds ago).
TRIGGER_WAIT_S = 30.0

DAG_PREFIX = "connect__"
#: Airflow's limit on a dag id's length.
DAG_ID_MAX = 250
#: The characters a connector's name, and so its DAG id, may have (Airflow allows these, and more).
DAG_ID_CHARS = frozenset(string.ascii_letters + string.digits + "._-")
_DAG_ID_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")
#: Every Spark pool has an Airflow pool `connect_<name>` with `capacity` slots.
AIRFLOW_POOL_PREFIX = "connect_"
#: The most of an answer to `/auth/token` that is read: a token is a few hundred bytes.
TOKEN_ANSWER_MAX_BYTES = 64 * 1024
#: The most of an answer of the API that is read: the largest, a page of 1000 pools, is ~300 KB.
API_ANSWER_MAX_BYTES = 4 * 1024 * 1024
#: How long a token is used before a new one is fetched (Airflow's last 24 h by default).
TOKEN_REUSE_S = 600.0


def airflow_pool_for(spark_pool: str) -> str:
    return AIRFLOW_POOL_PREFIX + spark_pool


def dag_id_for(connector: str) -> str:
    """The id of a connector's DAG: `connect__<name>`. Names are checked at create to be made of
    `DAG_ID_CHARS` only; in a name stored before that check, other characters become `_`."""
    return DAG_PREFIX + _DAG_ID_UNSAFE.sub("_", connector)


def connector_for_dag(dag_id: str) -> str | None:
    """The connector name a DAG id stands for when the name maps verbatim, else None."""
    return dag_id.removeprefix(DAG_PREFIX) if dag_id.startswith(DAG_PREFIX) else None


_NOT_AIRFLOW = "check that CONNECT_AIRFLOW_URL is the base URL of Airflow 3's API server"


@dataclass(frozen=True)
class _Answer:
    status: int
    body: bytes
    #: the body went on past the bytes read
    cut: bool

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", "replace")


def _json(answer: _Answer) -> Any:
    """The JSON of an answer's body; ValueError when it is none."""
    try:
        return json.loads(answer.body)
    except (ValueError, RecursionError) as exc:  # RecursionError: `[[[[…` nested past Python's stack
        raise ValueError("something other than JSON") from exc


def _token_in(answer: _Answer) -> str:
    """The `access_token` of an answer to `/auth/token`; a ValueError saying what is wrong (never
    the token itself) when it has none that a header can carry."""
    if answer.cut:
        raise ValueError(f"more than {TOKEN_ANSWER_MAX_BYTES // 1024} KB")
    value = _json(answer)
    if not isinstance(value, dict):
        raise ValueError(f"JSON that is {'an array' if isinstance(value, list) else 'no object'}")
    if "access_token" not in value:
        raise ValueError("a JSON object without `access_token`")
    token = value["access_token"]
    problem = token_problem(token)
    if problem is not None:
        raise ValueError(f"an `access_token` that {problem}")
    assert isinstance(token, str)  # token_problem checked it
    return token


class _Deadline:
    """Ends an exchange that is still going at its deadline. Read timeouts count per read, so a
    server that sends a byte every few seconds never trips one: a timer shuts the connection's
    socket down instead, which wakes the read blocked on it. The socket is learnt from httpcore's
    `trace` extension (its `connect_tcp` / `start_tls` return the network stream)."""

    def __init__(self, seconds: float) -> None:
        self.at = time.monotonic() + seconds
        self._lock = threading.Lock()
        self._socket: socket.socket | None = None
        self._expired = False
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True

    def __enter__(self) -> _Deadline:
        self._timer.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._timer.cancel()

    @property
    def expired(self) -> bool:
        return self._expired or time.monotonic() >= self.at

    def trace(self, _event: str, info: dict[str, Any]) -> None:
        stream: Any = info.get("return_value")
        sock = stream.get_extra_info("socket") if hasattr(stream, "get_extra_info") else None
        if isinstance(sock, socket.socket):
            with self._lock:
                self._socket = sock
                if self._expired:  # connected just after the deadline
                    _shut(sock)

    def _expire(self) -> None:
        with self._lock:
            self._expired = True
            if self._socket is not None:
                _shut(self._socket)


def _shut(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:  # closed already
        pass


@dataclass
class AirflowClient:
    url: str
    username: str
    password: str = field(repr=False)
    #: the longest one exchange with Airflow may take, whole (connect, send, wait, read)
    timeout: float = 10.0
    _token: str | None = field(default=None, repr=False)
    _token_at: float = 0.0

    @classmethod
    def from_settings(cls, settings: Settings) -> AirflowClient | None:
        if settings.airflow_url:
            return cls(
                settings.airflow_url.rstrip("/"),
                settings.airflow_username,
                settings.airflow_password.get_secret_value() if settings.airflow_password else "",
            )
        api_file = settings.home / "airflow" / "api.json"
        if api_file.exists():
            try:
                data = json.loads(api_file.read_text())
                return cls(str(data["url"]), str(data["username"]), str(data["password"]))
            except (OSError, ValueError, KeyError, TypeError) as exc:
                raise ConfigError(
                    f"`{api_file}` does not hold Airflow's url, username and password: run `connect airflow up` "
                    "again, or set CONNECT_AIRFLOW_URL"
                ) from exc
        return None

    @property
    def shown_url(self) -> str:
        """The URL for messages: never its password."""
        return mask_url_credentials(self.url)

    def bearer_token(self) -> str:
        """A token of Airflow's own API for these credentials (also good for the REST API inside Airflow)."""
        return self._headers()["Authorization"].removeprefix("Bearer ")

    def _headers(self) -> dict[str, str]:
        if self._token is None or time.monotonic() - self._token_at > TOKEN_REUSE_S:
            self._token, self._token_at = self._fetch_token(), time.monotonic()
        return {"Authorization": f"Bearer {self._token}"}

    def _fetch_token(self) -> str:
        credentials = {"username": self.username, "password": self.password}
        answer = self._exchange("POST", "/auth/token", TOKEN_ANSWER_MAX_BYTES, json=credentials)
        if answer.status >= 300:
            fix = (
                "check CONNECT_AIRFLOW_USERNAME and CONNECT_AIRFLOW_PASSWORD"
                if answer.status in (401, 403)
                else _NOT_AIRFLOW
            )
            raise RetriableError(
                f"Airflow at `{self.shown_url}` refused a token for `{self.username}`: HTTP {answer.status}; {fix}"
            )
        try:
            return _token_in(answer)
        except ValueError as exc:
            raise RetriableError(
                f"Airflow at `{self.shown_url}` answered /auth/token without a usable token ({exc}); {_NOT_AIRFLOW}"
            ) from exc

    def _exchange(
        self, method: str, path: str, max_bytes: int, *, headers: dict[str, str] | None = None, **kwargs: Any
    ) -> _Answer:
        """Airflow's answer to one request, all of it within `timeout` seconds, at most `max_bytes`
        of its body read (`cut` says there was more)."""
        headers = {"Accept-Encoding": "identity", **(headers or {})}  # a body read as it comes: no zip bomb
        body = bytearray()
        deadline = _Deadline(self.timeout)
        try:
            with (
                deadline,
                httpx.Client(timeout=self.timeout, follow_redirects=False) as client,
                client.stream(
                    method, f"{self.url}{path}", headers=headers, extensions={"trace": deadline.trace}, **kwargs
                ) as resp,
            ):
                for chunk in resp.iter_raw():
                    body += chunk
                    if len(body) > max_bytes or deadline.expired:
                        break
                if deadline.expired:
                    raise RetriableError(self._too_slow(method, path))
                return _Answer(resp.status_code, bytes(body[:max_bytes]), len(body) > max_bytes)
        except httpx.HTTPError as exc:
            if deadline.expired:
                raise RetriableError(self._too_slow(method, path)) from exc
            reason = mask_url_credentials(str(exc) or type(exc).__name__)  # httpx may name the URL
            raise RetriableError(
                f"cannot reach Airflow at `{self.shown_url}`: {reason}; start it, or set CONNECT_AIRFLOW_URL to "
                "its API server"
            ) from exc
        except httpx.InvalidURL as exc:
            raise RetriableError(
                f"Airflow's URL `{self.shown_url}` is not an http(s) URL; set CONNECT_AIRFLOW_URL to its API server"
            ) from exc

    def _too_slow(self, method: str, path: str) -> str:
        return (
            f"Airflow at `{self.shown_url}` did not answer {method} {path} within {self.timeout:g} s; "
            "is it overloaded? Else check that CONNECT_AIRFLOW_URL is the base URL of Airflow 3's API server"
        )

    def _request(self, method: str, path: str, **kwargs: Any) -> Any:
        """The JSON of Airflow's 2xx answer to `/api/v2<path>` (None for an empty one); any other
        answer raises a RetriableError (`Airflow answered <status> to …`)."""
        headers = self._headers()
        answer = self._exchange(method, f"/api/v2{path}", API_ANSWER_MAX_BYTES, headers=headers, **kwargs)
        if answer.status >= 300:
            raise RetriableError(f"Airflow answered {answer.status} to {method} {path}: {answer.text[:300]}")
        if answer.cut:
            raise RetriableError(
                f"Airflow's answer to {method} {path} is longer than {API_ANSWER_MAX_BYTES // 1024 // 1024} MB; "
                f"{_NOT_AIRFLOW}"
            )
        if not answer.body:
            return None
        try:
            return _json(answer)
        except ValueError as exc:
            raise RetriableError(f"Airflow answered {method} {path} with {exc}; {_NOT_AIRFLOW}") from exc

    def pools(self) -> dict[str, int]:
        """Airflow's pools with their slots."""
        body = self._request("GET", "/pools", params={"limit": 1000})
        try:
            return {str(p["name"]): int(p["slots"]) for p in body["pools"]}
        except (KeyError, TypeError, ValueError) as exc:
            raise RetriableError(f"Airflow answered GET /pools without a list of pools; {_NOT_AIRFLOW}") from exc

    def put_pool(self, name: str, slots: int, description: str) -> None:
        """Create the pool or set its slots."""
        if name in self.pools():
            self._request("PATCH", f"/pools/{name}", json={"slots": slots, "description": description})
        else:
            self._request(
                "POST",
                "/pools",
                json={"name": name, "slots": slots, "description": description, "include_deferred": False},
            )

    def delete_pool(self, name: str) -> None:
        self._request("DELETE", f"/pools/{name}")

    def set_paused(self, connector: str, paused: bool) -> None:
        self._request("PATCH", f"/dags/{dag_id_for(connector)}", json={"is_paused": paused})

    def trigger(self, connector: str, conf: dict[str, Any] | None = None, *, wait_s: float = TRIGGER_WAIT_S) -> str:
        """Start a run of the connector's DAG now; returns Airflow's dag_run_id. A connector created a
        moment ago has no DAG until the dag-processor's next parse (seconds): that is waited for, up to
        `wait_s`, then a RetriableError says so."""
        dag_id, deadline, said = dag_id_for(connector), time.monotonic() + wait_s, False
        body = {"logical_date": None, "conf": conf or {}}
        while True:
            try:
                return _run_id(self._request("POST", f"/dags/{dag_id}/dagRuns", json=body))
            except RetriableError as exc:
                if " 404 " not in str(exc):
                    raise
                if time.monotonic() >= deadline:
                    raise RetriableError(
                        f"Airflow has no DAG `{dag_id}` yet (waited {wait_s:.0f} s): its dag-processor adds a "
                        "new connector's DAG at its next parse, within seconds while it runs (`connect airflow up` "
                        "starts one); trigger again then"
                    ) from None
            if not said:
                log.warning(
                    "Airflow has no DAG `%s` yet: waiting up to %.0f s for its dag-processor to add it", dag_id, wait_s
                )
                said = True
            time.sleep(1.0)

    def dag(self, connector: str) -> dict[str, Any] | None:
        try:
            dag = self._request("GET", f"/dags/{dag_id_for(connector)}")
        except RetriableError as exc:
            if " 404 " in str(exc):
                return None
            raise
        if not isinstance(dag, dict):
            raise RetriableError(f"Airflow answered GET /dags/… without a DAG; {_NOT_AIRFLOW}")
        return dag


def _run_id(answer: Any) -> str:
    if not isinstance(answer, dict) or not isinstance(answer.get("dag_run_id"), str):
        raise RetriableError(f"Airflow answered a trigger without a `dag_run_id`; {_NOT_AIRFLOW}")
    return answer["dag_run_id"]
