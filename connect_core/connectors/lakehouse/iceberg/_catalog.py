"""Loading the configured catalog, and keeping every file it touches inside the warehouse.

The catalog class is picked here from `iceberg.catalog.type` (an allow-list), never by pyiceberg's
`load_catalog`, which would also read `~/.pyiceberg.yaml`, the `PYICEBERG_*` environment and
`py-catalog-impl` (a class to import). Every FileIO pyiceberg makes, for the catalog's own reads
of table metadata as for any table, is a `ConfinedFileIO`: it opens, writes and deletes files
only under the warehouse directory (the runtime confined that one to `file.allowed.paths`),
whatever location a catalog entry, a REST server or a table's metadata names. That is the one
`py-io-impl` there is: the catalog's properties name it, and any other code-loading property (of
a REST server's defaults, of a table) is refused.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from connect_core.connectors.lakehouse.iceberg.config import CATALOG_PREFIX, IcebergSinkConfig, problems
from connect_core.sdk.errors import ConfigError

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from pyiceberg.io import FileIO

__all__ = ["ROOT", "ConfinedFileIO", "catalog_uri", "load_catalog", "refuse_code_keys"]

#: Property names that make pyiceberg import a class.
_CODE_KEYS = ("py-catalog-impl", "py-io-impl", "py-location-provider-impl", "write.py-location-provider.impl")
_IO_IMPL = "py-io-impl"
#: The catalog property holding the warehouse's real path, which `ConfinedFileIO` confines to.
ROOT = "connect-warehouse-root"


def refuse_code_keys(properties: Mapping[str, Any], where: str) -> None:
    """ConfigError when `properties` (a table's, a REST server's defaults) name code, or the root."""
    found = sorted(
        k for k in properties if k in _CODE_KEYS or k == ROOT or (k.startswith("py-") and k.endswith("impl"))
    )
    if found:
        raise ConfigError(f"{where} sets {found}, which name code for pyiceberg to load: refused")


def load_catalog(cfg: IcebergSinkConfig) -> Catalog:
    """The catalog `cfg` configures (checked again here: placeholders are filled by now)."""
    found = problems(cfg)
    if found:
        keys = ", ".join(f"`{k}`: {'; '.join(v)}" for k, v in sorted(found.items()))
        raise ConfigError(f"the Iceberg sink's config is not valid: {keys}", found)
    assert cfg.catalog_warehouse is not None  # `problems` says so otherwise
    root = os.path.realpath(cfg.catalog_warehouse)
    props = cfg.catalog_properties()
    props.update({"warehouse": root, _IO_IMPL: f"{__name__}.ConfinedFileIO", ROOT: root})
    kind = cfg.kind
    name = cfg.catalog_name
    catalog: Catalog
    if kind == "sql":
        from pyiceberg.catalog.sql import SqlCatalog

        props["uri"] = catalog_uri(cfg)
        catalog = _confined(SqlCatalog, root, name, props)
    elif kind == "rest":
        from pyiceberg.catalog.rest import RestCatalog

        props["uri"] = str(cfg.catalog_uri)
        catalog = _confined(RestCatalog, root, name, props)
    elif kind == "hive":
        from pyiceberg.catalog.hive import HiveCatalog

        props["uri"] = str(cfg.catalog_uri)
        catalog = _confined(HiveCatalog, root, name, props)
    else:
        from pyiceberg.catalog.glue import GlueCatalog

        catalog = _confined(GlueCatalog, root, name, props)
    own = {k: catalog.properties.get(k) for k in (_IO_IMPL, ROOT)}
    others = {k: v for k, v in catalog.properties.items() if k not in own}
    if own != {_IO_IMPL: props[_IO_IMPL], ROOT: root}:
        raise ConfigError(f"catalog `{name}`'s server overrides its FileIO or warehouse root: refused")
    refuse_code_keys(others, f"catalog `{name}` (with its server's defaults)")
    return catalog


def _confined(cls: type[Catalog], root: str, name: str, props: dict[str, str]) -> Catalog:
    """An instance of `cls` whose FileIOs are `ConfinedFileIO`s under `root`."""

    class Confined(cls):  # type: ignore[valid-type,misc]
        def _load_file_io(self, properties: Any = None, location: str | None = None) -> FileIO:
            refuse_code_keys(properties or {}, "the table's properties")
            return ConfinedFileIO({**self.properties, **(properties or {}), ROOT: root})

        def _create_session(self) -> Any:  # a REST catalog's HTTP session: no request waits for ever
            session = super()._create_session()
            for prefix in ("http://", "https://"):
                session.mount(prefix, _deadline_adapter())
            return session

    Confined.__name__ = cls.__name__
    try:
        return Confined(name, **props)
    except ConfigError:
        raise
    except ImportError as exc:
        raise ConfigError(f"the `{cls.__name__}` of pyiceberg needs a package not installed here: {exc.name}") from None
    except Exception as exc:
        from connect_core.sdk.errors import RetriableError

        raise RetriableError(
            f"the Iceberg catalog (`{CATALOG_PREFIX}uri`) did not answer: {type(exc).__name__}"
        ) from None


#: How long a catalog may take to connect, and to answer one request (a server that accepts and
#: never answers would hold a run, and an offset reset's REST call, for ever).
CONNECT_TIMEOUT_S = 10
REQUEST_TIMEOUT_S = 120


def _deadline_adapter() -> Any:
    """requests' adapter with a timeout on every request that names none (pyiceberg names none)."""
    from requests.adapters import HTTPAdapter

    class Deadline(HTTPAdapter):
        def send(self, request: Any, timeout: Any = None, **kwargs: Any) -> Any:  # type: ignore[override]
            return super().send(request, timeout=timeout or (CONNECT_TIMEOUT_S, REQUEST_TIMEOUT_S), **kwargs)

    return Deadline()


