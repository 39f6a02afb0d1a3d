"""A segment's files without Spark: their size, their rows with exact offsets, a rewritten copy.

The cleaner (compaction, merging, `retention.bytes`) runs where no Spark is (the Airflow
triggerer, the REST server), so it reaches the files through pyarrow's file systems: a local
path, `hdfs://`, `s3://` (`s3a://` too), `gs://`, `abfs://`.

Offsets follow the reader's rule (`segments.read_topics`): a row's offset is its segment's start,
plus the rows of the segment's lower Spark partitions (`__seq >> 33`), plus its number within its
partition. A *rewritten* segment (compacted or merged) keeps every row's original offset by
writing its rows as one Spark partition (partition id 0) of its own run: `__run` = the segment's
run id, `__seq` = offset - the segment's start. Readers then give offset = start + `__seq`, gaps
(keys compacted away) included, with no change to how they read.
"""

from __future__ import annotations

import logging
import os
import posixpath
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pyarrow import fs

from connect_core.sdk.errors import FatalError

__all__ = ["SegmentFile", "delete_file", "layout", "path_bytes", "read_rows", "rewrite_path", "write_rewritten"]

log = logging.getLogger(__name__)

RUN_COLUMN = "__run"
SEQ_COLUMN = "__seq"
#: The footer key under which Spark (and the runtime's Arrow writer) keeps a Parquet file's Spark schema.
SPARK_SCHEMA_KEY = b"org.apache.spark.sql.parquet.row.metadata"
PID_SHIFT = 33  # monotonically_increasing_id: partition id in the upper 31 bits
#: Rewritten files gather rows into row groups of about this many bytes (as the Arrow writer does).
ROW_GROUP_BYTES = 32 << 20
#: Hadoop's names of S3 (`s3a://`), as pyarrow knows it.
_ARROW_SCHEMES = {"s3a": "s3", "s3n": "s3"}


def local_dir(path: str) -> str | None:
    """The local directory of a segment path, None on other file systems."""
    local = path[len("file://") :] if path.startswith("file://") else path
    return None if "://" in local else local


def filesystem(path: str) -> tuple[fs.FileSystem, str]:
    """pyarrow's file system of `path` (a URI or a local path) and the path within it."""
    local = local_dir(path)
    scheme, sep, rest = path.partition("://")
    uri = os.path.abspath(local) if local is not None else f"{_ARROW_SCHEMES.get(scheme.lower(), scheme)}{sep}{rest}"
    try:
        return fs.FileSystem.from_uri(uri)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OSError) as exc:
        raise FatalError(
            f"cannot reach the topic path `{path}` without Spark ({exc}): topics whose segments are compacted, "
            "merged or deleted outside Spark live on a file system pyarrow can reach (a local path, hdfs://, "
            "s3://, gs://, abfs://)"
        ) from exc


def delete_file(path: str) -> bool:
    """Recursively delete `path` (a URI), as Hadoop's `delete(path, true)`: nothing when it does not
    exist. True when something was deleted."""
    filesystem_, inner = filesystem(path)
    info = filesystem_.get_file_info(inner)
    if info.type == fs.FileType.NotFound:
        return False
    if info.type == fs.FileType.Directory:
        filesystem_.delete_dir(inner)
    else:
        filesystem_.delete_file(inner)
    return True


def _data_files(filesystem_: fs.FileSystem, inner: str) -> list[fs.FileInfo]:
    """The Parquet files of a segment directory, by name (Spark's `_SUCCESS`, `.crc` and hidden
    temporary files are not data)."""
    infos = filesystem_.get_file_info(fs.FileSelector(inner, allow_not_found=True))
    return sorted(
        (
            i
            for i in infos
            if i.type == fs.FileType.File and i.base_name.endswith(".parquet") and i.base_name[0] not in "._"
        ),
        key=lambda i: i.path,
    )


def path_bytes(path: str) -> int:
    """Bytes of the data files at `path` (0 when there are none)."""
    filesystem_, inner = filesystem(path)
    return sum(i.size or 0 for i in _data_files(filesystem_, inner))


@dataclass(frozen=True)
class SegmentFile:
    """One data file of a segment and how its `__seq` maps to offsets: offset = `__seq` + shift."""

    path: str  # within `filesystem`
    shift: int
    rows: int
    int96: bool  # timestamps stored as Spark's INT96 (a file Spark wrote)


