"""The Delta sink's config: `delta.*` keys, shaped as the Iceberg sink's `iceberg.tables.*` ones.

Where a table lives is one of two keys, so that each is checked by the rule that fits it: a table
on the worker's disk is `delta.table.path`, a `LocalPath` the runtime confines to
`file.allowed.paths` (at create and again where the task runs, as the file connectors' `filename`);
a table on object storage is `delta.table.uri` (`s3://bucket/prefix`). Either may hold `${topic}`,
replaced by the records' topic after the sink's transforms (a `RegexRouter` renames tables as it
does the JDBC sink's), so one connector fills one table per topic.

`delta.storage.*` are passed to delta-rs as storage options, through an allow-list: delta-rs
would also take options that read a file of the worker (`aws_web_identity_token_file`, a profile),
fetch credentials from another address (`aws_container_credentials_*`, the metadata endpoint) or
send every request through a proxy. `problems` reports every problem by its key, at create (the
connector's `validate`) and again where the task runs (a placeholder is filled only there); it
never shows a value of a storage option, which may be a credential.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

from pydantic import Field

from connect_core.sdk import LocalPath, SinkConnectorConfig, TopicList
from connect_core.sdk.config import is_placeholder

__all__ = ["STORAGE_OPTIONS", "STORAGE_PREFIX", "TOPIC", "DeltaSinkConfig", "problems"]

STORAGE_PREFIX = "delta.storage."
#: Replaced by the records' topic (after the sink's transforms) in a table's path or URI.
TOPIC = "${topic}"
#: The storage options passed to delta-rs (AWS S3 and S3-compatible stores), lower-case; an
#: upper-case key (`AWS_REGION`, as delta-rs also reads them) is the same option.
STORAGE_OPTIONS = (
    "aws_access_key_id",
    "aws_secret_access_key",
    "aws_session_token",
    "aws_region",
    "aws_endpoint_url",
    "aws_allow_http",
    "aws_virtual_hosted_style_request",
    "aws_s3_allow_unsafe_rename",
    "aws_conditional_put",
    "aws_s3_locking_provider",
    "delta_dynamo_table_name",
)
#: Options that are true or false.
_FLAGS = ("aws_allow_http", "aws_virtual_hosted_style_request", "aws_s3_allow_unsafe_rename")
#: Options known to read the worker's files, fetch credentials elsewhere or reroute requests.
_ELSEWHERE = (
    "aws_web_identity_token_file",
    "aws_profile",
    "aws_container_credentials_relative_uri",
    "aws_container_credentials_full_uri",
    "aws_metadata_endpoint",
    "aws_imdsv1_fallback",
    "aws_role_arn",
    "aws_role_session_name",
    "aws_sts_endpoint",
    "proxy_url",
    "proxy_ca_certificate",
    "proxy_excludes",
)
_SCHEMES = ("s3", "s3a")
#: Column names used in SQL predicates (merge) and as partition directories: identifiers only.
COLUMN = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")


class DeltaSinkConfig(SinkConnectorConfig):
    table_path: LocalPath | None = Field(
        default=None,
        alias="delta.table.path",
        description="A table on the worker's disk: its directory, inside `file.allowed.paths`; `${topic}` in it "
        "is replaced by the records' topic (one table per topic). Give this or `delta.table.uri`.",
    )
    table_uri: str | None = Field(
        default=None,
        alias="delta.table.uri",
        max_length=2048,
        description="A table on S3 or an S3-compatible store: `s3://bucket/prefix/table` (`${topic}` as in "
        "`delta.table.path`), reached with the `delta.storage.*` options.",
    )
    auto_create: bool = Field(
        default=False,
        alias="delta.tables.auto-create-enabled",
        description="Create a missing table from the records' columns (in the commit of its first rows).",
    )
    evolve_schema: bool = Field(
        default=False,
        alias="delta.tables.evolve-schema-enabled",
        description="Add new columns and widen types (byte→short→int→long, float→double, decimal precision up); "
        "off, a record with a column the table lacks fails the run.",
    )
    id_columns: TopicList = Field(
        default_factory=list,
        alias="delta.tables.id-columns",
        description="Key columns of the tables, for upserts and deletes; default: the record key's fields.",
    )
    partition_by: TopicList = Field(
        default_factory=list,
        alias="delta.tables.partition-by",
        description="Partition columns of a table the sink creates (Delta partitions by column values).",
    )
    upsert: bool = Field(
        default=False,
        alias="delta.tables.upsert-mode-enabled",
        description="Each record replaces the row of its key (the newest per key of a batch wins), by one merge.",
    )
    cdc_field: str | None = Field(
        default=None,
        alias="delta.tables.cdc-field",
        description="Column holding the change's op (`c`, `r`, `u`, `d`): `d` deletes the key, the others upsert "
        "it. Tombstones and `__deleted`=`true` rows delete too.",
    )
    vacuum_retention_hours: int = Field(
        default=168,
        alias="delta.vacuum.retention-hours",
        ge=1,
        le=87_600,
        description="Vacuum removes files no version newer than this many hours needs (Delta's default: a week). "
        "At least an hour: a younger file may belong to a commit still in flight.",
    )
    optimize_target_size: int | None = Field(
        default=None,
        alias="delta.optimize.target-file-size",
        ge=1_048_576,
        le=2**30,
        description="Optimize (compaction) writes files of about this many bytes (default delta-rs's, 100 MiB; "
        "at most 1 GiB).",
    )

    @property
    def upserts(self) -> bool:
        """Whether records change rows by key (upsert or CDC) rather than being appended."""
        return self.upsert or bool(self.cdc_field)

    @property
    def location(self) -> str:
        """The configured table location (a path or a URI, maybe with `${topic}`)."""
        return str(self.table_path if self.table_path is not None else self.table_uri)

    @property
    def is_local(self) -> bool:
        return self.table_path is not None

    def storage_options(self) -> dict[str, str]:
        """The `delta.storage.*` options, by their lower-case delta-rs name (checked by `problems`)."""
        extra = self.model_extra or {}
        return {
            k[len(STORAGE_PREFIX) :].lower(): _text(v)
            for k, v in extra.items()
            if k.startswith(STORAGE_PREFIX) and v is not None
        }


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def problems(cfg: DeltaSinkConfig) -> dict[str, list[str]]:
    """Every problem of `cfg` pydantic cannot see, by config key (a storage option's value is never
    shown: it may be a credential)."""
    found: dict[str, list[str]] = {}

    def add(key: str, problem: str) -> None:
        found.setdefault(key, []).append(problem)

    if (cfg.table_path is None) == (cfg.table_uri is None):
        both = "not both" if cfg.table_path is not None else "one of them"
        add(
            "delta.table.path",
            f"name where the table lives: `delta.table.path` (on the worker) or `delta.table.uri` (S3), {both}",
        )
    if cfg.table_path is not None:
        _path_problems(cfg.table_path, add)
    if cfg.table_uri is not None:
        _uri_problems(cfg.table_uri, add)
    for key, names in (("delta.tables.id-columns", cfg.id_columns), ("delta.tables.partition-by", cfg.partition_by)):
        for name in names:
            if not COLUMN.fullmatch(name):
                add(key, f"`{name[:60]}` is no column name this sink takes: letters, digits and `_`")
    if cfg.cdc_field is not None and not cfg.cdc_field.strip():
        add("delta.tables.cdc-field", "name the column holding the change's op, or leave the key out")
    _storage_problems(cfg, add)
    return found


def _path_problems(path: str, add: Any) -> None:
    if is_placeholder(path):
        return  # filled where the task runs, and checked there
    if "://" in path:
        add("delta.table.path", "a directory on the worker, written as a path (a table on S3 is `delta.table.uri`)")
    if path.count("${") > path.count(TOPIC) or any(TOPIC in p and p != TOPIC for p in path.split("/")):
        add("delta.table.path", "`${topic}` (the only `${…}` here) must be a whole directory name (`/lake/${topic}`)")


def _uri_problems(uri: str, add: Any) -> None:
    if is_placeholder(uri):
        return  # filled where the task runs, and checked there
    if "\x00" in uri or any(c.isspace() for c in uri):
        add("delta.table.uri", "a table URI holds no blanks or NUL bytes")
        return
    parts = urlsplit(uri)
    if parts.scheme not in _SCHEMES:
        add(
            "delta.table.uri",
            "a table on object storage is `s3://bucket/path` (a table on the worker's disk is `delta.table.path`; "
            "other stores are not supported yet)",
        )
        return
    if parts.username is not None or parts.password is not None or parts.query or parts.fragment:
        add("delta.table.uri", "`s3://bucket/path` only: credentials go in `delta.storage.*`, no query or fragment")
    if not _BUCKET.fullmatch(parts.hostname or "") or "${" in (parts.netloc or ""):
        add("delta.table.uri", "the bucket is 3-63 lower-case letters, digits, `.` and `-`")
    segments = [s for s in parts.path.split("/") if s]
    if not segments:
        add("delta.table.uri", "name the table's prefix inside the bucket (`s3://bucket/lake/table`)")
    if any(s in (".", "..") for s in segments):
        add("delta.table.uri", "no `.` or `..` parts")
    if any(TOPIC in s and s != TOPIC for s in segments) or uri.count("${") > uri.count(TOPIC):
        add("delta.table.uri", "`${topic}` must be a whole part of the path (`s3://bucket/lake/${topic}`)")


def _storage_problems(cfg: DeltaSinkConfig, add: Any) -> None:
    for key, value in (cfg.model_extra or {}).items():
        if not key.startswith(STORAGE_PREFIX):
            continue
        name = key[len(STORAGE_PREFIX) :].lower()
        if cfg.is_local:
            add(key, "a table on the worker's disk takes no storage options")
        elif name in _ELSEWHERE:
            add(key, "makes delta-rs read a file of the worker, fetch credentials or send requests elsewhere: refused")
        elif name not in STORAGE_OPTIONS:
            add(key, f"is not a storage option this sink passes on ({', '.join(STORAGE_OPTIONS)})")
        elif not isinstance(value, str | bool):
            add(key, "must be a string")
        elif isinstance(value, str) and is_placeholder(value):
            continue
        elif name in _FLAGS and _text(value).lower() not in ("true", "false"):
            add(key, "must be `true` or `false`")
        elif name == "aws_endpoint_url":
            _endpoint_problems(key, str(value), add)
        elif name == "aws_s3_locking_provider" and value != "dynamodb":
            add(key, "the only locking provider is `dynamodb`")
        elif name == "aws_conditional_put" and value not in ("etag", "disabled"):
            add(key, "`etag` or `disabled`")


def _endpoint_problems(key: str, value: str, add: Any) -> None:
    parts = urlsplit(value)
    try:
        parts.port  # noqa: B018  (a port that is no number raises here)
        valid = True
    except ValueError:
        valid = False
    if (
        not valid
        or parts.scheme not in ("http", "https")
        or not parts.hostname
        or parts.username is not None
        or parts.password is not None
        or parts.path not in ("", "/")
        or parts.query
        or parts.fragment
    ):
        add(key, "an S3-compatible endpoint: `http(s)://host[:port]`, no credentials, path or query")
