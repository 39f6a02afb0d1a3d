"""Reading and writing topic segments with Spark (runs inside the Spark driver).

Every row of a segment carries two bookkeeping columns: `__run` (the task run
that wrote it) and `__seq` (its order within the run's output, from
`monotonically_increasing_id`, computed in the JVM). A reader joins `__run` to
the committed segment's start offset and numbers rows by `__seq`, which gives
each row its exact offset without any ordering work at write time.
"""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

from connect_core.runtime.spark.session import default_parallelism
from connect_core.runtime.topics.files import RUN_COLUMN, SEQ_COLUMN, SPARK_SCHEMA_KEY, delete_file, local_dir
from connect_core.runtime.topics.store import Segment
from connect_core.sdk import is_connect
from connect_core.sdk.errors import FatalError
from connect_core.sdk.records import OFFSET_COLUMN, PARTITION_COLUMN, TOPIC_COLUMN, ArrowRecords, driver_max_rows

__all__ = [
    "RESERVED_COLUMNS",
    "arrow_topics",
    "delete_file",
    "delete_path",
    "read_segments",
    "read_topics",
    "write_segment",
]

RESERVED_COLUMNS = frozenset({RUN_COLUMN, SEQ_COLUMN, TOPIC_COLUMN, PARTITION_COLUMN, OFFSET_COLUMN})

log = logging.getLogger(__name__)


def write_segment(spark: SparkSession, records: DataFrame | ArrowRecords, path: str, run_id: int) -> int:
    """Write `records` as a Parquet segment at `path`; returns its row count (0: nothing written).

    ArrowRecords on a local path are written by the Python workers with pyarrow (the same
    files Spark would write, its schema with field metadata kept in the footer); anything
    else by Spark.

    Whatever already is at `path` is replaced: the path is this run's own (`TopicStore.segment_path`:
    its run id is new in its metadata database, whose cluster id is in the path), so files there
    were left by a run no committed segment names (a database restored from a backup reuses its
    run ids, a run was killed mid-write) and must neither block this run nor mix into its segment."""
    columns = records.schema.fieldNames() if isinstance(records, ArrowRecords) else records.columns
    clash = RESERVED_COLUMNS.intersection(columns)
    if clash:
        raise FatalError(f"source rows must not have the runtime's columns {sorted(clash)}; rename them")
    _remove_stale(spark, path)
    local = _local_dir(path)
    if isinstance(records, ArrowRecords):
        if local is not None:
            records.collect_mapped(_arrow_writer(records.schema, local, run_id), "rows long")
            return _row_count(spark, path)
        records = records.to_dataframe()
    df = records
    (
        df.withColumn(SEQ_COLUMN, F.monotonically_increasing_id())
        .withColumn(RUN_COLUMN, F.lit(run_id).cast("long"))
        .write.mode("error")  # errorifexists, by the name Spark Connect knows too
        .parquet(path)
    )
    return _row_count(spark, path)


def _remove_stale(spark: SparkSession, path: str) -> None:
    """Delete files an uncommitted run left at `path` (see `write_segment`)."""
    local = _local_dir(path)
    if local is not None:
        if Path(local).exists():
            log.warning("replacing files at %s left by a run that never committed", path)
            shutil.rmtree(local)
        return
    if _delete(spark, path):
        log.warning("replacing files at %s left by a run that never committed", path)


_local_dir = local_dir

#: Rows are gathered into Parquet row groups of about this many bytes (of Arrow memory): a producer's
#: small batches would otherwise make tiny row groups, slow to write and to read. Smaller than
#: Spark's `parquet.block.size` (128 MiB) so that one big file (a source that read in the driver)
#: still splits into several units of reading for a sink (`_file_units`).
ROW_GROUP_BYTES = 32 << 20


