"""The CDC sources against hostile or careless configs, through the REST app over HTTP: a slot (or
publication, or replica id) is one connector's; tables whose names map to one topic are refused;
a server that never answers costs a create its deadline, not a hung request."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from connect_core.connectors.cdc._deadline import ProbeTimeout, within
from connect_core.connectors.cdc.config import owned_name, server_identity
from connect_core.rest.app import create_app
from connect_core.rest.auth import bearer_or_loopback
from connect_core.runtime.context import Runtime
from connect_core.sdk.records import TopicPartition
from connect_core.testing.servers import MariaDbServer, PgServer, unique_name
from tests.conftest import make_runner
from tests.rest.conftest import Served, serve

PG = "io.debezium.connector.postgresql.PostgresConnector"
MARIA = "io.debezium.connector.mariadb.MariaDbConnector"


@pytest.fixture
def api(runtime: Runtime) -> Iterator[Served]:
    yield from serve(create_app(lambda: runtime, auth=[bearer_or_loopback(None)]))


def _create(api: Served, name: str, config: dict[str, Any]) -> httpx.Response:
    return httpx.post(f"{api.url}/connectors", json={"name": name, "config": config}, timeout=60)


def _pg(db: PgServer, **extra: str) -> dict[str, str]:
    return {
        "connector.class": PG,
        "database.hostname": db.host,
        "database.port": str(db.port),
        "database.user": db.user,
        "database.dbname": db.database,
        "topic.prefix": "srv",
        "table.include.list": r"public\.items",
        "heartbeat.interval.ms": "0",
        **extra,
    }


def _maria(db: MariaDbServer, **extra: str) -> dict[str, str]:
    return {
        "connector.class": MARIA,
        "database.hostname": db.host,
        "database.port": str(db.port),
        "database.user": db.user,
        "database.password": db.password,
        "database.include.list": db.database,
        "topic.prefix": "maria",
        **extra,
    }


def _count(runtime: Runtime, topic: str) -> int:
    segments = runtime.topics.segments_after({TopicPartition(topic, 0): 0})
    return sum(s.row_count for s in segments)


# --- 5: a slot is one connector's ----------------------------------------------------------------


def test_a_slot_or_publication_of_another_connector_is_refused(pg_db: PgServer, api: Served) -> None:
    pg_db.execute("CREATE TABLE items (id int PRIMARY KEY)")
    assert _create(api, "first", _pg(pg_db)).status_code == 201
    # the default slot and publication are named after the connector: a second default is no clash
    assert _create(api, "second", _pg(pg_db, **{"topic.prefix": "two"})).status_code == 201

    # the first's slot, named outright, with the server spelt another way: refused, naming the owner
    stolen = _pg(pg_db, **{"database.hostname": "localhost", "slot.name": owned_name("first")})
    refused = _create(api, "third", stolen)
    assert refused.status_code == 400 and "`first`" in refused.json()["message"], refused.text
    # this machine by its own name is the same server too
    by_name = _create(api, "third", {**stolen, "database.hostname": socket.gethostname()})
    assert by_name.status_code == 400 and "`first`" in by_name.json()["message"], by_name.text
    # spellings a driver reads as the same server, or as several, are no host at all
    for host in ("127.1", "2130706433", "0x7f000001", "0177.0.0.1", "/var/run/postgresql", "127.0.0.1,127.0.0.1"):
        odd = _create(api, "third", {**stolen, "database.hostname": host})
        assert odd.status_code == 400 and "one host name or IP address" in odd.json()["message"], (host, odd.text)
    # a slot is the server's, whatever the database: another database of it cannot have it either
    other_db = {**stolen, "database.dbname": "postgres", "publication.autocreate.mode": "disabled"}
    assert "`first`" in _create(api, "third", other_db).json()["message"]
    # the publication the first creates (a database's)
    pub = _pg(pg_db, **{"slot.name": unique_name("s"), "publication.name": owned_name("first")})
    assert "`first`" in _create(api, "third", pub).json()["message"]

    # distinct explicit slots are fine; then PUT cannot take another's, nor can PATCH
    own = _pg(pg_db, **{"slot.name": unique_name("slot"), "publication.name": unique_name("pub")})
    assert _create(api, "third", own).status_code == 201
    put = httpx.put(f"{api.url}/connectors/third/config", json={**own, "slot.name": owned_name("second")})
    assert put.status_code == 400 and "`second`" in put.json()["message"], put.text
    patch = httpx.patch(f"{api.url}/connectors/third/config", json={"slot.name": owned_name("first")})
    assert patch.status_code == 400 and "`first`" in patch.json()["message"], patch.text
    # updating a connector with its own slot is fine
    again = httpx.put(f"{api.url}/connectors/first/config", json={**_pg(pg_db), "schedule": "1h"})
    assert again.status_code == 200, again.text

    # upper case would name the same slot (the replication protocol folds it): not a slot name at all
    upper = _create(api, "fourth", _pg(pg_db, **{"slot.name": owned_name("first").upper()}))
    assert upper.status_code == 400 and "lower-case" in upper.json()["message"]

    # a connector deleted gives its slot up: one made again may take it
    assert httpx.delete(f"{api.url}/connectors/first").status_code == 204
    assert _create(api, "renamed", _pg(pg_db, **{"slot.name": owned_name("first")})).status_code == 201


def test_two_default_connectors_each_get_every_change_and_no_slot_of_another_is_dropped(
    pg_db: PgServer, runtime: Runtime, spark: Any
) -> None:
    pg_db.execute("CREATE TABLE items (id int PRIMARY KEY)", "INSERT INTO items VALUES (1)")
    runtime.create_connector("a", _pg(pg_db, **{"topic.prefix": "a"}))
    runtime.create_connector("b", _pg(pg_db, **{"topic.prefix": "b"}))
    runner = make_runner(runtime, spark)
    for name in ("a", "b"):
        assert runner.run(name, 0).state == "SUCCEEDED"
    pg_db.execute("INSERT INTO items VALUES (2)", "INSERT INTO items VALUES (3)")
    for name in ("a", "b"):
        assert runner.run(name, 0).state == "SUCCEEDED"
        assert _count(runtime, f"{name}.public.items") == 3  # the snapshot's row and both changes, each

    # a slot named after the connector, left by a first run that died before its commit: its own,
    # so dropped and made again; deleting the connector drops it when asked
    pg_db.execute(f"SELECT pg_create_logical_replication_slot('{owned_name('d')}', 'pgoutput')")
    runtime.create_connector("d", _pg(pg_db, **{"topic.prefix": "d", "slot.drop.on.stop": "true"}))
    assert runner.run("d", 0).state == "SUCCEEDED"
    assert _count(runtime, "d.public.items") == 3
    runtime.delete_connector("d")
    assert pg_db.rows("SELECT count(*) FROM pg_replication_slots WHERE slot_name = %s", owned_name("d")) == [(0,)]

    # a slot that exists, that no committed position of this connector refers to, named outright:
    # perhaps another's (another runtime's, a hand-made one). The run fails; the slot stays.
    theirs = unique_name("theirs")
    pg_db.execute(f"SELECT pg_create_logical_replication_slot('{theirs}', 'pgoutput')")
    runtime.create_connector("c", _pg(pg_db, **{"topic.prefix": "c", "slot.name": theirs}))
    failed = runner.run("c", 0)
    assert failed.state == "FAILED" and theirs in failed.message and "neither used nor dropped" in failed.message
    assert pg_db.rows("SELECT count(*) FROM pg_replication_slots WHERE slot_name = %s", theirs) == [(1,)]
    assert not runtime.topics.partitions("c.public.items")

    # a position of one slot never goes on in another (slot.name changed under a committed position)
    elsewhere = unique_name("elsewhere")
    pg_db.execute(f"SELECT pg_create_logical_replication_slot('{elsewhere}', 'pgoutput')")
    runtime.update_connector("a", _pg(pg_db, **{"topic.prefix": "a", "slot.name": elsewhere}))
    moved = runner.run("a", 0)
    assert moved.state == "FAILED" and f"not of `{elsewhere}`" in moved.message
    assert _count(runtime, "a.public.items") == 3


# --- 6: two tables, one topic ---------------------------------------------------------------------


def test_tables_that_map_to_one_topic_are_refused(
    pg_db: PgServer, mariadb_db: MariaDbServer, api: Served, runtime: Runtime, spark: Any
) -> None:
    pg_db.execute('CREATE TABLE "a b" (id int PRIMARY KEY)', "CREATE TABLE a_b (id int PRIMARY KEY)")
    refused = _create(api, "pg", _pg(pg_db, **{"table.include.list": r"public\.a.b"}))
    message = refused.json()["message"]
    assert refused.status_code == 400 and "'a b'" in message and "'a_b'" in message and "srv.public.a_b" in message

    mariadb_db.execute(
        f"USE `{mariadb_db.database}`",
        "CREATE TABLE `a b` (id int PRIMARY KEY)",
        "CREATE TABLE a_b (id int PRIMARY KEY)",
    )
    refused = _create(api, "maria", _maria(mariadb_db))
    assert refused.status_code == 400 and "'a b'" in refused.json()["message"], refused.text

    # a table made after the create (a pattern): the run fails before it writes anything
    pg_db.execute('DROP TABLE "a b"', "INSERT INTO a_b VALUES (1), (2)")
    assert _create(api, "pg", _pg(pg_db, **{"table.include.list": r"public\.a.b"})).status_code == 201
    pg_db.execute('CREATE TABLE "a b" (id int PRIMARY KEY)', 'INSERT INTO "a b" VALUES (1)')
    failed = make_runner(runtime, spark).run("pg", 0)
    assert failed.state == "FAILED" and "'a b'" in failed.message and "'a_b'" in failed.message
    assert not runtime.topics.partitions("srv.public.a_b")


# --- 8: a server that never answers ---------------------------------------------------------------


@pytest.fixture
def silent() -> Iterator[tuple[str, int]]:
    """A TCP server on loopback that accepts connections and never sends a byte."""
    server = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield server.getsockname()
    stop.set()
    thread.join(5)
    for conn in held:
        conn.close()
    server.close()


@pytest.mark.parametrize(
    "config",
    [
        {"connector.class": MARIA, "topic.prefix": "m", "database.user": "u"},
        {"connector.class": PG, "topic.prefix": "p", "database.user": "u", "database.dbname": "d"},
    ],
    ids=["mariadb", "postgres"],
)
def test_a_server_that_never_answers_is_a_400_within_the_deadline(
    api: Served, silent: tuple[str, int], config: dict[str, str]
) -> None:
    host, port = silent
    started = time.monotonic()
    body = {**config, "database.hostname": host, "database.port": str(port), "probe.timeout.ms": "3000"}
    refused = _create(api, "silent", body)
    elapsed = time.monotonic() - started
    assert refused.status_code == 400 and f"{host}:{port} did not answer" in refused.json()["message"], refused.text
    assert elapsed < 6, elapsed


def test_the_deadline_cuts_a_check_stalled_after_it_connected(silent: tuple[str, int]) -> None:
    """A server that answered (here: accepted) and then stalls a read: the caller goes on at the
    deadline, and the check's thread ends too (its socket is shut down), not at the driver's leisure."""
    ended = threading.Event()

    def check(cut: Any) -> bytes:
        try:
            with socket.create_connection(silent) as sock:
                cut.add(sock.fileno())
                return sock.recv(1)  # blocks: the server never sends
        finally:
            ended.set()

    started = time.monotonic()
    with pytest.raises(ProbeTimeout):
        within(0.5, check)
    assert time.monotonic() - started < 2
    assert ended.wait(2)


def test_the_same_server_spelt_two_ways_is_one() -> None:
    same: list[Callable[[], str]] = [
        lambda: server_identity("localhost", 5432),
        lambda: server_identity("127.0.0.1", 5432),
        lambda: server_identity("LOCALHOST.", 5432),
        lambda: server_identity("[::1]", 5432),
        lambda: server_identity("::ffff:127.0.0.1", 5432),
        lambda: server_identity("127.0.0.2", 5432),
    ]
    assert len({f() for f in same}) == 1
    assert server_identity("10.0.0.1", 5432) != server_identity("10.0.0.1", 5433)
    assert server_identity("DB.example.com", 1) == server_identity("db.example.com.", 1)
    assert owned_name("a.b") != owned_name("a_b") and owned_name("A") != owned_name("a")
    assert len(owned_name("x" * 300)) <= 63


def test_checks_waiting_on_servers_are_bounded_in_number_and_time() -> None:
    """Each check holds a REST thread: past `MAX_CONCURRENT` waiting at once, another is a 503 at once
    (it says to try again), and no check may be given more than 15 s."""
    from pydantic import ValidationError

    from connect_core.connectors.cdc._deadline import MAX_CONCURRENT, ProbesBusy, within

    release = threading.Event()
    holders = [
        threading.Thread(target=lambda: within(5, lambda _cut: release.wait(5)), daemon=True)
        for _ in range(MAX_CONCURRENT)
    ]
    for holder in holders:
        holder.start()
    time.sleep(0.2)
    started = time.monotonic()
    with pytest.raises(ProbesBusy, match="try again"):
        within(5, lambda _cut: None)
    assert time.monotonic() - started < 3
    release.set()
    for holder in holders:
        holder.join(5)
    assert within(1, lambda _cut: "free again") == "free again"
    from connect_core.connectors.cdc.config import PostgresCdcConfig

    config = {"database.hostname": "127.0.0.1", "database.user": "u", "database.dbname": "d", "topic.prefix": "p"}
    with pytest.raises(ValidationError, match="15000"):
        PostgresCdcConfig.model_validate({**config, "probe.timeout.ms": 60_000})


def test_a_capture_pattern_matches_a_servers_crafted_table_name_in_linear_time() -> None:
    """Table names come from the server the connector points at: a backtracking `(a+)+` over a crafted
    name would hold the REST process for hours; RE2 answers at once, and what it cannot run is refused."""
    from pydantic import ValidationError

    from connect_core.connectors.cdc.config import PostgresCdcConfig, captured

    started = time.monotonic()
    assert not captured("public." + "a" * 60 + "!", [r"public\.(a+)+"], [])
    assert captured("public.aaa", [r"public\.(a+)+"], [])
    assert time.monotonic() - started < 1
    config = {"database.hostname": "127.0.0.1", "database.user": "u", "database.dbname": "d", "topic.prefix": "p"}
    with pytest.raises(ValidationError, match="back-references or look-around"):
        PostgresCdcConfig.model_validate({**config, "table.include.list": r"public\.(a)\1"})


def test_the_server_a_cdc_connector_claims_is_written_out_not_a_placeholder() -> None:
    """A placeholder host is known only where the task runs, after the claims were checked: refused."""
    from pydantic import ValidationError

    from connect_core.connectors.cdc.config import PostgresCdcConfig

    config = {"database.user": "u", "database.dbname": "d", "topic.prefix": "p"}
    with pytest.raises(ValidationError, match="claimed at create"):
        PostgresCdcConfig.model_validate({**config, "database.hostname": "${airflow:pg:host}"})
