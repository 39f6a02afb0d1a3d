"""A connector's transforms, in order, applied to a whole batch: on Spark DataFrames or on Arrow
record batches, with the same meaning.

Each transform is one projection (or one filter). A transform with a predicate applies only to the
rows the predicate holds for (`negate` flips it): its output columns are merged with the input's
column by column (`when(p, new).otherwise(old)`; a column only the transform makes is null where
it did not apply, one it drops is kept where it did not). A record in Kafka has its own schema, a
row here shares the batch's: where the two branches give a column different types, the column
takes the transform's type (the other branch's values are cast to it).

A record a step cannot convert (its `errors_spark`/`errors_arrow`) fails the job under
`errors.tolerance=none`, naming the step and the record's offset. A chain built with `tolerate`
marks it instead and goes on; the caller sets the marked rows aside (see `errant`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from connect_core.runtime.processing.errant import (
    arrow_mark,
    arrow_unmarked,
    mark_columns,
    mark_name,
    spark_around,
    spark_mark,
    spark_unmarked,
)
from connect_core.runtime.processing.records import with_record_parts_arrow, with_record_parts_spark
from connect_core.sdk.errors import ConnectError
from connect_core.sdk.records import OFFSET_COLUMN
from connect_core.sdk.transforms import KEY_COLUMN, DataError, Predicate, Transformation, column, describe

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import Column, DataFrame
    from pyspark.sql.types import StructType

__all__ = ["TRANSFORM_FAILURE", "Step", "TransformChain", "TransformError"]


class TransformError(DataError):
    """A transform failed on a batch; says which one (its alias and class)."""

    def __init__(self, alias: str, transform: object, cause: BaseException) -> None:
        self.alias = alias
        self.transform_class = describe(transform)
        super().__init__(f"transform `{alias}` ({self.transform_class}) failed: {type(cause).__name__}: {cause}")


@dataclass(frozen=True)
class Step:
    alias: str
    transform: Transformation[Any]
    predicate: Predicate[Any] | None = None
    negate: bool = False


class TransformChain:
    """The transforms of one side of a connector (a source's before the topic, a sink's after it)."""

    def __init__(self, steps: Sequence[Step], *, tolerate: bool = False) -> None:
        self.steps = tuple(steps)
        #: `errors.tolerance=all`: a record a step cannot convert is marked, not failed (see `errant`).
        self.tolerate = tolerate

    def __bool__(self) -> bool:
        return bool(self.steps)

    @property
    def arrow_capable(self) -> bool:
        """Whether the chain can run on Arrow batches (no step is a whole-batch query)."""
        return not any(step.transform.whole_batch for step in self.steps)

    @property
    def routes(self) -> bool:
        """Whether a record's topic may change (then the output is grouped by `__topic` again)."""
        return any(step.transform.routes for step in self.steps)

    def routed_topics(self, topics: Sequence[str]) -> list[str] | None:
        """The topics records of `topics` can end up in, known from the names alone: routers that
        rename by name (RegexRouter) are applied, a router with a predicate keeps the old name as a
        possibility too; None when a router depends on the records (TimestampRouter)."""
        current = list(dict.fromkeys(topics))
        for step in self.steps:
            if not step.transform.routes:
                continue
            routed = [step.transform.route_topic(t) for t in current]
            if any(r is None for r in routed):
                return None
            new = [r for r in routed if r is not None]
            current = list(dict.fromkeys([*current, *new] if step.predicate is not None else new))
        return current

    # -- Spark ----------------------------------------------------------------

    def spark(self, df: DataFrame, topic: str | None = None, cache: list[DataFrame] | None = None) -> DataFrame:
        """`df` transformed; record parts it lacks are added first (`__topic` as `topic` if given).
        A whole-batch step after a step that marked rows reads its input twice (`spark_around`):
        given `cache`, that input is persisted and added to it, for the caller to unpersist."""
        df = with_record_parts_spark(df, topic)
        for index, step in enumerate(self.steps):
            try:
                df = self._spark_step(index, step, df, cache)
            except ConnectError as exc:
                raise TransformError(step.alias, step.transform, exc) from exc
            except Exception as exc:  # Spark's AnalysisException and the like: the data does not fit
                raise TransformError(step.alias, step.transform, exc) from exc
        return _drop_void_key_spark(df)

    def _spark_step(self, index: int, step: Step, df: DataFrame, cache: list[DataFrame] | None) -> DataFrame:
        from pyspark.sql import functions as F

        marks = mark_columns(df.columns)
        if step.transform.whole_batch:
            query = step.transform.spark_frame
            if not marks:
                return with_record_parts_spark(query(df))
            if cache is not None:
                df = df.persist()
                cache.append(df)
            return spark_around(lambda rows: with_record_parts_spark(query(rows)), df, marks)
        record = df.drop(*marks) if marks else df  # a step sees the record, never the marks of earlier steps
        where: Column | None = None
        if step.predicate is not None:
            where = step.predicate.spark(record)
            where = ~where if step.negate else where
        failed = _spark_failed(step, record, where)
        if failed is not None and self.tolerate:
            df = df.withColumn(mark_name(index), spark_mark(record, failed, marks))
            marks = [*marks, mark_name(index)]
        elif failed is not None:
            df = df.filter(_spark_raise(step, record, failed))
        keep = step.transform.spark_keep(record)
        if keep is not None:
            # a filter drops the rows it does not keep, where its predicate holds; never a marked one
            drop = ~F.coalesce(keep, F.lit(False))
            drop = drop & where if where is not None else drop
            df = df.filter(~(drop & spark_unmarked(marks)) if marks else ~drop)
            if step.transform.only_filters:
                return df
            record = df.drop(*marks) if marks else df  # the rows kept, then projected
            if step.predicate is not None:
                where = step.predicate.spark(record)
                where = ~where if step.negate else where
        kept_marks = [column(mark) for mark in marks]
        out = step.transform.spark(record)
        if where is None:
            return df.select(*[col.alias(name) for name, col in out.items()], *kept_marks)
        projected = record.select(*[col.alias(name) for name, col in out.items()])
        types = {f.name: f.dataType for f in projected.schema.fields}
        merged: list[Column] = []
        for name, col in out.items():
            if name in record.columns:
                old = column(name)
                if record.schema[name].dataType != types[name]:
                    old = old.cast(types[name])
                merged.append(F.when(where, col).otherwise(old).alias(name))
            else:
                merged.append(F.when(where, col).alias(name))
        merged += [F.when(~where, column(name)).alias(name) for name in record.columns if name not in out]
        return df.select(*merged, *kept_marks)

    # -- Arrow ----------------------------------------------------------------

    def arrow(self, batch: pa.RecordBatch, topic: str | None = None) -> pa.RecordBatch:
        """One record batch transformed, as `spark` transforms a DataFrame."""
        if not self.arrow_capable:
            raise RuntimeError("this chain has a whole-batch step (SQL); run it on a DataFrame")
        batch = with_record_parts_arrow(batch, topic)
        for index, step in enumerate(self.steps):
            try:
                batch = self._arrow_step(index, step, batch)
            except ConnectError as exc:
                raise TransformError(step.alias, step.transform, exc) from exc
            except Exception as exc:  # pyarrow's ArrowInvalid and the like
                raise TransformError(step.alias, step.transform, exc) from exc
        return _drop_void_key_arrow(batch)

    def _arrow_step(self, index: int, step: Step, batch: pa.RecordBatch) -> pa.RecordBatch:
        import pyarrow as pa
        import pyarrow.compute as pc

        marks = mark_columns(batch.schema.names)
        record = batch.drop_columns(marks) if marks else batch
        where = None
        if step.predicate is not None:
            where = step.predicate.arrow(record)
            where = pc.invert(where) if step.negate else where
        failed = _arrow_failed(step, record, where)
        if failed is not None and self.tolerate:
            batch = batch.append_column(mark_name(index), arrow_mark(record, failed, arrow_unmarked(batch, marks)))
            marks = [*marks, mark_name(index)]
        elif failed is not None:
            _arrow_raise(step, record, failed)
        keep = step.transform.arrow_keep(record)
        if keep is not None:
            keep = pc.fill_null(keep, False)
            if where is not None:
                keep = pc.or_(keep, pc.invert(where))
            if marks:
                keep = pc.or_(keep, pc.invert(arrow_unmarked(batch, marks)))
            batch = batch.filter(keep)
            if step.transform.only_filters:
                return batch
            record = batch.drop_columns(marks) if marks else batch  # the rows kept, then projected
            where = where.filter(keep) if where is not None else None
        kept_marks = [batch.column(mark) for mark in marks]
        out = step.transform.arrow(record)
        if where is None:
            return pa.RecordBatch.from_arrays([*out.values(), *kept_marks], names=[*out, *marks])
        names, arrays = [], []
        for name, new in out.items():
            if name in record.schema.names:
                old = record.column(name)
                if old.type != new.type:  # cast where the step did not apply (where it did, a value may not convert)
                    old = pc.if_else(where, pa.nulls(len(old), old.type), old).cast(new.type)
                arrays.append(pc.if_else(where, new, old))
            else:
                arrays.append(pc.if_else(where, new, pa.nulls(len(new), new.type)))
            names.append(name)
        for name in record.schema.names:
            if name not in out:
                old = record.column(name)
                names.append(name)
                arrays.append(pc.if_else(where, pa.nulls(len(old), old.type), old))
        return pa.RecordBatch.from_arrays([*arrays, *kept_marks], names=[*names, *marks])

    def arrow_function(self, topic: str | None = None) -> Any:
        """A `mapInArrow`-style function (record batches → record batches) applying the chain."""

        def apply(batches: Any) -> Any:
            for batch in batches:
                yield self.arrow(batch, topic)

        return apply

    def output_schema(self, schema: StructType, topic: str | None = None) -> StructType:
        """The Spark schema of the chain's output for input rows of `schema`: the Arrow path run over
        an empty batch (transforms are column projections, so the schema does not depend on data)."""
        import pyarrow as pa
        from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema

        empty = pa.RecordBatch.from_pylist([], schema=to_arrow_schema(schema, timezone="UTC"))
        return from_arrow_schema(self.arrow(empty, topic).schema)


