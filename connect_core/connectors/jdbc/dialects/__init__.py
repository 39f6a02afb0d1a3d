"""What differs between databases, decided in one place: one `JdbcDialect` subclass per database.

As Confluent's `DatabaseDialect` and Debezium's dialects: a dialect owns its URL (schemes,
harmless parameters, the driver's connection arguments, the URL Spark gets), identifier quoting,
the metadata queries of the source (columns, primary key, bounds), the type mapping of the sink,
and the fast read path past Spark's JDBC reader. The source and sink ask the dialect; they never
compare a database's name. The sink's writes are the dialect's `Target` (`..targets`).

Identifiers from configs are checked against a strict pattern and then quoted, never pasted:
`x; DROP TABLE y` is a config error, not SQL.

Adding a database is one new module in each room and one registry entry each, nothing else:

1. `dialects/<db>.py`: a `JdbcDialect` subclass decorated with `@register`, and its module name
   in `_BUILT_IN` below;
2. `targets/<db>.py`: a class of the `Target` protocol decorated with `@register("<name>")`, and
   its module name in `targets._BUILT_IN`.

URL checks, driver jars, lineage, the source and the sink then find it by its URL's scheme
(`tests/connectors/test_jdbc_dialects.py` registers a third database that way).
"""

from __future__ import annotations

import importlib
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple, TypeVar
from urllib.parse import parse_qsl, urlsplit

from connect_core.connectors.jdbc._url import check_jdbc_url
from connect_core.sdk.config import is_placeholder
from connect_core.sdk.connector import LineageDataset
from connect_core.sdk.errors import ConfigError

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql.types import StructType

__all__ = [
    "BulkRead",
    "JdbcDialect",
    "checked_identifier",
    "dialect_class",
    "dialect_for",
    "dialects",
    "driver_jars",
    "lineage_datasets",
    "parse_identifier",
    "register",
]

#: The built-in dialects' modules, in the order their URLs are documented (each registers itself).
_BUILT_IN = (
    "connect_core.connectors.jdbc.dialects.postgres",
    "connect_core.connectors.jdbc.dialects.mariadb",
)
_BY_SCHEME: dict[str, type[JdbcDialect]] = {}
_D = TypeVar("_D", bound="type[JdbcDialect]")

# A table or column name: letters, digits, `_`, `$` (not first); optionally schema-qualified.
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_$]{0,62}$")


def parse_identifier(value: str, what: str) -> tuple[str, ...]:
    """`schema.table` or `table` (or a column) as its parts; anything else is a ConfigError."""
    parts = tuple(value.strip().split("."))
    if not _plain(parts):
        raise _not_plain(value, what)
    return parts


def checked_identifier(parts: tuple[str, ...], what: str = "table") -> tuple[str, ...]:
    """`parts` as `parse_identifier` gives them, checked again where a dialect writes them into SQL
    text (a string literal of a metadata query): whoever built the tuple, only plain names get there."""
    if not _plain(parts):
        raise _not_plain(".".join(parts), what)
    return parts


def _plain(parts: tuple[str, ...]) -> bool:
    return 1 <= len(parts) <= 2 and all(_NAME.fullmatch(p) for p in parts)


def _not_plain(value: str, what: str) -> ConfigError:
    return ConfigError(f"{what} `{value}` is not a plain SQL name (letters, digits, `_`, `$`; `schema.table` at most)")


class BulkRead(NamedTuple):
    """The source's fast read of a SELECT: its Spark schema, one statement per slice, and the
    function that makes each Spark partition's reader for the slices' Arrow schema."""

    schema: StructType
    statements: list[str]
    reader: Callable[[pa.Schema], Callable[..., Any]]