def layout(path: str, start_offset: int) -> tuple[fs.FileSystem, list[SegmentFile]] | None:
    """The files of the segment at `path` whose first offset is `start_offset`, each with its shift;
    None when a file's Spark partition cannot be told from its `__seq` statistics, or when its
    timestamps could not be written back as they are (Spark's INT96 next to `timestamp_ntz`)."""
    filesystem_, inner = filesystem(path)
    found: list[tuple[str, int, int, bool]] = []  # (file, Spark partition, rows, int96)
    for info in _data_files(filesystem_, inner):
        with filesystem_.open_input_file(info.path) as handle:
            meta = pq.read_metadata(handle)
        if not meta.num_rows:
            continue
        pid = _partition_id(meta)
        if pid is None:
            return None
        columns = [meta.schema.column(i) for i in range(meta.num_columns)]
        int96 = any(c.physical_type == "INT96" for c in columns)
        if int96 and any('"isAdjustedToUTC":false' in c.logical_type.to_json().replace(" ", "") for c in columns):
            return None  # INT96 and local timestamps in one file: written back, both would be INT96
        found.append((info.path, pid, meta.num_rows, int96))
    counts: dict[int, int] = {}
    for _, pid, rows, _ in found:
        counts[pid] = counts.get(pid, 0) + rows
    bases, running = {}, start_offset
    for pid in sorted(counts):
        bases[pid] = running
        running += counts[pid]
    return filesystem_, [SegmentFile(f, bases[pid] - (pid << PID_SHIFT), rows, i96) for f, pid, rows, i96 in found]


def _partition_id(meta: Any) -> int | None:
    column = next((i for i in range(meta.num_columns) if meta.schema.column(i).path == SEQ_COLUMN), -1)
    if column < 0:
        return None
    pids: set[int] = set()
    for group in range(meta.num_row_groups):
        stats = meta.row_group(group).column(column).statistics
        if stats is None or not stats.has_min_max:
            return None
        pids.update({stats.min >> PID_SHIFT, stats.max >> PID_SHIFT})
    return pids.pop() if len(pids) == 1 else None


def _open(filesystem_: fs.FileSystem, file: SegmentFile) -> pq.ParquetFile:
    handle = filesystem_.open_input_file(file.path)
    return pq.ParquetFile(handle, coerce_int96_timestamp_unit="us" if file.int96 else None)


def read_rows(
    filesystem_: fs.FileSystem, files: Sequence[SegmentFile], columns: Sequence[str] | None = None
) -> Iterator[tuple[pa.RecordBatch, np.ndarray]]:
    """The segment's rows (`columns` of them, those a file has; None: all) and their offsets."""
    for file in files:
        parquet = _open(filesystem_, file)
        present = parquet.schema_arrow.names
        wanted = None if columns is None else [c for c in present if c in columns or c == SEQ_COLUMN]
        for batch in parquet.iter_batches(batch_size=65_536, columns=wanted, use_threads=True):
            seq = batch.column(batch.schema.get_field_index(SEQ_COLUMN)).to_numpy(zero_copy_only=False)
            yield batch, seq.astype(np.int64) + file.shift


def schema_of(filesystem_: fs.FileSystem, file: SegmentFile) -> pa.Schema:
    """A file's Arrow schema as this module reads it, with its footer metadata (Spark's schema)."""
    return _open(filesystem_, file).schema_arrow


def rewrite_path(path: str) -> str:
    """A new, unused directory next to the segment at `path` for its rewritten files."""
    return f"{posixpath.dirname(path.rstrip('/'))}/rewrite={uuid.uuid4().hex}"


def write_rewritten(
    path: str,
    schema: pa.Schema,
    rows: Iterable[tuple[pa.RecordBatch, np.ndarray]],
    *,
    run_id: int,
    start_offset: int,
    int96: bool,
) -> tuple[int, int]:
    """Write `rows` (batches of `schema`'s columns with their offsets) as one Parquet file of a new
    segment at `path` that starts at `start_offset`, each row keeping its offset (module doc).
    Written under a hidden name and renamed into place. (rows, bytes) written."""
    filesystem_, inner = filesystem(path)
    filesystem_.create_dir(inner, recursive=True)
    final = f"{inner}/part-00000.snappy.parquet"
    temp = f"{inner}/.part-00000-{uuid.uuid4().hex}.tmp"
    seq_at, run_at = schema.get_field_index(SEQ_COLUMN), schema.get_field_index(RUN_COLUMN)
    count, group = 0, []
    options: dict[str, Any] = {"compression": "snappy", "use_dictionary": False}
    if int96:  # as Spark wrote them: Spark reads its timestamps back with the same meaning
        options["use_deprecated_int96_timestamps"] = True
    with filesystem_.open_output_stream(temp) as sink, pq.ParquetWriter(sink, schema, **options) as writer:
        for batch, offsets in rows:
            if not batch.num_rows:
                continue
            arrays = [batch.column(schema.field(i).name) for i in range(len(schema))]
            arrays[seq_at] = pa.array(offsets - start_offset, pa.int64())
            arrays[run_at] = pa.array(np.full(batch.num_rows, run_id, dtype=np.int64))
            group.append(pa.RecordBatch.from_arrays(arrays, schema=schema))
            count += batch.num_rows
            if sum(b.nbytes for b in group) >= ROW_GROUP_BYTES:
                writer.write_table(pa.Table.from_batches(group))
                group.clear()
        if group:
            writer.write_table(pa.Table.from_batches(group))
    filesystem_.move(temp, final)
    return count, filesystem_.get_file_info(final).size or 0
