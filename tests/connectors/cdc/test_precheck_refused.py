"""The CDC sources' pre-check (`has_new_data`, no Spark): a server that refuses the login fails the
task now, as a ConfigError no retry fixes, instead of "cannot tell, running" and a Spark start-up
that fails the same way. A server that is merely unreachable still lets the run go ahead."""

from __future__ import annotations

import logging
import socket
from typing import Any

import pytest

from connect_core.connectors.cdc.mariadb.source import MariaDbCdcSourceConnector
from connect_core.connectors.cdc.postgres.source import PostgresCdcSourceConnector
from connect_core.sdk import ConfigError, Positions, SourcePosition, TaskContext
from connect_core.sdk.records import partition_key


def _task(plugin: Any, config: dict[str, Any]) -> Any:
    return plugin.task_class(config, TaskContext("c", 0, 1, logging.getLogger("test.precheck")))


def _committed(offset: dict[str, Any]) -> Positions:
    partition = {"server": "srv"}
    return Positions({partition_key(partition): SourcePosition(partition, offset)})


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


SECRET = "pw-never-shown-7f3a"
PG = {"connector.class": "PostgresCdcSourceConnector", "database.hostname": "127.0.0.1", "database.dbname": "test"}
PG |= {"topic.prefix": "srv", "table.include.list": r"public\.items"}
MARIA = {"connector.class": "MariaDbCdcSourceConnector", "database.hostname": "127.0.0.1", "topic.prefix": "srv"}


@pytest.mark.parametrize(
    ("plugin", "config", "offset", "cause"),
    [
        (
            PostgresCdcSourceConnector,
            {**PG, "database.port": "5432", "database.user": "nobody_here"},
            {"lsn": 1},
            'role "nobody_here" does not exist',
        ),
        (
            PostgresCdcSourceConnector,
            {**PG, "database.port": "5432", "database.user": "postgres", "database.dbname": "no_such_db"},
            {"lsn": 1},
            'database "no_such_db" does not exist',
        ),
        (
            MariaDbCdcSourceConnector,
            {**MARIA, "database.port": "3306", "database.user": "nobody_here", "database.password": SECRET},
            {"file": "mysql-bin.000001", "pos": 4},
            "refused user `nobody_here`",
        ),
    ],
)
def test_a_refused_login_fails_the_precheck(plugin: Any, config: dict[str, Any], offset: Any, cause: str) -> None:
    task = _task(plugin, config)
    with pytest.raises(ConfigError) as refused:
        task.has_new_data(_committed(offset))
    assert cause in str(refused.value) and SECRET not in str(refused.value) + str(refused.value.errors)


def test_an_unreachable_server_lets_the_run_go_ahead() -> None:
    task = _task(PostgresCdcSourceConnector, {**PG, "database.port": str(_closed_port()), "database.user": "postgres"})
    assert task.has_new_data(_committed({"lsn": 1})) is None  # the run reports it, with its retries