class JdbcDialect(ABC):
    """One database, for one connection: `url` (checked) and the config's login."""

    #: The database's name: the targets' registry key, and in messages.
    name: ClassVar[str]
    #: The URL schemes (`jdbc:<scheme>://`) that name it.
    schemes: ClassVar[tuple[str, ...]]
    #: Its URL as the error for an unsupported one shows it.
    url_form: ClassVar[str]
    #: URL parameters known to be harmless, lower-case (see `_url`).
    url_parameters: ClassVar[frozenset[str]]
    #: The JDBC driver class Spark loads, and the jars it is in where Debian installs them.
    driver: ClassVar[str | None]
    default_jars: ClassVar[tuple[str, ...]]
    default_port: ClassVar[int]
    quote_char: ClassVar[str]
    #: OpenLineage's namespace scheme (`postgres://host:port`).
    lineage_scheme: ClassVar[str]
    #: Properties every read through Spark's JDBC source sets (the URL cannot set them).
    spark_properties: ClassVar[Mapping[str, str]] = {}
    #: The fast read path, as the source's log names it (none: only Spark's JDBC reader).
    bulk_reader: ClassVar[str] = ""
    #: Whether `describe` types a query's result without Spark.
    describes_queries: ClassVar[bool] = False

    def __init__(self, url: str, user: str | None = None, password: str | None = None) -> None:
        self.url, self.user, self.password = url, user, password

    # -- the URL ------------------------------------------------------------------------------

    @property
    def host(self) -> str:
        """`host:port` of the URL, for error messages."""
        rest = self.url.split("://", 1)[1] if "://" in self.url else self.url
        netloc = urlsplit("//" + rest).netloc.rsplit("@", 1)[-1]
        return netloc or rest.split("/", 1)[0]

    @property
    def spark_url(self) -> str:
        """The URL handed to Spark's JDBC source."""
        return self.url

    def server(self) -> tuple[Any, str | None, str | None]:
        """The URL's parts, and the login: the config's user/password, else the URL's `?user=&password=`."""
        parts = urlsplit("//" + self.url.split("://", 1)[1])
        query = dict(parse_qsl(parts.query))
        return parts, self.user or query.get("user"), self.password or query.get("password")

    def quote(self, parts: tuple[str, ...] | str) -> str:
        if isinstance(parts, str):
            parts = parse_identifier(parts, "name")
        q = self.quote_char
        return ".".join(f"{q}{p}{q}" for p in parts)

    # -- the source: small queries in the driver, metadata, bounds --------------------------------

    def rows(self, sql: str) -> list[Any] | None:
        """A small result as dicts, read in the driver by the database's Python client (no Spark
        job); None when there is no such client (Spark's JDBC source runs it)."""
        return None

    def describe(self, sql: str) -> StructType | None:
        """The Spark schema of a SELECT's result without Spark (`describes_queries`); None when a
        column has a type the fast path does not read."""
        raise NotImplementedError(f"the {self.name} dialect does not describe queries")

    def bulk_read(
        self,
        sql: str,
        predicates: list[str] | None,
        column_types: list[str],
        schema: Callable[[str], StructType | None],
    ) -> BulkRead | None:
        """The rows of `sql` read past Spark's JDBC reader, one statement per predicate; None when
        a column's type (`column_types`) needs the JDBC path. `schema` types a SELECT."""
        return None

    @abstractmethod
    def columns_query(self, table: tuple[str, ...]) -> str:
        """A SELECT of the table's columns in order: `name`, `sql_type`, `p` (precision), `s` (scale)."""

    @abstractmethod
    def primary_key_query(self, table: tuple[str, ...]) -> str:
        """A SELECT of the table's primary key columns (`name`) in key order."""

    @abstractmethod
    def text_cast(self, quoted: str) -> str:
        """A column as its text."""

    @abstractmethod
    def timestamp_text(self, quoted: str) -> str:
        """A timestamp as `YYYY-MM-DD HH:MM:SS.ffffff` text, exactly as the database holds it."""

    @abstractmethod
    def now_minus(self, millis: int, column_type: str) -> str:
        """The time `millis` ago, comparable with a column of `column_type`."""

    def limit(self, n: int) -> str:
        return f" LIMIT {int(n)}"

    # -- the sink ------------------------------------------------------------------------------

    @abstractmethod
    def column_type(self, field: Any, *, key: bool = False) -> str:
        """The column type for a Spark `StructField` of a topic (`key`: in the primary key)."""

    # -- column masks ------------------------------------------------------------------------

    def qualified_table(self, names: tuple[str, ...]) -> str:
        """The table `names` (`table` or `schema.table`) as a column's fully qualified name starts in
        Debezium's column masks (`<schema>.<table>.<column>`); default: as written."""
        return ".".join(names)

    # -- lineage -------------------------------------------------------------------------------

    @classmethod
    @abstractmethod
    def lineage_name(cls, database: str, names: tuple[str, ...]) -> str:
        """OpenLineage's dataset name of the table `names` (`table` or `schema.table`) in `database`."""


