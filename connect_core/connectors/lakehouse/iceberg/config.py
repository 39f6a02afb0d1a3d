"""The Iceberg sink's config, keyed as the Iceberg Kafka Connect sink (`org.apache.iceberg.connect`).

Typed keys are pydantic fields; the dynamic ones (`iceberg.catalog.*`, `iceberg.table.<t>.*`) stay
in the model's extras and are judged by `problems`, which reports every problem by its key, at
create (the connector's `validate`) and again where the task runs (a placeholder is filled only
there). The catalog keys are an allow-list: pyiceberg loads code named by config
(`py-catalog-impl`, `py-io-impl`), so no key outside the list ever reaches it.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import BeforeValidator, Field

from connect_core.sdk import LocalPath, SinkConnectorConfig, TopicList
from connect_core.sdk.config import is_placeholder

__all__ = [
    "CATALOG_PREFIX",
    "CATALOG_TYPES",
    "JAVA_CATALOGS",
    "TABLE_NAME",
    "IcebergSinkConfig",
    "partition_fields",
    "problems",
    "split_transforms",
]

CATALOG_PREFIX = "iceberg.catalog."
_TABLE_PREFIX = "iceberg.table."
#: The catalogs this sink loads (pyiceberg's classes, by `iceberg.catalog.type`). `sql` (on
#: PostgreSQL) and `rest` are tested; `hive` (needs the `thrift` package) and `glue` are
#: pyiceberg's own and documented only.
CATALOG_TYPES = ("sql", "rest", "hive", "glue")
#: `iceberg.catalog.catalog-impl` values a Java sink's config carries, as the catalog they name.
JAVA_CATALOGS = {
    "org.apache.iceberg.jdbc.JdbcCatalog": "sql",
    "org.apache.iceberg.rest.RESTCatalog": "rest",
    "org.apache.iceberg.hive.HiveCatalog": "hive",
    "org.apache.iceberg.aws.glue.GlueCatalog": "glue",
}
#: `iceberg.catalog.io-impl` values of Java configs: accepted and not used (the warehouse is a
#: local directory, which pyiceberg's pyarrow FileIO writes).
_JAVA_FILE_IOS = (
    "org.apache.iceberg.hadoop.HadoopFileIO",
    "org.apache.iceberg.io.ResolvingFileIO",
    "org.apache.iceberg.aws.s3.S3FileIO",
)
#: The other `iceberg.catalog.*` keys passed on (credentials of a REST catalog, a JDBC user).
_PASSED = ("scope", "oauth2-server-uri", "audience", "resource", "prefix")
#: Catalog keys that are fields of the model (`credential` and `token` passed on as they are).
_TYPED = ("type", "uri", "warehouse", "catalog-impl", "io-impl", "credential", "token", "jdbc.user", "jdbc.password")
#: `db.table` (namespaces may nest: `a.b.table`): identifiers, so a name is never a path trick.
TABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}(?:\.[A-Za-z_][A-Za-z0-9_]{0,127}){1,3}")
_COLUMN = r"[A-Za-z_][A-Za-z0-9_]{0,127}"
_PARTITION = re.compile(
    rf"(?P<col>{_COLUMN})|(?P<fn>years|months|days|hours|year|month|day|hour)\((?P<tcol>{_COLUMN})\)"
    rf"|(?P<wfn>bucket|truncate)\((?P<wcol>{_COLUMN}) *, *(?P<n>[0-9]{{1,9}})\)"
)
_SQL_URI = re.compile(r"(?:postgresql(?:\+psycopg2)?|jdbc:postgresql)://[^?#\s]+(?:\?(?P<query>[^#\s]*))?")
#: Query parameters of a SQL catalog's URI that neither read files nor run code (no sslkey, no
#: service file, no `options`).
_SQL_PARAMS = ("sslmode", "connect_timeout", "application_name", "user", "password", "target_session_attrs")


def split_transforms(value: Any) -> Any:
    """`"days(ts), bucket(id, 4)"` as `["days(ts)", "bucket(id, 4)"]`: commas inside brackets stay."""
    if not isinstance(value, str):
        return value
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(value):
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0:
            parts.append(value[start:i])
            start = i + 1
    parts.append(value[start:])
    return [p.strip() for p in parts if p.strip()]


PartitionList = Annotated[list[str], BeforeValidator(split_transforms)]


class IcebergSinkConfig(SinkConnectorConfig):
    tables: TopicList = Field(
        default_factory=list,
        alias="iceberg.tables",
        description="Tables every record is written to (`db.table`, comma-separated), unless "
        "`iceberg.tables.dynamic-enabled`.",
    )
    dynamic_enabled: bool = Field(
        default=False,
        alias="iceberg.tables.dynamic-enabled",
        description="Route each record to the table its `iceberg.tables.route-field` names (`db.table`).",
    )
    route_field: str | None = Field(
        default=None, alias="iceberg.tables.route-field", description="The column naming a record's table."
    )
    auto_create: bool = Field(
        default=False,
        alias="iceberg.tables.auto-create-enabled",
        description="Create a missing table (and namespace) from the records' columns.",
    )
    evolve_schema: bool = Field(
        default=False,
        alias="iceberg.tables.evolve-schema-enabled",
        description="Add new columns and widen types (int→long, float→double, decimal precision up); "
        "off, a record with a column the table lacks fails the run.",
    )
    default_id_columns: TopicList = Field(
        default_factory=list,
        alias="iceberg.tables.default-id-columns",
        description="Key columns of every table (`iceberg.table.<t>.id-columns` for one table); default: "
        "the record key's fields.",
    )
    default_partition_by: PartitionList = Field(
        default_factory=list,
        alias="iceberg.tables.default-partition-by",
        description="Partitioning of a table the sink creates: columns and transforms (`days(ts)`, "
        "`bucket(id, 4)`, `truncate(name, 2)`); `iceberg.table.<t>.partition-by` for one table.",
    )
    upsert: bool = Field(
        default=False,
        alias="iceberg.tables.upsert-mode-enabled",
        description="Each record replaces the row of its key (the newest per key of a batch wins).",
    )
    cdc_field: str | None = Field(
        default=None,
        alias="iceberg.tables.cdc-field",
        description="Column holding the change's op (`c`, `r`, `u`, `d`): `d` deletes the key, the others "
        "upsert it. Tombstones and `__deleted`=`true` rows delete too.",
    )
    commit_interval_ms: int = Field(
        default=300_000,
        alias="iceberg.control.commit.interval-ms",
        ge=0,
        description="Accepted for Kafka configs; here each run commits once per table (one micro-batch).",
    )
    catalog_type: str | None = Field(
        default=None,
        alias="iceberg.catalog.type",
        description=f"The catalog: one of {', '.join(CATALOG_TYPES)} (or a Java `catalog-impl` of those).",
    )
    catalog_impl: str | None = Field(
        default=None,
        alias="iceberg.catalog.catalog-impl",
        description="A Java sink's catalog class (JdbcCatalog, RESTCatalog, HiveCatalog, GlueCatalog): "
        "read as the matching `iceberg.catalog.type`.",
    )
    catalog_uri: str | None = Field(
        default=None,
        alias="iceberg.catalog.uri",
        description="The catalog's address: `postgresql+psycopg2://…` (or `jdbc:postgresql://…`) for sql, "
        "`http(s)://…` for rest, `thrift://…` for hive.",
    )
    catalog_name: str = Field(
        default="iceberg",
        alias="iceberg.catalog",
        pattern=r"^[A-Za-z0-9_.-]{1,64}$",
        description="The catalog's name (a sql catalog keeps it beside each table's entry).",
    )
    catalog_credential: str | None = Field(
        default=None,
        alias="iceberg.catalog.credential",
        description="A REST catalog's OAuth2 client credential (`client_id:secret`; masked).",
    )
    catalog_token: str | None = Field(
        default=None, alias="iceberg.catalog.token", description="A REST catalog's bearer token (masked)."
    )
    catalog_jdbc_user: str | None = Field(
        default=None, alias="iceberg.catalog.jdbc.user", description="A sql catalog's database user (as Java's)."
    )
    catalog_jdbc_password: str | None = Field(
        default=None,
        alias="iceberg.catalog.jdbc.password",
        description="A sql catalog's database password (masked; `${env:…}` keeps it out of the store).",
    )
    catalog_warehouse: LocalPath | None = Field(
        default=None,
        alias="iceberg.catalog.warehouse",
        description="The directory the tables' files live in: a path on the worker inside its "
        "`file.allowed.paths` (every table written must lie under it).",
    )

    compaction_target_size: int = Field(
        default=128 * 1024 * 1024,
        alias="iceberg.compaction.target-file-size-bytes",
        ge=1_048_576,
        le=2**30,
        description="Upkeep `compact`: data files smaller than this are rewritten, bin-packed into files of up "
        "to about this size (only where a partition holds at least two of them), in one snapshot of the same rows. "
        "At most 1 GiB: one group's rows are in the Airflow task's memory at a time, several times their size on disk.",
    )
    snapshots_max_age_hours: int = Field(
        default=120,
        alias="iceberg.snapshots.max-age-hours",
        ge=0,
        le=87_600,
        description="Upkeep `expire_snapshots`: snapshots older than this many hours are expired (Java's "
        "`history.expire.max-snapshot-age-ms`, 5 days), but never the current one, a branch or tag, the newest "
        "`iceberg.snapshots.min-keep`, or one the sinks' offsets are still read from.",
    )
    snapshots_min_keep: int = Field(
        default=1,
        alias="iceberg.snapshots.min-keep",
        ge=1,
        le=100_000,
        description="Upkeep `expire_snapshots`: the newest snapshots of the main branch always kept, however old.",
    )
    orphans_older_than_hours: int = Field(
        default=72,
        alias="iceberg.orphans.older-than-hours",
        ge=1,
        le=87_600,
        description="Upkeep `remove_orphans`: files under a table's `data/` and `metadata/` that no live snapshot, "
        "manifest or metadata file references are deleted once older than this (at least an hour: a commit in "
        "flight writes its files before it references them).",
    )

    @property
    def upserts(self) -> bool:
        """Whether records change rows by key (upsert or CDC) rather than being appended."""
        return self.upsert or bool(self.cdc_field)

    @property
    def kind(self) -> str | None:
        """The catalog type, from `iceberg.catalog.type` or a Java `catalog-impl`."""
        if self.catalog_type:
            return self.catalog_type.strip().lower()
        return JAVA_CATALOGS.get(self.catalog_impl or "")

    def catalog_extras(self) -> dict[str, str]:
        """The `iceberg.catalog.*` keys that are not typed fields (name without the prefix → value)."""
        extra = self.model_extra or {}
        return {
            k[len(CATALOG_PREFIX) :]: str(v)
            for k, v in extra.items()
            if k.startswith(CATALOG_PREFIX) and k[len(CATALOG_PREFIX) :] not in _TYPED
        }

    def catalog_properties(self) -> dict[str, str]:
        """What is passed to the catalog besides type, URI and warehouse: the credentials and the
        allowed `iceberg.catalog.*` extras."""
        found = {k: v for k, v in self.catalog_extras().items() if k in _PASSED}
        if self.catalog_credential:
            found["credential"] = self.catalog_credential
        if self.catalog_token:
            found["token"] = self.catalog_token
        return found

    def table_setting(self, table: str, name: str) -> Any:
        """`iceberg.table.<table>.<name>`, or None."""
        return (self.model_extra or {}).get(f"{_TABLE_PREFIX}{table}.{name}")

    def id_columns(self, table: str) -> list[str]:
        own = self.table_setting(table, "id-columns")
        if own is not None:
            return [c.strip() for c in str(own).split(",") if c.strip()]
        return list(self.default_id_columns)

    def partition_by(self, table: str) -> list[str]:
        own = self.table_setting(table, "partition-by")
        return split_transforms(str(own)) if own is not None else list(self.default_partition_by)


def partition_fields(specs: list[str]) -> list[tuple[str, str, int | None]]:
    """(column, transform, width) of each partition spec (`days(ts)` → ("ts", "day", None));
    ValueError naming the first spec that is none."""
    found: list[tuple[str, str, int | None]] = []
    for spec in specs:
        m = _PARTITION.fullmatch(spec.strip())
        if m is None:
            raise ValueError(
                f"`{spec[:60]}` is no partition spec: a column, `years|months|days|hours(col)`, "
                "`bucket(col, N)` or `truncate(col, W)`"
            )
        if m["col"]:
            found.append((m["col"], "identity", None))
        elif m["fn"]:
            found.append((m["tcol"], m["fn"].rstrip("s"), None))
        else:
            if int(m["n"]) < 1:
                raise ValueError(f"`{spec}`: the width must be at least 1")
            if not _has_core():
                raise ValueError(
                    f"`{spec}`: pyiceberg writes `{m['wfn']}` partitions only with the `pyiceberg-core` package, "
                    "which this worker lacks; partition by a column or a time transform"
                )
            found.append((m["wcol"], m["wfn"], int(m["n"])))
    return found


def _has_core() -> bool:
    """Whether pyiceberg's Rust extension (its bucket and truncate transforms over Arrow) is here."""
    import importlib.util

    return importlib.util.find_spec("pyiceberg_core") is not None