def catalog_uri(cfg: IcebergSinkConfig) -> str:
    """The SQLAlchemy URL of a sql catalog's PostgreSQL: a Java sink's `jdbc:postgresql://…?user=…`
    and `iceberg.catalog.jdbc.user`/`jdbc.password` read as the JDBC catalog reads them."""
    from urllib.parse import parse_qsl, urlsplit

    from sqlalchemy.engine import URL

    raw = str(cfg.catalog_uri)
    parts = urlsplit(raw.removeprefix("jdbc:"))
    query = dict(parse_qsl(parts.query))
    user = cfg.catalog_jdbc_user or query.pop("user", None) or parts.username
    password = cfg.catalog_jdbc_password or query.pop("password", None) or parts.password
    # a server that accepts and never answers: the connection gives up (libpq's connect_timeout), and
    # a query the server sits on ends (its statement_timeout); the user's tighter values stand
    query.setdefault("connect_timeout", str(CONNECT_TIMEOUT_S))
    query["options"] = f"-c statement_timeout={REQUEST_TIMEOUT_S * 1000}"
    return URL.create(
        "postgresql+psycopg2",
        username=user,
        password=password,
        host=parts.hostname,
        port=parts.port,
        database=parts.path.lstrip("/") or None,
        query=query,
    ).render_as_string(hide_password=False)


def _pyarrow_file_io() -> type[Any]:
    from pyiceberg.io.pyarrow import PyArrowFileIO

    return PyArrowFileIO


class ConfinedFileIO(_pyarrow_file_io()):  # type: ignore[misc]
    """pyiceberg's pyarrow FileIO that opens, writes and deletes only local files under `root`."""

    def __init__(self, properties: Mapping[str, str] | None = None) -> None:
        # made by pyiceberg too (`py-io-impl`), with the catalog's properties: its root is in them
        root = (properties or {}).get(ROOT)
        if not root:
            raise ConfigError(f"a FileIO of the Iceberg sink needs `{ROOT}`, the warehouse it is confined to")
        super().__init__(dict(properties or {}))
        self.root = root

    def _check(self, location: Any) -> None:
        text = location if isinstance(location, str) else location.location
        scheme, _, path = self.parse_location(text)
        real = os.path.realpath(path)
        if scheme != "file" or not Path(real).is_relative_to(self.root):
            shown = text if len(text) <= 200 else text[:200] + "…"
            raise ConfigError(
                f"the Iceberg table names file `{shown}`, outside the warehouse `iceberg.catalog.warehouse`: refused"
            )

    def new_input(self, location: str) -> Any:
        self._check(location)
        return super().new_input(location)

    def new_output(self, location: str) -> Any:
        self._check(location)
        return super().new_output(location)

    def delete(self, location: Any) -> None:
        self._check(location)
        super().delete(location)