def register(cls: _D) -> _D:
    """Make `cls` the dialect of its URL schemes."""
    for scheme in cls.schemes:
        _BY_SCHEME[scheme] = cls
    return cls


def dialects() -> list[type[JdbcDialect]]:
    """The registered dialects, the built-in ones first."""
    for module in _BUILT_IN:
        importlib.import_module(module)
    found = dict.fromkeys(_BY_SCHEME.values())  # in the order registered, whatever imported them first
    return sorted(
        found, key=lambda cls: _BUILT_IN.index(cls.__module__) if cls.__module__ in _BUILT_IN else len(_BUILT_IN)
    )


def dialect_class(scheme: str) -> type[JdbcDialect] | None:
    """The dialect of a URL scheme (`postgresql`), if one is registered."""
    dialects()
    return _BY_SCHEME.get(scheme)


def dialect_for(url: str, user: str | None = None, password: str | None = None) -> JdbcDialect:
    """The dialect of a URL whose scheme a dialect is registered for; a ConfigError for any other URL,
    or one with a parameter that is not allowed (see `_url`). Every connection's URL comes through
    here, once its config providers' placeholders are resolved, so it is checked where the task runs too."""
    known = dialects()
    allowed = {scheme: cls.url_parameters for cls in known for scheme in cls.schemes}
    scheme = check_jdbc_url(url, allowed, " or ".join(cls.url_form for cls in known))
    return _BY_SCHEME[scheme](url, user, password)


def lineage_datasets(url: str, tables: list[str]) -> list[LineageDataset]:
    """`tables` of the database `url` names, as OpenLineage names them (`postgres://host:port` with
    `db.schema.table`, `mysql://host:port` with `db.table`: see each dialect's `lineage_name`).
    From the URL's host, port and path only: never its user or password."""
    scheme = url[len("jdbc:") :].split(":", 1)[0].lower() if url.startswith("jdbc:") else ""
    cls = dialect_class(scheme)
    if cls is None:
        return []
    parts = urlsplit(url[len("jdbc:") :])
    try:
        port = parts.port or cls.default_port
    except ValueError:
        return []
    namespace = f"{cls.lineage_scheme}://{parts.hostname or 'localhost'}:{port}"
    database = parts.path.strip("/").split("/")[0]
    return [LineageDataset(namespace, cls.lineage_name(database, parse_identifier(t, "table"))) for t in tables]


def driver_jars(url: str, configured: str | None) -> list[str]:
    """The JDBC driver jars a run needs: `configured` (a checked real path), else the URL's driver's, or,
    while the URL is a config provider's placeholder (resolved only where the task runs), every
    registered driver's."""
    if configured:
        return [configured]
    if is_placeholder(url):  # (no `dialect_for` of a hostless URL: `_url` refuses it)
        return [jar for cls in dialects() for jar in _installed(cls.default_jars)]
    return _installed(dialect_for(url).default_jars)


def _installed(jars: tuple[str, ...]) -> list[str]:
    """The built-in driver's jars found on this machine (none: the first, for a clear error from Spark)."""
    return [j for j in jars if Path(j).exists()] or list(jars[:1])