#: In the message of a record a transform could not convert (also when Spark raises it in a job).
TRANSFORM_FAILURE = "could not convert a record (errors.tolerance=none)"


def _failure_message(step: Step) -> str:
    return f"transform `{step.alias}` ({describe(step.transform)}) {TRANSFORM_FAILURE}"


def _spark_failed(step: Step, record: DataFrame, where: Column | None) -> Column | None:
    """True (never null) where the step cannot convert the row (a transform's `errors_spark`: a
    string that is no number for Cast), within its predicate; None when it cannot fail."""
    from pyspark.sql import functions as F

    errors = getattr(step.transform, "errors_spark", None)
    failed = errors(record) if errors is not None else None
    if failed is None:
        return None
    return F.coalesce(failed & where if where is not None else failed, F.lit(False))


def _spark_raise(step: Step, record: DataFrame, failed: Column) -> Column:
    """A filter that keeps every row and fails the job at the first failed one. A filter, not a
    column: a later step could drop a column, never a filter."""
    from pyspark.sql import functions as F

    message = F.lit(_failure_message(step))
    if OFFSET_COLUMN in record.columns:
        message = F.concat(message, F.lit(" at offset "), F.col(OFFSET_COLUMN).cast("string"))
    return F.when(failed, F.raise_error(message).cast("boolean")).otherwise(F.lit(True))


