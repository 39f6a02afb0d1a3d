"""The S3 sink's config, keyed as Confluent's S3 sink (`io.confluent.connect.s3.S3SinkConnector`).

Every key that decides where an object lands (`topics.dir`, `path.format`, the partitioner) is
checked here, at create, so a stored config can only ever name keys under its own prefix; the
values records bring (a `FieldPartitioner`'s field) are encoded where they are read (`_keys`).
"""

from __future__ import annotations

import re
from typing import Literal
from urllib.parse import urlsplit

from pydantic import Field, field_validator, model_validator

from connect_core.connectors.objectstore._keys import check_prefix
from connect_core.connectors.objectstore._timefmt import translate_path_format
from connect_core.sdk import LocalPath
from connect_core.sdk.config import SinkConnectorConfig, TopicList, WholeNumber, is_placeholder

__all__ = ["FORMATS", "PARTITIONERS", "S3SinkConfig"]

_FORMAT_PACKAGE = "io.confluent.connect.s3.format."
#: `format.class` values (Confluent's class names and short names) → the format written.
FORMATS = {
    f"{_FORMAT_PACKAGE}parquet.ParquetFormat": "parquet",
    f"{_FORMAT_PACKAGE}json.JsonFormat": "json",
    "ParquetFormat": "parquet",
    "JsonFormat": "json",
    "parquet": "parquet",
    "json": "json",
}
_PARTITIONER_PACKAGE = "io.confluent.connect.storage.partitioner."
#: `partitioner.class` values → the partitioner (`default`, `field`, or a time-based one).
PARTITIONERS = {
    **{
        f"{_PARTITIONER_PACKAGE}{n}Partitioner": n.lower() for n in ("Default", "Field", "TimeBased", "Daily", "Hourly")
    },
    **{f"{n}Partitioner": n.lower() for n in ("Default", "Field", "TimeBased", "Daily", "Hourly")},
}
_TIME_BASED = ("timebased", "daily", "hourly")
#: Confluent's fixed layouts of the Daily and Hourly partitioners.
_FIXED = {
    "daily": ("'year'=YYYY/'month'=MM/'day'=dd", 86_400_000),
    "hourly": ("'year'=YYYY/'month'=MM/'day'=dd/'hour'=HH", 3_600_000),
}
_EXTRACTORS = {
    "Record": "record",
    "RecordField": "recordfield",
    "Wallclock": "wallclock",
    **{
        f"io.confluent.connect.storage.partitioner.TimeBasedPartitioner${n}TimestampExtractor": n.lower()
        for n in ("Record", "RecordField", "Wallclock")
    },
}
#: S3's bucket naming rule (3-63 characters, lower-case letters, digits, `.` and `-`).
_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
_REGION = re.compile(r"[a-z0-9-]{1,40}")
_LOCALE = re.compile(r"[A-Za-z]{2,8}(?:[_-][A-Za-z0-9]{1,8}){0,3}")
#: A field name read from the records: a top-level column, short and printable.
_FIELD = re.compile(r"[^\x00-\x1f/]{1,128}")
Codec = Literal["none", "uncompressed", "snappy", "gzip", "zstd", "lz4", "brotli"]


