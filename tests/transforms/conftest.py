"""Every transform is checked by the same cases on both of its paths: Spark columns and Arrow batches.

`run_both(spark, chain, rows, schema)` transforms `rows` (dicts in a Spark DDL `schema`) through
the chain on a DataFrame and on an Arrow record batch, asserts that both give the same rows and
the same schema (as Spark types), and returns the rows (dicts, value and record columns).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from connect_core.runtime.processing.chain import Step, TransformChain
from connect_core.sdk.transforms import Predicate, Transformation, is_value_column


def chain(*steps: Transformation[Any] | Step) -> TransformChain:
    return TransformChain([s if isinstance(s, Step) else Step(f"t{i}", s) for i, s in enumerate(steps)])


def make(cls: type[Any], **options: Any) -> Any:
    """A transform or predicate of `cls` from Kafka-style options (`make(InsertFieldValue, **{"static.field": "x"})`)."""
    return cls(cls.config_model.model_validate(options))


def _plain(value: Any) -> Any:
    """Rows from Spark (Row objects) and from Arrow (dicts, lists of tuples) in one comparable shape."""
    if hasattr(value, "asDict"):
        return {k: _plain(v) for k, v in value.asDict().items()}
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def run_both(
    spark: Any, steps: TransformChain, rows: Sequence[Mapping[str, Any]], schema: str, topic: str | None = "t"
) -> list[dict[str, Any]]:
    import pyarrow as pa
    from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema

    df = spark.createDataFrame([tuple(r.get(f) for f in _names(spark, schema)) for r in rows], schema)
    out_df = steps.spark(df, topic)
    spark_rows = [_plain(r) for r in out_df.collect()]

    arrow_schema = to_arrow_schema(df.schema, timezone="UTC")
    batch = pa.RecordBatch.from_pylist([dict(r) for r in rows], schema=arrow_schema)
    out_batch = steps.arrow(batch, topic)
    arrow_rows = [_plain(r) for r in out_batch.to_pylist()]

    assert [f.name for f in out_df.schema.fields] == out_batch.schema.names, "column order differs"
    spark_types = {f.name: f.dataType.simpleString() for f in out_df.schema.fields}
    arrow_types = {f.name: f.dataType.simpleString() for f in from_arrow_schema(out_batch.schema).fields}
    assert spark_types == arrow_types, "types differ between the Spark and the Arrow path"
    assert _comparable(spark_rows) == _comparable(arrow_rows), "rows differ between the Spark and the Arrow path"
    assert steps.output_schema(df.schema, topic).simpleString() == out_df.schema.simpleString()
    return spark_rows


def _comparable(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Spark gives naive datetimes in the session's zone (UTC here), Arrow aware ones in UTC."""
    import datetime as dt

    def fix(v: Any) -> Any:
        if isinstance(v, dt.datetime) and v.tzinfo is not None:
            return v.astimezone(dt.UTC).replace(tzinfo=None)
        if isinstance(v, dict):
            return {k: fix(x) for k, x in v.items()}
        if isinstance(v, list):
            return [fix(x) for x in v]
        return v

    return [fix(r) for r in rows]


def _names(spark: Any, schema: str) -> list[str]:
    from pyspark.sql.types import _parse_datatype_string

    return [f.name for f in _parse_datatype_string(schema).fields]


def values(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The value columns of transformed rows (no record parts; `__deleted` and the like are values)."""
    return [{k: v for k, v in r.items() if is_value_column(k)} for r in rows]


@pytest.fixture
def both(spark: Any) -> Any:
    def run(steps: TransformChain | Transformation[Any], rows: Sequence[Mapping[str, Any]], schema: str, **kw: Any):  # type: ignore[no-untyped-def]
        return run_both(spark, steps if isinstance(steps, TransformChain) else chain(steps), rows, schema, **kw)

    return run


__all__ = ["Predicate", "Step", "chain", "make", "run_both", "values"]
