"""`RestClient` and `LocalManagement` are two implementations of one `Management`: over HTTP and on
the store, the same operation answers the same (mypy checks their signatures in `cli._app.backend`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from connect_core.rest.client import RestClient
from connect_core.runtime.context import Runtime
from connect_core.runtime.management import LocalManagement, Management
from connect_core.sdk.errors import ConfigError, NotFoundError
from tests.rest.conftest import Served


@pytest.fixture
def remote(api: Served) -> Iterator[RestClient]:
    client = RestClient(api.url)
    yield client
    client.close()


def _source(tmp_path: Path, **extra: object) -> dict[str, Any]:
    return {"connector.class": "FileSourceConnector", "file": str(tmp_path / "in.txt"), "topic": "t", **extra}


def test_reads_answer_alike_over_http_and_on_the_store(remote: RestClient, runtime: Runtime, tmp_path: Path) -> None:
    local = LocalManagement(runtime)
    config = _source(tmp_path, **{"connection.password": "hunter2"})
    remote.create("src", config)
    reads: list[Callable[[Management], object]] = [
        lambda m: m.names(),
        lambda m: m.expanded(["status", "info"]),
        lambda m: m.info("src"),
        lambda m: m.config("src"),
        lambda m: m.status("src"),
        lambda m: m.task_status("src", 0),
        lambda m: m.tasks("src"),
        lambda m: m.topics("src"),
        lambda m: m.runs("src", 5),
        lambda m: m.offsets("src"),
        lambda m: m.allocated_connectors(),
        lambda m: m.allocated_tasks(),
        lambda m: m.list_topics(),
        lambda m: m.plugins(),
        lambda m: m.plugin_config("FileSourceConnector"),
        lambda m: m.validate("FileSourceConnector", config),
        lambda m: m.validate(None, config),
        lambda m: m.rebalances(),
    ]
    for read in reads:
        assert read(remote) == read(local)
    assert "hunter2" not in repr(remote.config("src"))
    for room in (remote, local):
        with pytest.raises(NotFoundError):
            room.task_status("src", 7)
        with pytest.raises(NotFoundError):
            room.plugin_config("NoSuchConnector")


def test_changes_over_http_land_in_the_store(remote: RestClient, runtime: Runtime, tmp_path: Path) -> None:
    local = LocalManagement(runtime)
    remote.create("src", _source(tmp_path))

    patched = remote.patch_config("src", {"topic": "t2"})
    assert patched["config"]["topic"] == "t2" == local.config("src")["topic"]
    remote.restart_task("src", 0)
    remote.reset_topics("src")
    assert local.topics("src") == {"src": {"topics": []}}
    with pytest.raises(ConfigError):  # offsets change only while STOPPED, over HTTP as here
        remote.reset_offsets("src")
    remote.set_state("src", "STOPPED")
    assert local.status("src")["connector"]["state"] == "STOPPED"
    assert "reset successfully" in remote.reset_offsets("src")["message"]

    created, pool = remote.put_pool("east", {"master": "local[1]", "capacity": 2})
    assert created and pool["capacity"] == 2 and remote.pool("east")["name"] == "east"
    assert [p["name"] for p in local.pools()] == [p["name"] for p in remote.pools()]
    remote.delete_pool("east")
    with pytest.raises(NotFoundError):
        local.pool("east")

    remote.delete("src")
    assert local.names() == []