class S3SinkConfig(SinkConnectorConfig):
    s3_bucket_name: str | None = Field(
        default=None,
        alias="s3.bucket.name",
        description="The bucket objects are written to (needed unless `store.url` is a `file://` directory).",
    )
    s3_region: str = Field(default="us-east-1", alias="s3.region", description="The bucket's AWS region.")
    store_url: str | None = Field(
        default=None,
        alias="store.url",
        max_length=2048,
        description="An S3-compatible endpoint (`http://minio:9000`, `https://…`; default: AWS for `s3.region`), "
        "or `file:///dir` to write under a local or NFS directory instead of a bucket; that directory must be "
        "under the worker's `file.allowed.paths` (checked before the task starts).",
    )
    store_local_path: LocalPath | None = Field(
        default=None,
        alias="store.local.path",
        description="The local directory of a `file://` `store.url`, set from it for the tasks (it may be given "
        "instead of `store.url`; then it is checked against `file.allowed.paths` at create too).",
    )
    aws_access_key_id: str | None = Field(
        default=None,
        alias="aws.access.key.id",
        description="Access key id (masked; `${env:VAR}` or `${airflow:…}` keeps it out of the store). Without "
        "keys, the AWS SDK's default chain (environment, instance profile) applies.",
    )
    aws_secret_access_key: str | None = Field(
        default=None,
        alias="aws.secret.access.key",
        description="Secret access key (masked; give it through a config provider).",
    )
    topics_dir: str = Field(
        default="topics",
        alias="topics.dir",
        max_length=512,
        description="The prefix every object key starts with: `<topics.dir>/<topic>/<partition path>/<file>`.",
    )
    flush_size: WholeNumber = Field(
        alias="flush.size",
        ge=1,
        le=100_000_000,
        description="Most records per file: a topic partition's records are cut into files of this many, counted "
        "from the last committed offset (so a rerun cuts the same files).",
    )
    rotate_interval_ms: WholeNumber = Field(
        default=-1,
        alias="rotate.interval.ms",
        ge=-1,
        description="Also start a new file once a record's time (by `timestamp.extractor`) is this many ms past "
        "the time of its file's first record (-1: by `flush.size` only). Every run closes its files.",
    )
    format_class: str = Field(
        default=f"{_FORMAT_PACKAGE}parquet.ParquetFormat",
        alias="format.class",
        description="`io.confluent.connect.s3.format.parquet.ParquetFormat` (or `parquet`) or "
        "`io.confluent.connect.s3.format.json.JsonFormat` (or `json`: JSON lines).",
    )
    parquet_codec: Codec = Field(
        default="snappy",
        alias="parquet.codec",
        description="Parquet compression: none, snappy, gzip, zstd, lz4, brotli.",
    )
    s3_compression_type: Literal["none", "gzip"] = Field(
        default="none",
        alias="s3.compression.type",
        description="JSON objects: `gzip` (`.json.gz`) or `none`. Parquet is compressed by `parquet.codec`.",
    )
    partitioner_class: str = Field(
        default=f"{_PARTITIONER_PACKAGE}DefaultPartitioner",
        alias="partitioner.class",
        description="How records are laid out under their topic: `DefaultPartitioner` (`partition=<p>`), "
        "`FieldPartitioner` (`<field>=<value>`), `TimeBasedPartitioner`, `DailyPartitioner`, `HourlyPartitioner` "
        "(Confluent's class names, or these short ones).",
    )
    partition_field_name: TopicList = Field(
        default_factory=list,
        alias="partition.field.name",
        description="FieldPartitioner: the value fields (top-level) whose values name the directories, in order.",
    )
    path_format: str | None = Field(
        default=None,
        alias="path.format",
        max_length=256,
        description="TimeBasedPartitioner: the directories of a time bucket, a Joda pattern such as "
        "`'year'=YYYY/'month'=MM/'day'=dd/'hour'=HH` (letters y, Y, M, d, H, m, s; quoted literals).",
    )
    partition_duration_ms: WholeNumber | None = Field(
        default=None,
        alias="partition.duration.ms",
        ge=1,
        description="TimeBasedPartitioner: the length of a time bucket (Daily: a day, Hourly: an hour).",
    )
    locale: str | None = Field(
        default=None,
        alias="locale",
        description="TimeBasedPartitioner: the locale of the pattern (only numeric fields are supported, so it "
        "changes nothing; accepted for Confluent's configs).",
    )
    timezone: str | None = Field(
        default=None,
        alias="timezone",
        description="TimeBasedPartitioner: the time zone buckets are cut and named in (`UTC`, `Europe/Paris`).",
    )
    timestamp_extractor: str = Field(
        default="Wallclock",
        alias="timestamp.extractor",
        description="Time-based layout and `rotate.interval.ms`: `Record` (the record's timestamp), "
        "`RecordField` (`timestamp.field`), or `Wallclock` (the run's start; Confluent's default: a rerun after "
        "a crash in another bucket may place records twice, so use Record or RecordField for exactly once).",
    )
    timestamp_field: str | None = Field(
        default=None,
        alias="timestamp.field",
        description="RecordField: the value field holding the time (a timestamp, a date, or epoch ms).",
    )
    behavior_on_null_values: Literal["fail", "ignore"] = Field(
        default="fail",
        alias="behavior.on.null.values",
        description="A tombstone (a record with no value): `fail` the run, or `ignore` it.",
    )
    probe_timeout_ms: int = Field(
        default=5_000,
        alias="probe.timeout.ms",
        ge=0,
        le=15_000,
        description="At create, how long the check that the bucket exists may take (0: no check). At most 15 s: "
        "a REST request waits on it. Skipped when credentials are placeholders.",
    )

    # -- what the keys mean --------------------------------------------------

    @property
    def format(self) -> str:
        return FORMATS[self.format_class]

    @property
    def partitioner(self) -> str:
        return PARTITIONERS[self.partitioner_class]

    @property
    def extractor(self) -> str:
        return _EXTRACTORS[self.timestamp_extractor]

    @property
    def is_local(self) -> bool:
        return self.store_local_path is not None or (self.store_url or "").startswith("file:")

    def time_layout(self) -> tuple[str, int]:
        """(strftime pattern, bucket length in ms) of a time-based partitioner."""
        fixed = _FIXED.get(self.partitioner)
        fmt, duration = fixed if fixed else (self.path_format or "", self.partition_duration_ms or 0)
        return translate_path_format(fmt), duration

    # -- checks ----------------------------------------------------------------

    @field_validator("s3_bucket_name")
    @classmethod
    def _bucket(cls, value: str | None) -> str | None:
        if value is None or is_placeholder(value):
            return value
        if not _BUCKET.fullmatch(value) or ".." in value:
            raise ValueError("an S3 bucket name is 3-63 lower-case letters, digits, `.` and `-`")
        return value

    @field_validator("s3_region")
    @classmethod
    def _region(cls, value: str) -> str:
        if not (is_placeholder(value) or _REGION.fullmatch(value)):
            raise ValueError("a region is lower-case letters, digits and `-` (`eu-west-1`)")
        return value

    @field_validator("store_url")
    @classmethod
    def _store(cls, value: str | None) -> str | None:
        if value is None or is_placeholder(value):
            return value
        if "\x00" in value or any(c.isspace() for c in value):
            raise ValueError("a store URL holds no blanks or NUL bytes")
        parts = urlsplit(value)
        if parts.scheme == "file":
            local_path(value)  # raises
            return value
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("expected `http(s)://host[:port]` (an S3-compatible endpoint) or `file:///directory`")
        if parts.username is not None or parts.password is not None:
            raise ValueError(
                "credentials do not belong in `store.url`: use `aws.access.key.id` / `aws.secret.access.key`"
            )
        if parts.path not in ("", "/") or parts.query or parts.fragment:
            raise ValueError("an endpoint URL has no path, query or fragment: the bucket is `s3.bucket.name`")
        try:
            parts.port  # noqa: B018  (a port that is no number raises here)
        except ValueError as exc:
            raise ValueError(f"invalid port: {exc}") from None
        return value

    @field_validator("topics_dir")
    @classmethod
    def _topics_dir(cls, value: str) -> str:
        return check_prefix(value.strip("/"))

    @field_validator("format_class")
    @classmethod
    def _format(cls, value: str) -> str:
        if value not in FORMATS:
            raise ValueError(f"unknown format; one of: {', '.join(FORMATS)}")
        return value

    @field_validator("partitioner_class")
    @classmethod
    def _partitioner(cls, value: str) -> str:
        if value not in PARTITIONERS:
            raise ValueError(f"unknown partitioner; one of: {', '.join(PARTITIONERS)}")
        return value

    @field_validator("timestamp_extractor")
    @classmethod
    def _extractor(cls, value: str) -> str:
        if value not in _EXTRACTORS:
            raise ValueError("one of `Record`, `RecordField`, `Wallclock`")
        return value

    @field_validator("partition_field_name")
    @classmethod
    def _fields(cls, names: list[str]) -> list[str]:
        for name in names:
            _check_field(name)
        return names

    @field_validator("timestamp_field")
    @classmethod
    def _timestamp_field(cls, value: str | None) -> str | None:
        return None if value is None else _check_field(value)

    @field_validator("path_format")
    @classmethod
    def _path_format(cls, value: str | None) -> str | None:
        if value:
            translate_path_format(value)  # raises ValueError naming what it cannot translate
        return value

    @field_validator("timezone")
    @classmethod
    def _timezone(cls, value: str | None) -> str | None:
        if value is None:
            return None
        from zoneinfo import ZoneInfo

        try:
            if len(value) > 64 or "\x00" in value:
                raise ValueError
            ZoneInfo(value)
        except Exception:
            raise ValueError("unknown time zone: an IANA name such as `UTC` or `Europe/Paris`") from None
        return value

    @field_validator("locale")
    @classmethod
    def _locale(cls, value: str | None) -> str | None:
        if value is not None and value and not _LOCALE.fullmatch(value):
            raise ValueError("a locale such as `en`, `en_US` or `en-US`")
        return value

    @model_validator(mode="after")
    def _together(self) -> S3SinkConfig:
        """Cross-key rules; each raises alone, so they are ordered by what a user fixes first."""
        url = self.store_url or ""
        if self.store_local_path is not None:
            if (
                url
                and not is_placeholder(url)
                and (not url.startswith("file:") or local_path(url) != self.store_local_path)
            ):
                raise ValueError("`store.local.path` is the directory of a `file://` `store.url`: give one of them")
        elif not self.is_local and not self.s3_bucket_name:
            raise ValueError("`s3.bucket.name` is needed to write to S3 (or set `store.url` to a `file://` directory)")
        if (self.aws_access_key_id is None) != (self.aws_secret_access_key is None):
            raise ValueError("give both `aws.access.key.id` and `aws.secret.access.key`, or neither")
        if self.partitioner == "field" and not self.partition_field_name:
            raise ValueError("FieldPartitioner needs `partition.field.name`")
        if self.partitioner in _TIME_BASED:
            if self.timezone is None:
                raise ValueError(f"{self.partitioner_class} needs `timezone` (`UTC`, `Europe/Paris`)")
            if self.partitioner == "timebased" and not (self.path_format and self.partition_duration_ms):
                raise ValueError("TimeBasedPartitioner needs `path.format` and `partition.duration.ms`")
        if self.extractor == "recordfield" and not self.timestamp_field:
            raise ValueError("timestamp.extractor `RecordField` needs `timestamp.field`")
        return self


def _check_field(name: str) -> str:
    if not _FIELD.fullmatch(name):
        raise ValueError("a field name is 1-128 printable characters, without `/`")
    return name


def local_path(url: str) -> str:
    """The directory a `file://` store URL names; ValueError unless it is an absolute path on this host
    without `.`/`..` parts (where it really is, symlinks resolved, the runtime checks against
    `file.allowed.paths` before a task starts)."""
    from urllib.parse import unquote

    parts = urlsplit(url)
    if parts.netloc not in ("", "localhost") or parts.query or parts.fragment:
        raise ValueError("a local store is `file:///absolute/directory` (no host, query or fragment)")
    path = unquote(parts.path)
    if not path.startswith("/") or "\x00" in path or any(p in (".", "..") for p in path.split("/")):
        raise ValueError("a local store is `file:///absolute/directory`, without `.` or `..` parts")
    return path.rstrip("/") or "/"
