"""`Management` over HTTP: a client of the REST API, so the CLI works against a remote server too."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any
from urllib.parse import quote

import httpx

from connect_core.rest.errors import WARNING_HEADER
from connect_core.runtime.security.masking import mask_text, masker
from connect_core.runtime.security.urls import mask_url_credentials, token_problem
from connect_core.runtime.store.connectors import ConnectorExistsError
from connect_core.runtime.store.states import TargetState
from connect_core.sdk.errors import ConfigError, ConnectError, NotFoundError, RetriableError

__all__ = ["RestClient"]

#: The endpoint that sets each target state (`PUT /connectors/{name}/<verb>`).
_STATE_VERBS: dict[str, str] = {TargetState.PAUSED: "pause", TargetState.RUNNING: "resume", TargetState.STOPPED: "stop"}


def _checked_token(token: str) -> str:
    """`token` without surrounding whitespace, known to the log masker; a ConfigError (that does not
    show it) when a header cannot carry it. Whitespace around it is dropped, not refused: an env file
    with CRLF line ends leaves a CR at its end, and a server drops whitespace around a header's value
    anyway, so no token can end in one."""
    token = token.strip()
    problem = token_problem(token)
    if problem is not None:
        raise ConfigError(f"the REST API's token (--token, CONNECT_REST_TOKEN) {problem}; give the token alone")
    masker.add(token)
    return token


class RestClient:
    """The management room (`connect_core.runtime.management.Management`) of the server at `url`."""

    def __init__(self, url: str, token: str | None = None, timeout: float = 30.0) -> None:
        self._shown = mask_url_credentials(url)  # the URL in messages: never its password
        try:
            parsed = httpx.URL(url)
        except (httpx.InvalidURL, TypeError, ValueError) as exc:
            raise ConfigError(f"--url `{self._shown}` is not a URL; give the REST API's base URL") from exc
        if parsed.scheme not in ("http", "https") or not parsed.host or parsed.query or parsed.fragment:
            # a query or fragment would end up in the middle of every request's path
            raise ConfigError(
                f"--url `{self._shown}` is not an http(s) base URL; give it as http://host:port "
                "(no `?query` or `#fragment`; the token goes in --token)"
            )
        headers = {"Authorization": f"Bearer {_checked_token(token)}"} if token else {}
        self._http = httpx.Client(base_url=url.rstrip("/"), headers=headers, timeout=timeout)

    def close(self) -> None:
        self._http.close()

    def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        resp = self._send(method, path, **kwargs)
        if not resp.content:
            return None
        try:
            return resp.json()
        except ValueError as exc:
            raise ConnectError(
                f"`{self._shown}` answered {method} {path} with something other than JSON; "
                "is --url the Connect REST API?"
            ) from exc

    def _send(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """The response of a 2xx; any other status raises the SDK error it stands for."""
        try:
            resp = self._http.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            reason = mask_text(str(exc))  # httpx may name the URL (its password), or a header (the token)
            raise RetriableError(f"cannot reach the Connect REST API at `{self._shown}`: {reason}") from exc
        if resp.status_code >= 400:
            try:
                message = resp.json().get("message") or resp.text
            except ValueError:
                message = resp.text
            kind = {404: NotFoundError, 409: ConnectorExistsError, 400: ConfigError, 503: RetriableError}.get(
                resp.status_code, ConnectError
            )
            raise kind(f"{message} (HTTP {resp.status_code})")
        return resp

    def _rocketmq(self, path: str, pool: str | None = None) -> Any:
        return self._call("GET", path, params={"pool": pool} if pool else None)["body"]

    # -- Management ------------------------------------------------------------------------
    def names(self) -> list[str]:
        return list(self._call("GET", "/connectors"))

    def expanded(self, expand: Collection[str]) -> dict[str, Any]:
        return dict(self._call("GET", "/connectors", params=[("expand", e) for e in expand]))

    def info(self, name: str) -> dict[str, Any]:
        return dict(self._call("GET", f"/connectors/{name}"))

    def config(self, name: str) -> dict[str, Any]:
        return dict(self._call("GET", f"/connectors/{name}/config"))

    def status(self, name: str) -> dict[str, Any]:
        return dict(self._call("GET", f"/connectors/{name}/status"))

    def task_status(self, name: str, task: int) -> dict[str, Any]:
        return dict(self._call("GET", f"/connectors/{name}/tasks/{task}/status"))

    def tasks(self, name: str) -> list[dict[str, Any]]:
        return list(self._call("GET", f"/connectors/{name}/tasks"))

    def topics(self, name: str) -> dict[str, Any]:
        return dict(self._call("GET", f"/connectors/{name}/topics"))

    def reset_topics(self, name: str) -> None:
        self._call("PUT", f"/connectors/{name}/topics/reset")

    def runs(self, name: str, limit: int = 10) -> list[dict[str, Any]]:
        return list(self._call("GET", f"/connectors/{name}/runs", params={"limit": limit}))

    def create(self, name: str, config: Mapping[str, Any], initial_state: str = TargetState.RUNNING) -> dict[str, Any]:
        body = {"name": name, "config": dict(config), "initial_state": initial_state}
        return dict(self._call("POST", "/connectors", json=body))

    def put_config(self, name: str, config: Mapping[str, Any]) -> tuple[bool, dict[str, Any]]:
        resp = self._send("PUT", f"/connectors/{name}/config", json=dict(config))
        return resp.status_code == 201, dict(resp.json())

    def apply(
        self, name: str, config: Mapping[str, Any], *, dry_run: bool = False, initial_state: str = TargetState.RUNNING
    ) -> dict[str, Any]:
        if "/" in name or name in (".", ".."):  # it would name another path (or none) in the URL
            raise ConfigError(f"connector name {name[:60]!r} cannot be sent in a URL path; rename the connector")
        params = {"dryRun": str(dry_run).lower(), "initialState": initial_state}
        path = f"/connectors/{quote(name, safe='')}/apply"  # a name from a file: one path segment, whatever it holds
        return dict(self._call("PUT", path, params=params, json=dict(config)))

    def patch_config(self, name: str, patch: Mapping[str, Any]) -> dict[str, Any]:
        return dict(self._call("PATCH", f"/connectors/{name}/config", json=dict(patch)))

    def delete(self, name: str) -> None:
        self._call("DELETE", f"/connectors/{name}")

    def set_state(self, name: str, state: str) -> str | None:
        verb = _STATE_VERBS[state]
        return self._send("PUT", f"/connectors/{name}/{verb}").headers.get(WARNING_HEADER) or None

    def restart(self, name: str, *, include_tasks: bool = False, only_failed: bool = False) -> dict[str, Any]:
        params = {"includeTasks": str(include_tasks).lower(), "onlyFailed": str(only_failed).lower()}
        self._call("POST", f"/connectors/{name}/restart", params=params)
        return self.status(name)

    def restart_task(self, name: str, task: int) -> None:
        self._call("POST", f"/connectors/{name}/tasks/{task}/restart")

    def send_signal(
        self, name: str, signal_id: str | None, signal_type: str, data: Mapping[str, Any]
    ) -> dict[str, Any]:
        body = {"type": signal_type, "data": dict(data), **({"id": signal_id} if signal_id is not None else {})}
        return dict(self._call("POST", f"/connectors/{name}/signals", json=body))

    def resync(self, name: str, table: str, mode: str = "retain") -> dict[str, Any]:
        return dict(self._call("POST", f"/connectors/{name}/resync", json={"table": table, "mode": mode}))

    def schemas(self, name: str) -> dict[str, Any]:
        return dict(self._call("GET", f"/connectors/{name}/schemas"))

    def accept_schema(self, name: str, topics: Sequence[str] | None = None) -> dict[str, Any]:
        body = {"topics": list(topics)} if topics is not None else {}
        response = self._send("POST", f"/connectors/{name}/schemas/accept", json=body)
        return {**response.json(), "warning": response.headers.get(WARNING_HEADER) or None}

    def offsets(self, name: str) -> dict[str, Any]:
        return dict(self._call("GET", f"/connectors/{name}/offsets"))

    def alter_offsets(self, name: str, offsets: Sequence[Mapping[str, Any]]) -> dict[str, str]:
        return dict(self._call("PATCH", f"/connectors/{name}/offsets", json={"offsets": list(offsets)}))

    def list_topics(self) -> list[dict[str, Any]]:
        return list(self._call("GET", "/topics"))

    def describe_topic(self, name: str) -> dict[str, Any]:
        return dict(self._call("GET", f"/topics/{name}"))

    def topic_schema(self, name: str, version: int | None = None) -> dict[str, Any]:
        from connect_core.rest.subjects import from_registry_body, subject_of

        subject = quote(subject_of(name), safe="")
        at = "latest" if version is None else str(version)
        return from_registry_body(dict(self._call("GET", f"/subjects/{subject}/versions/{quote(at, safe='')}")))

    def set_topic_config(self, name: str, config: Mapping[str, Any]) -> dict[str, Any]:
        return dict(self._call("PUT", f"/topics/{name}/config", json=dict(config)))

    def apply_topic_retention(self, dry_run: bool = False) -> dict[str, Any]:
        return dict(self._call("POST", "/topics/retention", params={"dryRun": str(dry_run).lower()}))

    def delete_topic(self, name: str, force: bool = False) -> dict[str, Any]:
        return dict(self._call("DELETE", f"/topics/{name}", params={"force": str(force).lower()}))

    def reset_offsets(self, name: str, to_time: str | None = None) -> dict[str, str]:
        params = {"toTime": to_time} if to_time else None
        return dict(self._call("DELETE", f"/connectors/{name}/offsets", params=params))

    def trigger(self, name: str) -> dict[str, Any]:
        return dict(self._call("POST", f"/connectors/{name}/trigger"))

    def plugins(self) -> list[dict[str, Any]]:
        return list(self._rocketmq("/plugin/list"))

    def plugin_config(self, plugin: str) -> list[dict[str, Any]]:
        return list(self._call("GET", f"/connector-plugins/{plugin}/config"))

    def validate(self, plugin: str | None, config: Mapping[str, Any]) -> dict[str, Any]:
        if plugin is None:  # Kafka's route names the plugin; RocketMQ's takes it from `connector.class`
            return dict(self._call("POST", "/plugin/config/validate", json=dict(config))["body"])
        return dict(self._call("PUT", f"/connector-plugins/{plugin}/config/validate", json=dict(config)))

    def reload_plugins(self) -> list[str]:
        return list(self._rocketmq("/plugin/reload"))

    def cluster_info(self) -> list[dict[str, Any]]:
        return list(self._rocketmq("/getClusterInfo"))

    def allocated_connectors(self, pool: str | None = None) -> dict[str, Any]:
        return dict(self._rocketmq("/allocated/connectors", pool))

    def allocated_tasks(self, pool: str | None = None) -> dict[str, Any]:
        return dict(self._rocketmq("/allocated/tasks", pool))

    def pools(self) -> list[dict[str, Any]]:
        return list(self._call("GET", "/pools"))

    def pool(self, name: str) -> dict[str, Any]:
        return dict(self._call("GET", f"/pools/{name}"))

    def put_pool(self, name: str, spec: Mapping[str, Any]) -> tuple[bool, dict[str, Any]]:
        resp = self._send("PUT", f"/pools/{name}", json={k: v for k, v in spec.items() if v is not None})
        return resp.status_code == 201, dict(resp.json())

    def delete_pool(self, name: str) -> None:
        self._call("DELETE", f"/pools/{name}")

    def pool_heartbeat(self, name: str) -> None:
        self._call("POST", f"/pools/{name}/heartbeat")

    def rebalance(self, strategy: str | None = None) -> dict[str, Any]:
        return dict(self._call("POST", "/rebalance", json={"strategy": strategy}))

    def rebalances(self, limit: int = 20) -> list[dict[str, Any]]:
        return list(self._call("GET", "/rebalances", params={"limit": limit}))