def _arrow_writer(schema: StructType, directory: str, run_id: int) -> Any:
    """The function each Spark partition (or the driver) runs over its produced batches: one
    Parquet file with `__seq` (as `monotonically_increasing_id` numbers it) and `__run`, written
    under a hidden name and renamed into place, so a retried task replaces its file instead of
    adding a second one. No dictionary encoding: the rows of a database table are mostly
    distinct, and measured on them it cost twice the CPU for a file no smaller."""
    spark_schema = StructType(
        [*schema.fields, StructField(SEQ_COLUMN, LongType()), StructField(RUN_COLUMN, LongType())]
    )
    footer = {SPARK_SCHEMA_KEY: spark_schema.json().encode()}

    def write(batches: Any) -> Any:
        import os
        import uuid

        import numpy as np
        import pyarrow as pa
        import pyarrow.parquet as pq
        from pyspark import TaskContext

        context = TaskContext.get()
        pid = context.partitionId() if context else 0
        os.makedirs(directory, exist_ok=True)
        final = os.path.join(directory, f"part-{pid:05d}.snappy.parquet")
        temp = os.path.join(directory, f".part-{pid:05d}-{uuid.uuid4().hex}.tmp")
        writer = None
        rows = 0
        group: list[Any] = []  # batches of the row group being gathered

        def flush() -> None:
            nonlocal writer
            if writer is None:
                writer = pq.ParquetWriter(
                    temp, group[0].schema.with_metadata(footer), compression="snappy", use_dictionary=False
                )
            writer.write_table(pa.Table.from_batches(group))
            group.clear()

        try:
            for batch in batches:
                if not batch.num_rows:
                    continue
                seq = pa.array(np.arange(rows, rows + batch.num_rows, dtype=np.int64) + (pid << _PID_SHIFT))
                run = pa.array(np.full(batch.num_rows, run_id, dtype=np.int64))
                group.append(
                    pa.RecordBatch.from_arrays(
                        [*batch.columns, seq, run], names=[*batch.schema.names, SEQ_COLUMN, RUN_COLUMN]
                    )
                )
                rows += batch.num_rows
                if sum(b.nbytes for b in group) >= ROW_GROUP_BYTES:
                    flush()
            if group:
                flush()
        except BaseException:
            if writer is not None:
                writer.close()
                os.unlink(temp)
            raise
        if writer is not None:
            writer.close()
            os.replace(temp, final)
        yield pa.RecordBatch.from_pydict({"rows": [rows]})

    return write


def _row_count(spark: SparkSession, path: str) -> int:
    """Rows in the Parquet files at `path`, from their footers (no data is read).

    Local paths are counted with pyarrow in the driver (milliseconds); other
    file systems through a Spark job, which plans the same footer-only count.
    """
    local = _local_dir(path)
    if local is not None:
        return sum(pq.read_metadata(f).num_rows for f in Path(local).glob("*.parquet"))
    return spark.read.parquet(path).count()


def read_segments(spark: SparkSession, segments: Sequence[Segment]) -> DataFrame:
    """The rows of `segments` with `__topic`, `__partition` and exact `__offset` columns."""
    frames = list(read_topics(spark, segments).values())
    joined = frames[0]
    for frame in frames[1:]:
        joined = joined.unionByName(frame, allowMissingColumns=True)
    return joined


def read_topics(spark: SparkSession, segments: Sequence[Segment]) -> dict[str, DataFrame]:
    """Each topic's rows of `segments` (its own columns) with `__topic`, `__partition`, exact `__offset`.

    `__seq` is `monotonically_increasing_id`: (Spark partition << 33) + row number within it,
    dense inside each partition. A row's offset is the segment's start + the rows of the
    segment's lower partitions + its row number: the per-partition counts come from one
    aggregate over the two bookkeeping columns (no sort, no shuffle of the rows).
    """
    if not segments:
        raise ValueError("read_segments needs at least one segment")
    frames = {}
    for topic in sorted({s.topic for s in segments}):
        mine = [s for s in segments if s.topic == topic]
        schema = _footer_schema(mine)
        reader = spark.read.schema(schema) if schema is not None else spark.read.option("mergeSchema", "true")
        df = reader.parquet(*[s.path for s in mine])
        pid = F.shiftright(F.col(SEQ_COLUMN), _PID_SHIFT)
        bases = _offset_bases(mine, _footer_counts(mine) or _counted(df))
        index = spark.createDataFrame(
            [(run, p, base, partition) for (run, p), (base, partition) in bases.items()],
            f"{RUN_COLUMN} long, __pid long, __base long, {PARTITION_COLUMN} int",
        )
        within = F.col(SEQ_COLUMN) - F.shiftleft(F.col("__pid"), _PID_SHIFT)
        frames[topic] = (
            df.withColumn("__pid", pid)
            .join(F.broadcast(index), on=[RUN_COLUMN, "__pid"])
            .withColumn(TOPIC_COLUMN, F.lit(topic))
            .withColumn(OFFSET_COLUMN, F.col("__base") + within)
            .drop("__pid", "__base", RUN_COLUMN, SEQ_COLUMN)
        )
    return frames


