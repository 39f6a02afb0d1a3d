"""A third database is one dialect module and one target module, each registered, and nothing else:
the URL check, driver jars, lineage, config validation, the source's and the sink's choice of
database all find it by its URL's scheme (`connectors/jdbc/dialects/__init__.py`)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, ClassVar

import pytest

from connect_core.connectors.jdbc import dialects, targets
from connect_core.connectors.jdbc.config import JdbcSinkConfig
from connect_core.connectors.jdbc.dialects import JdbcDialect, dialect_for, driver_jars, lineage_datasets
from connect_core.connectors.jdbc.dialects.mariadb import MariaDbDialect
from connect_core.connectors.jdbc.dialects.postgres import PostgresDialect
from connect_core.connectors.jdbc.targets import BadRow, target_for
from connect_core.connectors.jdbc.targets.mariadb import MariaDbTarget
from connect_core.connectors.jdbc.targets.postgres import PostgresTarget
from connect_core.runtime.context import Runtime
from connect_core.runtime.execution.runner import TaskRunner
from connect_core.sdk.errors import ConfigError
from tests.connectors.jdbc_helpers import Database, create_upsert_sink, postgres, synced, target  # noqa: F401  (fixtures)


@pytest.fixture
def registries(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The dialect and target registries as they are, restored after the test."""
    dialects.dialects()
    target_for(dialect_for("jdbc:postgresql://h/db"))
    monkeypatch.setattr(dialects, "_BY_SCHEME", dict(dialects._BY_SCHEME))
    monkeypatch.setattr(targets, "_BY_DIALECT", dict(targets._BY_DIALECT))
    yield


def test_the_built_in_databases_are_picked_by_their_url() -> None:
    assert type(dialect_for("jdbc:postgresql://h/db")) is PostgresDialect
    assert type(dialect_for("jdbc:mariadb://h/db")) is type(dialect_for("jdbc:mysql://h/db")) is MariaDbDialect
    assert target_for(dialect_for("jdbc:postgresql://h/db")) is PostgresTarget
    assert target_for(dialect_for("jdbc:mysql://h/db")) is MariaDbTarget


class _SqliteInName(JdbcDialect):
    """A database in name only: enough of a dialect to be registered and found."""

    name = "fakedb"
    schemes = ("fakedb",)
    url_form = "jdbc:fakedb://host[:port]/db"
    url_parameters = frozenset({"user", "journal"})
    driver = "org.example.FakeDriver"
    default_jars: ClassVar[tuple[str, ...]] = ("/nonexistent/fakedb.jar",)
    default_port = 4242
    quote_char = "'"
    lineage_scheme = "fakedb"

    def columns_query(self, table: tuple[str, ...]) -> str:
        return "SELECT 1"

    def primary_key_query(self, table: tuple[str, ...]) -> str:
        return "SELECT 1"

    def text_cast(self, quoted: str) -> str:
        return quoted

    def timestamp_text(self, quoted: str) -> str:
        return quoted

    def now_minus(self, millis: int, column_type: str) -> str:
        return "now()"

    def column_type(self, field: Any, *, key: bool = False) -> str:
        return "TEXT"

    @classmethod
    def lineage_name(cls, database: str, names: tuple[str, ...]) -> str:
        return "/".join((database, *names))


class _FakeTarget:
    opened: ClassVar[list[str]] = []

    def __init__(self, dialect: Any, cfg: Any, connector: str, stage: str, log: Any) -> None:
        self.connector = connector

    def open(self, committed: Mapping[Any, Any], tolerant: bool) -> dict[Any, int]:
        self.opened.append(self.connector)
        return {}

    def set_aside(self, topic: str, applied: Mapping[int, int]) -> list[BadRow]:
        return []

    def write(self, topic: str, layout: Any, records: Any, applied: dict[int, int]) -> tuple[int, list[BadRow]]:
        return 0, []

    @classmethod
    def alter_offsets(cls, dialect: Any, connector: str, offsets: Any) -> None:
        pass


def test_a_registered_third_database_is_found_everywhere_by_its_url(registries: None) -> None:
    url = "jdbc:fakedb://db.example:4243/shop?user=u&journal=wal"
    with pytest.raises(ConfigError, match="must be jdbc:postgresql://"):
        dialect_for(url)  # not yet registered

    dialects.register(_SqliteInName)
    targets.register("fakedb")(_FakeTarget)

    found = dialect_for(url, "u", "pw")
    assert isinstance(found, _SqliteInName) and found.host == "db.example:4243" and found.quote("t") == "'t'"
    assert target_for(found) is _FakeTarget
    with pytest.raises(ConfigError, match="`socketFactory`"):
        dialect_for("jdbc:fakedb://h/db?socketFactory=x")  # its own allow-list
    with pytest.raises(ConfigError, match="or jdbc:fakedb://host"):
        dialect_for("jdbc:h2:mem:x")  # the supported forms name it
    assert driver_jars("${env:URL}", None)[-1] == "/nonexistent/fakedb.jar"
    assert driver_jars(url, None) == ["/nonexistent/fakedb.jar"]
    assert [(d.namespace, d.name) for d in lineage_datasets(url, ["orders"])] == [
        ("fakedb://db.example:4243", "shop/orders")
    ]
    cfg = JdbcSinkConfig.model_validate(
        {"name": "s", "connector.class": "JdbcSinkConnector", "connection.url": url, "topics": "t"}
    )
    assert cfg.connection_url == url


def test_a_third_database_made_of_a_subclass_is_written_by_its_own_target(
    registries: None,
    runtime: Runtime,
    runner: TaskRunner,
    postgres: Database,  # noqa: F811
    target: Database,  # noqa: F811
) -> None:
    """`jdbc:pgcompat://`: a PostgreSQL-compatible database, registered as a dialect and a target of
    its own (subclasses of PostgreSQL's), is what the sink writes through, end to end."""

    class PgCompat(PostgresDialect):
        name = "pgcompat"
        schemes = ("pgcompat",)
        url_form = "jdbc:pgcompat://host[:port]/db"

    class PgCompatTarget(PostgresTarget):
        opened: ClassVar[list[str]] = []

        def open(self, committed: Mapping[Any, Any], tolerant: bool) -> dict[Any, int]:
            self.opened.append(type(self.dialect).__name__)
            return super().open(committed, tolerant)

    dialects.register(PgCompat)
    targets.register("pgcompat")(PgCompatTarget)
    postgres.execute(
        "CREATE TABLE items (id int PRIMARY KEY, name text)", "INSERT INTO items VALUES (1, 'a'), (2, 'b')"
    )
    runtime.create_connector(
        "src",
        postgres.source_config(
            **{"mode": "incrementing", "incrementing.column.name": "id", "table.whitelist": "items", "topic.prefix": ""}
        ),
    )
    compat = Database(target.kind, target.name, target.jdbc_url.replace("jdbc:postgresql:", "jdbc:pgcompat:"), {})
    create_upsert_sink(runtime, compat, "items")
    assert [r.rows for r in synced(runner, "src", "sink")] == [2, 2]
    assert target.rows("SELECT id, name FROM items ORDER BY id") == [(1, "a"), (2, "b")]
    assert PgCompatTarget.opened == ["PgCompat"]
