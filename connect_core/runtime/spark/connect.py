"""Spark Connect pools: a long-running Spark Connect server (`sc://host:port`) that tasks use as
clients, so that a run pays for a gRPC session instead of a JVM and SparkSession start-up.

A pool's master says its kind: `sc://…` is a Spark Connect pool, anything else (`local[n]`,
`spark://…`, `yarn`, `k8s://…`) a classic one (a spark-submit per run). The URL may carry the
server's token (`sc://host:port/;token=…`): it is a secret, so it is masked wherever a pool is
shown, and reaches a runner through its environment, never its arguments.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from connect_core.runtime.security.urls import mask_url_credentials
from connect_core.sdk.errors import ConfigError

__all__ = [
    "DEFAULT_SERVER_MEMORY",
    "REMOTE_ENV",
    "ConnectUrl",
    "is_connect_master",
    "pool_kind",
    "public_master",
    "reachable",
    "token_of",
]

#: The environment variable that makes a process (the runner, a pool's worker) a client of a Spark
#: Connect server: its URL, which may hold the token, so never an argument.
REMOTE_ENV = "CONNECT_SPARK_REMOTE"
CONNECT_SCHEME = "sc://"
DEFAULT_PORT = 15002
#: A warm server's heap with `local[*]` (`connect pools start --memory`, the platform's warm pool):
#: measured in bench/RESULTS.md ("warm Spark pool", "warm pool by default").
DEFAULT_SERVER_MEMORY = "1g"
_TOKEN = re.compile(r"(;\s*token\s*=)[^;]*", re.IGNORECASE)


def is_connect_master(master: str) -> bool:
    return master.strip().lower().startswith(CONNECT_SCHEME)


def pool_kind(master: str) -> str:
    """`spark-connect` (a warm server tasks connect to) or `classic` (a spark-submit per run)."""
    return "spark-connect" if is_connect_master(master) else "classic"


def public_master(master: str) -> str:
    """The master as it may be shown: a Spark Connect URL's token and any URL's password masked
    (`spark://u:***@host:7077`, `k8s://https://u:***@host`)."""
    shown = mask_url_credentials(master)
    return _TOKEN.sub(r"\1****", shown) if is_connect_master(shown) else shown


@dataclass(frozen=True)
class ConnectUrl:
    host: str
    port: int
    params: dict[str, str]

    @classmethod
    def parse(cls, master: str) -> ConnectUrl:
        """`sc://host[:port][/;key=value;…]`, checked: a ConfigError says what is wrong."""
        if not is_connect_master(master):
            raise ConfigError(f"`{public_master(master)}` is not a Spark Connect URL (sc://host:port)")
        rest = master.strip()[len(CONNECT_SCHEME) :]
        where, _, tail = rest.partition("/")
        parts = urlsplit(f"//{where}")
        try:
            port = parts.port or DEFAULT_PORT
        except ValueError:
            raise ConfigError(f"`{public_master(master)}`: the port is not a number from 1 to 65535") from None
        if not parts.hostname:
            raise ConfigError(f"`{public_master(master)}`: no host (sc://host:port)")
        params: dict[str, str] = {}
        for item in filter(None, (p.strip() for p in tail.lstrip(";").split(";"))):
            key, eq, value = item.partition("=")
            if not eq or not key.strip():
                raise ConfigError(f"`{public_master(master)}`: `{key}` is not a key=value parameter")
            params[key.strip().lower()] = value.strip()
        return cls(parts.hostname, port, params)


def token_of(master: str) -> str | None:
    """The token a Spark Connect URL carries, if any (to add to the log maskers)."""
    return ConnectUrl.parse(master).params.get("token") if is_connect_master(master) else None


def reachable(master: str, timeout: float = 2.0) -> str | None:
    """None when the Spark Connect server at `master` accepts a gRPC connection within `timeout`
    seconds, else why not. (A handshake, no session: a wrong token shows at a run's first call.)"""
    import grpc

    url = ConnectUrl.parse(master)
    target = f"[{url.host}]:{url.port}" if ":" in url.host else f"{url.host}:{url.port}"
    if url.params.get("use_ssl", "").lower() == "true":
        channel = grpc.secure_channel(target, grpc.ssl_channel_credentials())
    else:
        channel = grpc.insecure_channel(target)
    try:
        grpc.channel_ready_future(channel).result(timeout=timeout)
    except grpc.FutureTimeoutError:
        return f"no Spark Connect server answered at {url.host}:{url.port} within {timeout:g} s"
    finally:
        channel.close()
    return None
