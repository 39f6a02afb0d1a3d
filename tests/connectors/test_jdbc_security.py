"""A hostile MariaDB/MySQL server cannot read this host's files: the sink's `LOAD DATA LOCAL INFILE`
sends its staging data to a request for exactly the name it gave and nothing to any other
request, on that connection or any other; the run fails naming the request, nothing committed."""

from __future__ import annotations

import re
from pathlib import Path

import pymysql
import pytest

from connect_core.connectors.jdbc._mysql import LocalFileRefused, guarded_connect
from connect_core.runtime.context import Runtime
from connect_core.runtime.execution.runner import TaskRunner
from tests.connectors.fake_mysql import fake_mysql
from tests.connectors.jdbc_helpers import Database, create_upsert_sink, postgres, synced  # noqa: F401  (fixtures)

CANARY = "canary-3f9c1e-not-for-the-server"


@pytest.fixture
def canary(tmp_path: Path) -> bytes:
    path = tmp_path / "secret.txt"
    path.write_text(CANARY)
    return str(path).encode()


@pytest.mark.parametrize("asked", ["canary", "environ"])
def test_the_sink_sends_no_file_a_server_asks_for_in_answer_to_its_load(
    runtime: Runtime,
    runner: TaskRunner,
    postgres: Database,  # noqa: F811
    canary: bytes,
    asked: str,
) -> None:
    postgres.execute("CREATE TABLE t (id int PRIMARY KEY, v text)", "INSERT INTO t VALUES (1, 'a'), (2, 'b')")
    runtime.create_connector("src", postgres.source_config(mode="bulk", **{"table.whitelist": "t", "topic.prefix": ""}))
    synced(runner, "src")
    name = canary if asked == "canary" else b"/proc/self/environ"
    with fake_mysql(lambda sql: name if "LOAD DATA" in sql.upper() else None) as server:
        target = Database("mariadb", "x", f"jdbc:mariadb://127.0.0.1:{server.port}/x?user=root", {})
        create_upsert_sink(runtime, target, "t")
        failed = runner.run("sink", 0)
    assert server.requests >= 1  # it did ask
    assert bytes(server.received) == b""  # and got nothing: no canary, no environment, no staging rows
    assert (failed.state, failed.error_kind) == ("FAILED", "fatal"), failed.message
    assert "asked for the local file" in failed.message and repr(name) in failed.message
    assert runtime.connectors.sink_offsets("sink") == {}


@pytest.mark.parametrize("local_data", [False, True], ids=["plain", "loading"])
@pytest.mark.parametrize("statement", ["SET @a = 1", "SELECT 1", "COMMIT-via-query"])
def test_a_request_in_answer_to_any_other_statement_gets_nothing(
    canary: bytes, local_data: bool, statement: str
) -> None:
    """A connection that may load data, or not, answers a request to a SET or SELECT with an
    empty file and an error naming the request."""
    sql = "COMMIT" if statement == "COMMIT-via-query" else statement
    with fake_mysql(lambda s: canary if s == sql else None) as server:
        conn = guarded_connect(host="127.0.0.1", port=server.port, user="root", local_data=local_data)
        with conn.cursor() as cur, pytest.raises(LocalFileRefused, match="no statement named"):
            cur.execute(sql)
        conn.close()
    assert server.requests == 1 and bytes(server.received) == b""


def test_a_request_for_another_name_during_a_load_gets_nothing(canary: bytes) -> None:
    with fake_mysql(lambda s: canary if "LOAD DATA" in s else None) as server:
        conn = guarded_connect(host="127.0.0.1", port=server.port, user="root", local_data=True)
        with conn.cursor() as cur, pytest.raises(LocalFileRefused, match="LOAD DATA statement did not name"):
            conn.load_data(cur, "LOAD DATA LOCAL INFILE %s INTO TABLE t", b"1\ta\n")
        conn.close()
    assert bytes(server.received) == b""


def test_a_load_sends_its_data_to_a_request_for_its_own_name_only_once() -> None:
    """The name the statement gave gets the bytes given, from memory; asked again, nothing."""
    named: list[bytes] = []

    def asks(sql: str) -> bytes | None:
        if found := re.search(r"INFILE '([^']*)'", sql):
            named.append(found.group(1).encode())
        return named[-1] if named and ("LOAD DATA" in sql or sql == "SET @again = 1") else None

    with fake_mysql(asks) as server:
        conn = guarded_connect(host="127.0.0.1", port=server.port, user="root", local_data=True)
        with conn.cursor() as cur:
            conn.load_data(cur, "LOAD DATA LOCAL INFILE %s INTO TABLE t", b"1\ta\n")
            assert bytes(server.received) == b"1\ta\n"
            with pytest.raises(LocalFileRefused):
                cur.execute("SET @again = 1")  # the same name, asked once more
        conn.close()
    assert bytes(server.received) == b"1\ta\n"


def test_plain_pymysql_would_have_sent_the_file(canary: bytes) -> None:
    """The hole this guards against: PyMySQL with `local_infile` sends what the server names."""
    with fake_mysql(lambda s: canary if s == "SELECT 1" else None) as server:
        conn = pymysql.connect(host="127.0.0.1", port=server.port, user="root", local_infile=True)
        with conn.cursor() as cur:
            cur.execute("SELECT 1")
        conn.close()
    assert CANARY.encode() in bytes(server.received)
