"""Shared fixtures: a real Postgres database per test (a copy of a template migrated once), one
SparkSession per test session."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import psycopg2
import pytest

from connect_core.runtime.context import Runtime
from connect_core.runtime.execution.runner import TaskRunner
from connect_core.runtime.settings import Settings
from connect_core.runtime.spark.jvm_archive import driver_java_options
from connect_core.runtime.store.db import connect_failure, masked_url
from connect_core.testing import SERVER_URL, MetadataDatabases, admin_connection, metadata_database, migrated_template
from tests.rest._throwaway_pg import ThrowawayPostgres

pytest_plugins = ["tests.connectors.cdc.fixtures"]  # the CDC servers, for the CDC and end-to-end tests

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # Python workers with this venv's packages
logging.getLogger("py4j").setLevel(logging.WARNING)  # its shutdown logs after pytest closed the streams

JDBC_JARS = ("/usr/share/java/postgresql.jar", "/usr/share/java/mariadb-java-client.jar")

_admin = admin_connection  # an autocommit connection to a server URL's database (tests/airflow use it)


@pytest.fixture(scope="session")
def pg_server() -> str:
    """URL of a Postgres server for the tests; fails (never skips) when none is reachable."""
    try:
        _admin(SERVER_URL).close()
    except psycopg2.OperationalError as exc:
        reason = connect_failure(exc, SERVER_URL)  # libpq's text may echo part of the password
    else:
        return SERVER_URL
    # outside the `except`: pytest would show the chained driver error, unmasked
    pytest.fail(f"no Postgres at {masked_url(SERVER_URL)} (set CONNECT_TEST_PG_URL): {reason}")


@pytest.fixture(scope="session")
def metadata_databases(pg_server: str) -> Iterator[MetadataDatabases]:
    """Copies of the server's template database at the migrations' head (migrated once per set of
    migrations, across sessions: its name holds their digest), each made while the test before runs."""
    databases = MetadataDatabases(pg_server, migrated_template(pg_server))
    yield databases
    databases.close()


@pytest.fixture
def database_url(metadata_databases: MetadataDatabases) -> Iterator[str]:
    """A fresh metadata database for one test, at the migrations' head; dropped after it (by
    `metadata_databases`' thread, with whatever is still connected to it)."""
    url = metadata_databases.take()
    yield url
    metadata_databases.give_back(url)


@pytest.fixture
def empty_database_url(pg_server: str) -> Iterator[str]:
    """A fresh, empty database for one test, dropped afterwards: for the tests of the migrations themselves."""
    with metadata_database(pg_server) as url:
        yield url


@pytest.fixture
def settings(database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Settings:
    # File connectors may use the test's own directory (`file.allowed.paths`). The environment says
    # so too, for what reads this process's settings from it (the runner, as under spark-submit).
    monkeypatch.setenv("CONNECT_FILE_ALLOWED_PATHS", str(tmp_path))
    return Settings(
        database_url=database_url, home=tmp_path / "home", lease_seconds=30, file_allowed_paths=str(tmp_path)
    )


@pytest.fixture
def runtime(settings: Settings) -> Iterator[Runtime]:
    rt = Runtime.open(settings)
    yield rt
    rt.close()


@pytest.fixture(scope="session")
def spark():  # type: ignore[no-untyped-def]
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .appName("connect-core-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.log.level", "WARN")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.runSQLOnFiles", "false")  # as every runner (BASE_SPARK_CONF)
        .config("spark.jars", ",".join(JDBC_JARS))  # the JDBC connectors' drivers (Debian packages)
        .config("spark.driver.extraJavaOptions", driver_java_options(Settings()) or "")  # scripts/bootstrap.sh
        .getOrCreate()
    )
    yield session
    session.stop()


@pytest.fixture(autouse=True)
def _classic_spark_after_each_test() -> Iterator[None]:
    """pyspark marks a process that made a Spark Connect session as a Connect client (its
    `functions` then build Connect columns, and no classic session can start): cleared after every
    test, so the classic tests that follow a Spark Connect one in this process work."""
    yield
    for mark in ("SPARK_CONNECT_MODE_ENABLED", "SPARK_REMOTE", "SPARK_CONNECT_MODE"):
        os.environ.pop(mark, None)


@pytest.fixture(scope="session")
def spark_connect_url(pg_server: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The `sc://localhost:PORT/;token=…` of a real Spark Connect server (a warm pool), started for
    the test session on first use by the product's own `connect pools start` code; it fails (never
    skips) when the server does not answer."""
    from connect_core.runtime.execution.warm_pool import start_server, stop_server

    home = tmp_path_factory.mktemp("connect-pool")
    settings = Settings(database_url=pg_server, home=home)  # only its home and Spark install are used
    # the server's Python workers import the tests' own connectors as well as connect_core
    env = {
        "PYTHONPATH": os.pathsep.join(p for p in (str(Path(__file__).parents[1]), os.environ.get("PYTHONPATH")) if p)
    }
    conf = {"spark.log.level": "WARN", "spark.sql.shuffle.partitions": "4"}
    try:
        info = start_server(settings, "tests", spark_master="local[2]", conf=conf, env=env)
    except Exception as exc:
        pytest.fail(f"the Spark Connect server did not start: {exc}")
    yield info.master
    stop_server(settings, "tests")


def make_runner(runtime: Runtime, spark, *, pool: str | None = None, spark_factory=None) -> TaskRunner:  # type: ignore[no-untyped-def]
    """A runner on the runtime's stores and plugins, using the shared SparkSession (or `spark_factory`),
    running as if on Spark pool `pool`."""
    return TaskRunner.for_runtime(runtime, spark_factory or (lambda: spark), pool=pool)


@pytest.fixture
def runner(runtime: Runtime, spark) -> TaskRunner:  # type: ignore[no-untyped-def]
    return make_runner(runtime, spark)


def file_pair(runtime: Runtime, tmp_path: Path, *, topic: str = "fileTopic") -> tuple[Path, Path]:
    """Register the seed's file source and sink; returns (source file, sink file)."""
    source, sink = tmp_path / "test-source-file.txt", tmp_path / "test-sink-file.txt"
    runtime.create_connector(
        "fileSourceConnector",
        {
            "connector.class": "org.apache.rocketmq.connect.file.FileSourceConnector",
            "filename": str(source),
            "connect.topicname": topic,
        },
    )
    runtime.create_connector(
        "fileSinkConnector",
        {
            "connector.class": "org.apache.rocketmq.connect.file.FileSinkConnector",
            "filename": str(sink),
            "connect.topicnames": topic,
        },
    )
    return source, sink


@pytest.fixture
def pg() -> Iterator[ThrowawayPostgres]:
    """A Postgres of the test's own on a free loopback port, to stop, crash or blackhole."""
    server = ThrowawayPostgres()
    server.start()
    yield server
    server.close()
