"""Spark Connect pools: their URLs (the token never shown), their probes, and a real server that
`connect pools start` runs: warm, answering, and a dead pool once stopped."""

from __future__ import annotations

import socket
from pathlib import Path

import httpx
import pytest

from connect_core.runtime.cluster.liveness import probe
from connect_core.runtime.cluster.pools import PoolInfo
from connect_core.runtime.context import Runtime
from connect_core.runtime.execution.submit import connect_client_command
from connect_core.runtime.execution.warm_pool import start_server, stop_server
from connect_core.runtime.settings import Settings
from connect_core.runtime.spark.connect import REMOTE_ENV, ConnectUrl, pool_kind, public_master, reachable
from connect_core.sdk.errors import ConfigError


def test_a_connect_url_is_parsed_and_its_token_never_shown() -> None:
    url = ConnectUrl.parse("sc://spark.example.com:15002/;token=s3cr3t;use_ssl=true")
    assert (url.host, url.port, url.params) == ("spark.example.com", 15002, {"token": "s3cr3t", "use_ssl": "true"})
    assert ConnectUrl.parse("sc://h").port == 15002
    assert public_master("sc://h:1/;token=s3cr3t;use_ssl=true") == "sc://h:1/;token=****;use_ssl=true"
    assert public_master("spark://h:7077") == "spark://h:7077"
    assert (pool_kind("sc://h:1"), pool_kind("local[2]"), pool_kind("yarn")) == ("spark-connect", "classic", "classic")
    for bad, says in (("sc://:15002", "no host"), ("sc://h:99999", "port"), ("sc://h/;token", "key=value")):
        with pytest.raises(ConfigError, match=says):
            ConnectUrl.parse(bad)


def test_a_pool_of_a_connect_server_shows_its_kind_and_hides_its_token(runtime: Runtime) -> None:
    runtime.pools.add("warm", "sc://10.0.0.5:15002/;token=s3cr3t", capacity=4)
    shown = next(p for p in runtime.pools.list(60.0) if p.name == "warm").to_dict()
    assert (shown["kind"], shown["master"]) == ("spark-connect", "sc://10.0.0.5:15002/;token=****")
    assert "s3cr3t" not in repr(shown)
    with pytest.raises(ConfigError, match="port"):
        runtime.pools.add("bad", "sc://h:notaport")


def test_the_runner_of_a_connect_pool_is_a_plain_client_with_the_url_in_its_environment() -> None:
    cmd, env = connect_client_command("src", 0, "sc://h:1/;token=s3cr3t", {"PATH": "/bin"}, pool="warm")
    assert "spark-submit" not in " ".join(cmd) and cmd[-6:] == ["--connector", "src", "--task", "0", "--pool", "warm"]
    assert "s3cr3t" not in " ".join(cmd)
    assert env[REMOTE_ENV] == "sc://h:1/;token=s3cr3t"


def test_a_connect_pool_that_does_not_answer_is_dead() -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    master = f"sc://127.0.0.1:{port}/;token=s3cr3t"
    assert "no Spark Connect server answered" in str(reachable(master, timeout=0.5))
    with httpx.Client(timeout=0.5) as client:
        result = probe(PoolInfo("warm", master, {}, 1, {}, True, 0.0), client)
    assert result is not None and not result.ok
    assert "s3cr3t" not in repr(result.detail)


def test_a_pool_name_that_is_a_path_never_names_a_file(tmp_path: Path, pg_server: str) -> None:
    """`connect pools start/stop NAME` keep the server's files under CONNECT_HOME/pools/NAME.*."""
    settings = Settings(database_url=pg_server, home=tmp_path / "home")
    for hostile in ("../../etc/x", "..", "a/b", ""):
        with pytest.raises(ConfigError, match="invalid pool name"):
            start_server(settings, hostile)
        with pytest.raises(ConfigError, match="invalid pool name"):
            stop_server(settings, hostile)
    assert not (tmp_path / "etc").exists()
    assert stop_server(settings, "never.started") is False