def problems(cfg: IcebergSinkConfig) -> dict[str, list[str]]:
    """Every problem of `cfg` pydantic cannot see, by config key (never echoing a value that may
    hold a secret: the URI and the credentials are named, not shown)."""
    found: dict[str, list[str]] = {}

    def add(key: str, problem: str) -> None:
        found.setdefault(key, []).append(problem)

    if cfg.dynamic_enabled:
        if not cfg.route_field:
            add("iceberg.tables.route-field", "`iceberg.tables.dynamic-enabled` needs the column naming the table")
    elif not cfg.tables:
        add("iceberg.tables", "name the tables to write (`db.table`, comma-separated), or route dynamically")
    for table in cfg.tables:
        if not is_placeholder(table) and not TABLE_NAME.fullmatch(table):
            add("iceberg.tables", f"`{table[:80]}` is no table name: `namespace.table`, letters, digits and `_`")
    for key, value in (cfg.model_extra or {}).items():
        if key.startswith(_TABLE_PREFIX) and key.endswith(".partition-by"):
            _partition_problems(key, split_transforms(str(value)), add)
    _partition_problems("iceberg.tables.default-partition-by", cfg.default_partition_by, add)
    _catalog_problems(cfg, add)
    return found


def _partition_problems(key: str, specs: list[str], add: Any) -> None:
    try:
        partition_fields(specs)
    except ValueError as exc:
        add(key, str(exc))