def arrow_topics(
    spark: SparkSession, segments: Sequence[Segment], frames: dict[str, DataFrame]
) -> dict[str, ArrowRecords]:
    """Each topic of `segments` as ArrowRecords with the columns of its DataFrame in `frames`: the
    Parquet files spread over Spark partitions (one each when they are few), read by pyarrow in
    the worker, offsets from the footers.
    Topics on other file systems (or with files lacking statistics) are left out."""
    from pyspark.sql.pandas.types import to_arrow_schema

    found = {}
    for topic, frame in frames.items():
        mine = [s for s in segments if s.topic == topic]
        files: list[tuple[str, int, int, int]] = []  # (file, shift from __seq to offset, topic partition, groups)
        counts: dict[tuple[int, int], int] = {}
        listed = [(seg, _segment_files(seg)) for seg in mine]
        if any(f is None or any(pid is None for _, pid, _, _ in f) for _, f in listed):
            continue
        for seg, seg_files in listed:
            for _, pid, rows, _groups in seg_files or []:
                assert pid is not None
                counts[seg.run_id, pid] = counts.get((seg.run_id, pid), 0) + rows
        bases = _offset_bases(mine, counts)
        for seg, seg_files in listed:
            for file, pid, _, groups in seg_files or []:
                assert pid is not None
                base, partition = bases[seg.run_id, pid]
                files.append((file, base - (pid << _PID_SHIFT), partition, groups))
        if not files:
            continue
        # a file per Spark partition, several when there are many (small) files, or a file's row
        # groups over several when there are few (one big file written by the driver)
        wanted = max(2, 2 * default_parallelism(spark))
        units = _file_units(files, wanted)
        slots = min(len(units), wanted)
        schema = frame.schema
        found[topic] = ArrowRecords(
            spark,
            units,
            _FILE_UNITS,
            _file_reader(topic, to_arrow_schema(schema, timezone="UTC")),
            schema,
            partitions=slots,
            in_driver=sum(s.row_count for s in mine) <= driver_max_rows(spark),
        )
    return found


_FILE_UNITS = StructType(
    [
        StructField("file", StringType()),
        StructField("shift", LongType()),
        StructField("partition", IntegerType()),
        StructField("first_group", IntegerType()),
        StructField("groups", IntegerType()),
    ]
)


def _file_units(files: Sequence[tuple[str, int, int, int]], wanted: int) -> list[tuple[str, int, int, int, int]]:
    """Units of reading (file, shift, partition, first row group, row groups): one per file, the
    biggest split in halves by row groups while there are fewer units than `wanted`."""
    units = [(file, shift, partition, 0, groups) for file, shift, partition, groups in files]
    while len(units) < wanted:
        i = max(range(len(units)), key=lambda k: units[k][4])
        file, shift, partition, first, groups = units[i]
        if groups < 2:
            break
        half = groups // 2
        units[i : i + 1] = [
            (file, shift, partition, first, half),
            (file, shift, partition, first + half, groups - half),
        ]
    return units


def _file_reader(topic: str, schema: Any) -> Any:
    """Read each input file's rows in `schema`'s columns: `__offset` = `__seq` + the file's shift;
    columns a file lacks (written before the topic gained them) are nulls."""

    def read(inputs: Any) -> Any:
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc
        import pyarrow.parquet as pq

        for batch in inputs:
            units = zip(*(batch.column(i).to_pylist() for i in range(5)), strict=True)
            for file, shift, partition, first, groups in units:
                parquet = pq.ParquetFile(file)
                present = set(parquet.schema_arrow.names)
                wanted = [f.name for f in schema if f.name in present]
                groups_read = list(range(first, first + groups))
                for rows in parquet.iter_batches(
                    batch_size=65_536, row_groups=groups_read, columns=[*wanted, SEQ_COLUMN]
                ):
                    n = rows.num_rows
                    columns = []
                    for field in schema:
                        if field.name == OFFSET_COLUMN:
                            column = pc.add(rows.column(SEQ_COLUMN), pa.scalar(shift, pa.int64()))
                        elif field.name == PARTITION_COLUMN:
                            column = pa.array(np.full(n, partition, dtype=np.int32)).cast(field.type)
                        elif field.name == TOPIC_COLUMN:
                            column = pa.array([topic] * n, field.type)
                        elif field.name in present:
                            column = rows.column(field.name)
                        else:
                            column = pa.nulls(n, field.type)
                        columns.append(column if column.type == field.type else column.cast(field.type))
                    yield pa.RecordBatch.from_arrays(columns, schema=schema)

    return read


