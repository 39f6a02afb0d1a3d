"""Formats: a chunk of records (an Arrow table of their values) as the bytes of one object.

Parquet is written by pyarrow as it is. JSON lines follow Kafka's `JsonConverter` (schemas off), as
Confluent's `JsonFormat` writes them: a timestamp is its epoch milliseconds, a date its days since
the epoch, bytes are base64, a decimal is a number; gzipped on request (`s3.compression.type`).
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import gzip
import io
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["Format"]

#: Parquet codec → the extension Confluent's ParquetFormat puts before `.parquet` (parquet-mr's names).
_CODEC_EXTENSIONS = {
    "none": "",
    "uncompressed": "",
    "snappy": ".snappy",
    "gzip": ".gz",
    "zstd": ".zstd",
    "lz4": ".lz4raw",
    "brotli": ".br",
}
_EPOCH_DATE = dt.date(1970, 1, 1)
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


@dataclass(frozen=True)
class Format:
    name: str  # "parquet" or "json"
    codec: str = "snappy"
    #: JSON only (`s3.compression.type`): `gzip` or `none`.
    compression: str = "none"

    @property
    def extension(self) -> str:
        if self.name == "json":
            return ".json.gz" if self.compression == "gzip" else ".json"
        return _CODEC_EXTENSIONS[self.codec] + ".parquet"

    def payload(self, table: Any) -> Callable[[Any], None]:
        """What writes `table` to an output stream."""
        if self.name == "parquet":
            import pyarrow.parquet as pq

            codec = "none" if self.codec == "uncompressed" else self.codec
            return lambda out: pq.write_table(table, out, compression=codec)
        if self.compression == "gzip":
            return lambda out: out.write(_gzipped(table))
        return lambda out: _json_lines(table, out)


def _gzipped(table: Any) -> bytes:
    """The JSON lines gzipped with no timestamp in the header: a rerun writes the very same bytes."""
    buffer = io.BytesIO()
    _json_lines(table, buffer)
    return gzip.compress(buffer.getvalue(), mtime=0)


def _json_lines(table: Any, out: Any) -> None:
    for batch in table.to_batches(max_chunksize=10_000):
        lines = [
            json.dumps(row, default=_json_value, ensure_ascii=False, separators=(",", ":")) for row in batch.to_pylist()
        ]
        if lines:
            out.write(("\n".join(lines) + "\n").encode("utf-8"))


def _json_value(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        aware = value if value.tzinfo else value.replace(tzinfo=dt.UTC)
        return (aware - _EPOCH) // dt.timedelta(milliseconds=1)
    if isinstance(value, dt.date):
        return (value - _EPOCH_DATE).days
    if isinstance(value, dt.time):
        return (value.hour * 3600 + value.minute * 60 + value.second) * 1000 + value.microsecond // 1000
    if isinstance(value, decimal.Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, dt.timedelta):
        return int(value.total_seconds() * 1000)
    raise TypeError(f"{type(value).__name__} has no JSON form")