def _catalog_problems(cfg: IcebergSinkConfig, add: Any) -> None:
    if cfg.catalog_impl and cfg.catalog_impl not in JAVA_CATALOGS:
        add(
            "iceberg.catalog.catalog-impl",
            f"only the catalogs {', '.join(JAVA_CATALOGS)} are known; other classes are code this sink does not load",
        )
    kind = cfg.kind
    if kind is None and not cfg.catalog_impl:
        add("iceberg.catalog.type", f"name the catalog: one of {', '.join(CATALOG_TYPES)}")
    elif kind is not None and kind not in CATALOG_TYPES:
        add(
            "iceberg.catalog.type",
            f"`{kind[:40]}` is not one of the catalogs this sink loads ({', '.join(CATALOG_TYPES)})",
        )
    for name in cfg.catalog_extras():
        key = CATALOG_PREFIX + name
        if name.startswith("py-") or "impl" in name:
            add(key, "names code for pyiceberg to load; refused (the catalog is chosen by `iceberg.catalog.type`)")
        elif name not in _PASSED:
            add(
                key,
                f"is not a catalog setting this sink passes on ({', '.join((*_TYPED, *_PASSED))})",
            )
    io_impl = (cfg.model_extra or {}).get(CATALOG_PREFIX + "io-impl")
    if io_impl is not None and io_impl not in _JAVA_FILE_IOS:
        add(
            CATALOG_PREFIX + "io-impl", "names code to load; refused (tables are written by pyiceberg's pyarrow FileIO)"
        )
    uri = cfg.catalog_uri
    if uri is None:
        if kind in ("sql", "rest", "hive"):
            add("iceberg.catalog.uri", f"a `{kind}` catalog needs its URI")
    elif "${" not in uri:
        if kind == "sql":
            m = _SQL_URI.fullmatch(uri)
            if m is None:
                add(
                    "iceberg.catalog.uri",
                    "a sql catalog lives in PostgreSQL: `postgresql+psycopg2://host:port/db` or "
                    "`jdbc:postgresql://host:port/db` (no other database, no file)",
                )
            elif m["query"]:
                params = [p.split("=", 1)[0] for p in m["query"].split("&") if p]
                refused = [p for p in params if p not in _SQL_PARAMS]
                if refused:
                    add("iceberg.catalog.uri", f"parameters {refused} are refused (allowed: {', '.join(_SQL_PARAMS)})")
        elif kind == "rest" and not re.match(r"https?://", uri):
            add("iceberg.catalog.uri", "a rest catalog's URI is `http://…` or `https://…`")
        elif kind == "hive" and not uri.startswith("thrift://"):
            add("iceberg.catalog.uri", "a hive catalog's URI is `thrift://host:port`")
    warehouse = cfg.catalog_warehouse
    if warehouse is None:
        add("iceberg.catalog.warehouse", "name the directory the tables' files go to (inside `file.allowed.paths`)")
    elif "://" in warehouse and "${" not in warehouse:
        add(
            "iceberg.catalog.warehouse",
            "a directory on the worker, written as a path (no `file://` or object-store URI: files on object "
            "storage are not written by this sink yet)",
        )