def _footer_schema(segments: Sequence[Segment]) -> Any:
    """The segments' merged Spark schema from the schema Spark (or the Arrow writer) keeps in every
    file's footer, without the Spark job `mergeSchema` runs; None if a segment is not local, a
    file lacks it, or two files disagree on a column's type (Spark's merge then decides)."""
    fields: dict[str, Any] = {}
    for seg in segments:
        local = _local_dir(seg.path)
        if local is None:
            return None
        for file in sorted(Path(local).glob("*.parquet")):
            stored = (pq.read_schema(file).metadata or {}).get(SPARK_SCHEMA_KEY)
            if stored is None:
                return None
            for field in StructType.fromJson(json.loads(stored)).fields:
                if field.name not in fields:
                    fields[field.name] = field
                elif fields[field.name].dataType != field.dataType:
                    return None
    return StructType(list(fields.values())) if fields else None


def _counted(df: DataFrame) -> dict[tuple[int, int], int]:
    """Rows per (run, Spark partition id) by a Spark job over the two bookkeeping columns."""
    pid = F.shiftright(F.col(SEQ_COLUMN), _PID_SHIFT)
    rows = df.groupBy(RUN_COLUMN, pid.alias("__pid")).count().collect()
    return {(r[RUN_COLUMN], r["__pid"]): r["count"] for r in rows}


def _footer_counts(segments: Sequence[Segment]) -> dict[tuple[int, int], int] | None:
    """Rows per (run, Spark partition id) from the Parquet footers alone (a file is written by one
    task, so `__seq >> 33` is one number in it, read from its statistics); None if any segment
    is not local or a file lacks statistics."""
    counts: dict[tuple[int, int], int] = {}
    for seg in segments:
        files = _segment_files(seg)
        if files is None:
            return None
        for _, pid, rows, _groups in files:
            if pid is None:
                return None
            counts[seg.run_id, pid] = counts.get((seg.run_id, pid), 0) + rows
    return counts


def _segment_files(seg: Segment) -> list[tuple[str, int | None, int, int]] | None:
    """(file, Spark partition id or None if unknown, rows, row groups) of each non-empty Parquet file
    of a local segment."""
    local = _local_dir(seg.path)
    if local is None:
        return None
    found: list[tuple[str, int | None, int, int]] = []
    for file in sorted(Path(local).glob("*.parquet")):
        meta = pq.read_metadata(file)
        if not meta.num_rows:
            continue
        # A Parquet leaf column's index, not the Arrow field's: nested columns (headers) have several leaves.
        column = next((i for i in range(meta.num_columns) if meta.schema.column(i).path == SEQ_COLUMN), -1)
        pids: set[int] = set()
        for group in range(meta.num_row_groups):
            stats = meta.row_group(group).column(column).statistics if column >= 0 else None
            if stats is None or not stats.has_min_max:
                pids.add(-1)
                break
            pids.update({stats.min >> _PID_SHIFT, stats.max >> _PID_SHIFT})
        pid = pids.pop() if len(pids) == 1 and -1 not in pids else None
        found.append((str(file), pid, meta.num_rows, meta.num_row_groups))
    return found


def _offset_bases(
    segments: Sequence[Segment], counts: dict[tuple[int, int], int]
) -> dict[tuple[int, int], tuple[int, int]]:
    """(run, pid) → (offset of its first row, topic partition): a segment's rows in pid order."""
    start = {s.run_id: (s.start_offset, s.partition) for s in segments}
    bases: dict[tuple[int, int], tuple[int, int]] = {}
    running: dict[int, int] = {}
    for (run, pid), count in sorted(counts.items()):
        offset = running.get(run, start[run][0])
        bases[run, pid] = (offset, start[run][1])
        running[run] = offset + count
    return bases


_PID_SHIFT = 33  # monotonically_increasing_id: partition id in the upper 31 bits


def delete_path(spark: SparkSession, path: str) -> None:
    """Recursively delete `path` on whatever Hadoop file system it is on (on a Spark Connect
    session, which has no JVM here: on whatever file system pyarrow reaches it by)."""
    _delete(spark, path)


def _delete(spark: SparkSession, path: str) -> bool:
    """Recursively delete `path` if it exists; whether it did."""
    if is_connect(spark):
        return _arrow_delete(path)
    jvm: Any = spark.sparkContext._jvm
    hadoop_path = jvm.org.apache.hadoop.fs.Path(path)
    fs = hadoop_path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    return bool(fs.delete(hadoop_path, True))


def _arrow_delete(path: str) -> bool:
    """Recursively delete `path` (a URI) with pyarrow's file systems; True when something was deleted."""
    return delete_file(path)
