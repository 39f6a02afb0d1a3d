"""Talking to Airflow's REST API v2 (no Airflow import): pause/unpause a connector's DAG, trigger a run.

Configured by CONNECT_AIRFLOW_URL / CONNECT_AIRFLOW_USERNAME / CONNECT_AIRFLOW_PASSWORD,
or by the file `connect airflow up` leaves in `$CONNECT_HOME/airflow/api.json`.
"""

from __future__ import annotations

import json
import logging
import re
import string
import time
from dataclasses import dataclass
from typing import Any

import httpx

from connect_core.runtime.settings import Settings
from connect_core.sdk.errors import RetriableError

__all__ = [
    "AIRFLOW_POOL_PREFIX",
    "DAG_ID_CHARS",
    "DAG_ID_MAX",
    "DAG_PREFIX",
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


def airflow_pool_for(spark_pool: str) -> str:
    return AIRFLOW_POOL_PREFIX + spark_pool


def dag_id_for(connector: str) -> str:
    """The id of a connector's DAG: `connect__<name>`. Names are checked at create to be made of
    `DAG_ID_CHARS` only; in a name stored before that check, other characters become `_`."""
    return DAG_PREFIX + _DAG_ID_UNSAFE.sub("_", connector)


def connector_for_dag(dag_id: str) -> str | None:
    """The connector name a DAG id stands for when the name maps verbatim, else None."""
    return dag_id.removeprefix(DAG_PREFIX) if dag_id.startswith(DAG_PREFIX) else None


@dataclass
class AirflowClient:
    url: str
    username: str
    password: str
    timeout: float = 10.0
    _token: str | None = None
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
            data = json.loads(api_file.read_text())
            return cls(data["url"], data["username"], data["password"])
        return None

    def bearer_token(self) -> str:
        """A token of Airflow's own API for these credentials (also good for the REST API inside Airflow)."""
        return self._headers()["Authorization"].removeprefix("Bearer ")

    def _headers(self) -> dict[str, str]:
        if self._token is None or time.monotonic() - self._token_at > 600:
            resp = httpx.post(
                f"{self.url}/auth/token",
                json={"username": self.username, "password": self.password},
                timeout=self.timeout,
            )
            if resp.status_code >= 300:
                raise RetriableError(
                    f"Airflow at `{self.url}` refused a token for `{self.username}`: {resp.status_code}"
                )
            self._token, self._token_at = resp.json()["access_token"], time.monotonic()
        return {"Authorization": f"Bearer {self._token}"}

    def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            resp = httpx.request(
                method, f"{self.url}/api/v2{path}", headers=self._headers(), timeout=self.timeout, **kwargs
            )
        except httpx.HTTPError as exc:
            raise RetriableError(f"cannot reach Airflow at `{self.url}`: {exc}") from exc
        if resp.status_code >= 300:
            raise RetriableError(f"Airflow answered {resp.status_code} to {method} {path}: {resp.text[:300]}")
        return resp

    def pools(self) -> dict[str, int]:
        """Airflow's pools with their slots."""
        body = self._request("GET", "/pools", params={"limit": 1000}).json()
        return {p["name"]: int(p["slots"]) for p in body["pools"]}

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
                return str(self._request("POST", f"/dags/{dag_id}/dagRuns", json=body).json()["dag_run_id"])
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
            return dict(self._request("GET", f"/dags/{dag_id_for(connector)}").json())
        except RetriableError as exc:
            if " 404 " in str(exc):
                return None
            raise