def _arrow_failed(step: Step, record: pa.RecordBatch, where: Any) -> Any:
    """`_spark_failed` over one record batch."""
    import pyarrow.compute as pc

    errors = getattr(step.transform, "errors_arrow", None)
    failed = errors(record) if errors is not None else None
    if failed is None:
        return None
    failed = pc.fill_null(failed, False)
    return pc.and_(failed, where) if where is not None else failed


def _arrow_raise(step: Step, record: pa.RecordBatch, failed: Any) -> None:
    """DataError at the first row of the batch the step cannot convert."""
    import pyarrow.compute as pc

    if pc.any(failed).as_py():
        index = pc.index(failed, True).as_py()
        names = record.schema.names
        at = f" at offset {record.column(OFFSET_COLUMN)[index].as_py()}" if OFFSET_COLUMN in names else ""
        raise DataError(_failure_message(step) + at)


def _drop_void_key_spark(df: DataFrame) -> DataFrame:
    """A key no source or transform set has no type (Parquet cannot store one): the row has no key."""
    from pyspark.sql.types import NullType

    if KEY_COLUMN in df.columns and isinstance(df.schema[KEY_COLUMN].dataType, NullType):
        return df.drop(KEY_COLUMN)
    return df


def _drop_void_key_arrow(batch: pa.RecordBatch) -> pa.RecordBatch:
    import pyarrow as pa

    index = batch.schema.get_field_index(KEY_COLUMN)
    if index >= 0 and batch.schema.field(index).type == pa.null():
        return batch.remove_column(index)
    return batch
