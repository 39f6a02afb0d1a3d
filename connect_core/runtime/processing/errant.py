"""Records a transform cannot convert, under `errors.tolerance=all` (Kafka's KIP-298): set aside
with why, while the rest of the batch goes on.

In a tolerant chain a step whose `errors_spark`/`errors_arrow` flags rows does not fail the job: it
*marks* them. Its mark is a column, `__connect_errant_<i>` for step i, holding for each row that
first failed there the record as the step received it (a struct of the step's input columns), and
null on every other row. Later steps never see the marks (the chain carries them beside the
record), never drop a marked row and never mark it again: the first failing step wins, as a Kafka
record leaves the chain at its first failure. A batch on which no step can fail (no step declares
errors, or none can fail on the batch's types) gets no mark: it costs what it costs without
tolerance.

`split_spark` and `split_arrow` part a marked output into the good rows, without the marks, and
the marked ones as `ErrantRecords` (stage TRANSFORMATION, origin the failing step's class) for the
run's dead-letter reporter. Both work column-wise: no Python call per row.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from connect_core.sdk.errors import DataError
from connect_core.sdk.records import OFFSET_COLUMN, PARTITION_COLUMN, TOPIC_COLUMN, ErrantRecords
from connect_core.sdk.transforms import column, describe

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import Column, DataFrame

    from connect_core.runtime.processing.chain import Step

__all__ = [
    "MARK_PREFIX",
    "arrow_good",
    "arrow_mark",
    "arrow_unmarked",
    "mark_columns",
    "mark_name",
    "spark_around",
    "spark_mark",
    "spark_unmarked",
    "split_arrow",
    "split_spark",
]

MARK_PREFIX = "__connect_errant_"


def mark_name(index: int) -> str:
    """The mark column of the chain's step `index`."""
    return f"{MARK_PREFIX}{index}"


def mark_columns(names: Sequence[str]) -> list[str]:
    """The mark columns among `names`, in order."""
    return [name for name in names if name.startswith(MARK_PREFIX) and name.removeprefix(MARK_PREFIX).isdigit()]


# -- Spark ----------------------------------------------------------------------


def spark_unmarked(marks: Sequence[str]) -> Column:
    """True where no step has set the row aside."""
    from pyspark.sql import functions as F

    unmarked = F.lit(True)
    for mark in marks:
        unmarked = unmarked & column(mark).isNull()
    return unmarked


def spark_mark(record: DataFrame, failed: Column, marks: Sequence[str]) -> Column:
    """A step's mark: the record it received where it failed and no earlier step did. A key of
    no type (no source or transform set one) is left out, as the chain's output leaves it out."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import NullType

    fields = [column(f.name) for f in record.schema.fields if not isinstance(f.dataType, NullType)]
    return F.when(failed & spark_unmarked(marks), F.struct(*fields))


def spark_around(query: Callable[[DataFrame], DataFrame], df: DataFrame, marks: Sequence[str]) -> DataFrame:
    """A whole-batch step (a SQL query) over a marked batch: the query sees the rows not set aside,
    the rows set aside go around it with their marks (their record columns null). Both branches
    read `df`: persist it first."""
    from pyspark.sql import functions as F

    unmarked = spark_unmarked(marks)
    out = query(df.filter(unmarked).drop(*marks))
    no_marks = [F.lit(None).cast(df.schema[mark].dataType).alias(mark) for mark in marks]
    no_record = [F.lit(None).cast(f.dataType).alias(f.name) for f in out.schema.fields]
    kept = out.select(*[column(name) for name in out.columns], *no_marks)
    return kept.unionByName(df.filter(~unmarked).select(*no_record, *[column(mark) for mark in marks]))


def split_spark(
    df: DataFrame, steps: Sequence[Step], topic: str | None = None
) -> tuple[DataFrame, list[ErrantRecords]]:
    """The good rows of a chain's output (`df` itself when it has no marks) and the set-aside ones,
    collected by a job per failing step (persist `df` first: it is read again for the good rows).
    `topic` is where a sink read the rows (a router may have renamed them since)."""
    marks = mark_columns(df.columns)
    if not marks:
        return df, []
    errant = [
        _errant_records(df.filter(column(mark).isNotNull()).select(f"{mark}.*").toArrow(), mark, steps, topic)
        for mark in marks
    ]
    return df.filter(spark_unmarked(marks)).drop(*marks), [e for e in errant if e is not None]


# -- Arrow ----------------------------------------------------------------------


def arrow_unmarked(rows: pa.RecordBatch | pa.Table, marks: Sequence[str]) -> Any:
    """True where no step has set the row aside (of a record batch, or a Table)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if not marks:
        return pa.repeat(pa.scalar(True), rows.num_rows)
    unmarked = rows.column(marks[0]).is_null()
    for mark in marks[1:]:
        unmarked = pc.and_(unmarked, rows.column(mark).is_null())
    return unmarked


def arrow_mark(record: pa.RecordBatch, failed: pa.Array, unmarked: pa.Array) -> pa.StructArray:
    """`spark_mark` over one record batch (`unmarked`: no earlier step set the row aside). The
    struct shares the record's column buffers: only its validity is new."""
    import pyarrow as pa
    import pyarrow.compute as pc

    fields = [i for i, f in enumerate(record.schema) if f.type != pa.null()]
    return pa.StructArray.from_arrays(
        [record.column(i) for i in fields],
        names=[record.schema.field(i).name for i in fields],
        mask=pc.invert(pc.and_(failed, unmarked)),
    )


def arrow_good(batch: pa.RecordBatch) -> pa.RecordBatch:
    """The rows of a marked batch no step set aside, without the marks."""
    marks = mark_columns(batch.schema.names)
    if not marks:
        return batch
    return batch.filter(arrow_unmarked(batch, marks)).drop_columns(marks)


def split_arrow(
    table: pa.Table, steps: Sequence[Step], topic: str | None = None
) -> tuple[pa.Table, list[ErrantRecords]]:
    """`split_spark` over a pyarrow Table (rows made in the driver)."""
    import pyarrow as pa

    marks = mark_columns(table.column_names)
    if not marks:
        return table, []
    errant = []
    for mark in marks:
        records = table.column(mark)
        errant.append(
            _errant_records(pa.Table.from_struct_array(records.filter(records.is_valid())), mark, steps, topic)
        )
    return table.filter(arrow_unmarked(table, marks)).drop_columns(marks), [e for e in errant if e is not None]


# -- the records set aside --------------------------------------------------------------


def _errant_records(rows: pa.Table, mark: str, steps: Sequence[Step], topic: str | None) -> ErrantRecords | None:
    """The records the step of `mark` set aside (as it received them), with why; None if none."""
    import pyarrow as pa

    if not rows.num_rows:
        return None
    if PARTITION_COLUMN in rows.column_names:  # a sink's: in the order they were read
        rows = rows.sort_by([(PARTITION_COLUMN, "ascending"), (OFFSET_COLUMN, "ascending")])
    if topic is not None and TOPIC_COLUMN in rows.column_names:
        at = rows.column_names.index(TOPIC_COLUMN)
        rows = rows.set_column(at, TOPIC_COLUMN, pa.array([topic] * rows.num_rows, pa.string()))
    step = steps[int(mark.removeprefix(MARK_PREFIX))]
    origin = describe(step.transform)
    message = f"transform `{step.alias}` ({origin}) could not convert the record"
    return ErrantRecords(rows, describe(DataError), message, stage="TRANSFORMATION", origin=origin)
