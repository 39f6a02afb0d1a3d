"""Partitioners: the directory (Confluent's "encoded partition") of every record of a batch.

Computed a column at a time over an Arrow table, so a million records cost a few vectorised
passes, not a million Python calls (except FieldPartitioner's encoding, once per distinct value).

* Default: `partition=<kafka partition>`.
* Field: `<field>=<value>` per `partition.field.name`, `/`-joined; values percent-encoded (`_keys`).
* TimeBased / Daily / Hourly: the record's time (`timestamp.extractor`) taken in `timezone`, cut
  down to its `partition.duration.ms` bucket as Confluent cuts it (in local time), formatted by
  the translated `path.format`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from connect_core.connectors.objectstore._keys import encode_value
from connect_core.connectors.objectstore.config import S3SinkConfig
from connect_core.sdk import DataError

__all__ = ["Layout"]

_TIMESTAMP = "__timestamp"


@dataclass(frozen=True)
class Layout:
    """What a partitioner needs from the config, as plain data (shipped to Spark's executors)."""

    partitioner: str
    fields: tuple[str, ...] = ()
    strftime: str = ""
    duration_ms: int = 0
    timezone: str = "UTC"
    extractor: str = "wallclock"
    timestamp_field: str | None = None
    rotate_interval_ms: int = -1
    #: Wallclock: the run's time in ms, fixed once per batch (Confluent reads the clock per record).
    wallclock_ms: int = 0

    @classmethod
    def from_config(cls, cfg: S3SinkConfig, wallclock_ms: int) -> Layout:
        strftime, duration = cfg.time_layout() if cfg.partitioner in ("timebased", "daily", "hourly") else ("", 0)
        return cls(
            cfg.partitioner,
            tuple(cfg.partition_field_name),
            strftime,
            duration,
            cfg.timezone or "UTC",
            cfg.extractor,
            cfg.timestamp_field,
            cfg.rotate_interval_ms,
            wallclock_ms,
        )

    @property
    def needs_time(self) -> bool:
        return self.duration_ms > 0 or self.rotate_interval_ms > 0

    # -- per record -------------------------------------------------------------

    def directories(self, table: Any, partition: int) -> list[str]:
        """The encoded partition of each row of `table` (one Kafka partition's rows)."""
        if self.partitioner == "default":
            return [f"partition={partition}"] * table.num_rows
        if self.partitioner == "field":
            return self._by_fields(table)
        return self._by_time(table)

    def times_ms(self, table: Any) -> Any:
        """Each row's time in epoch ms (a numpy int64 array), by `timestamp.extractor`."""
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        if self.extractor == "wallclock":
            return np.full(table.num_rows, self.wallclock_ms, dtype=np.int64)
        name = _TIMESTAMP if self.extractor == "record" else str(self.timestamp_field)
        if name not in table.column_names:
            raise DataError(f"timestamp field `{name}` is not a field of the records ({_shown(table)})")
        column = table.column(name)
        kind = column.type
        if pa.types.is_timestamp(kind):
            ms = pc.cast(pc.cast(column, pa.timestamp("ms", tz=kind.tz)), pa.int64())
        elif pa.types.is_date(kind):
            ms = pc.multiply(pc.cast(pc.cast(column, pa.date32()), pa.int64()), 86_400_000)
        elif pa.types.is_integer(kind):
            ms = pc.cast(column, pa.int64())
        else:
            raise DataError(f"timestamp field `{name}` is {kind}: expected a timestamp, a date or epoch milliseconds")
        if ms.null_count:
            raise DataError(f"timestamp field `{name}` is null in {ms.null_count} record(s): no time to place them by")
        return ms.to_numpy(zero_copy_only=False).astype(np.int64)

    def _by_fields(self, table: Any) -> list[str]:
        import pyarrow as pa

        parts: list[list[str]] = []
        for name in self.fields:
            if name not in table.column_names:
                raise DataError(f"partition field `{name}` is not a field of the records ({_shown(table)})")
            column = table.column(name)
            kind = column.type
            if not (
                pa.types.is_integer(kind)
                or pa.types.is_string(kind)
                or pa.types.is_large_string(kind)
                or pa.types.is_boolean(kind)
            ):
                raise DataError(
                    f"partition field `{name}` is {kind}: FieldPartitioner takes integers, strings and booleans"
                )
            # nulls kept as a dictionary entry of their own, so each distinct value is encoded once
            encoded = column.combine_chunks().dictionary_encode(null_encoding="encode")
            names = [f"{name}={encode_value(name, v)}" for v in encoded.dictionary.to_pylist()]
            parts.append([names[int(j)] for j in encoded.indices.to_numpy(zero_copy_only=False)])
        return ["/".join(p) for p in zip(*parts, strict=True)]

    def _by_time(self, table: Any) -> list[str]:
        """Confluent's bucket: the time in `timezone`, floored to the bucket length there, formatted."""
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        utc = pa.array(self.times_ms(table), pa.timestamp("ms", tz="UTC"))
        local_ms = pc.cast(pc.local_timestamp(pc.cast(utc, pa.timestamp("ms", tz=self.timezone))), pa.int64())
        ms = local_ms.to_numpy(zero_copy_only=False).astype(np.int64)
        floored = pa.array(ms - np.mod(ms, self.duration_ms), pa.int64()).cast(pa.timestamp("ms"))
        return list(pc.strftime(floored, format=self.strftime).to_pylist())


def _shown(table: Any) -> str:
    names = [n for n in table.column_names if not n.startswith("__")]
    return ", ".join(names[:20]) + (" …" if len(names) > 20 else "")
