"""Kafka's Filter: drops records. Alone it drops every record; with a predicate, those it holds for
(`negate`: those it does not), as in Kafka's own example:

    transforms=dropFoo
    transforms.dropFoo.type=Filter
    transforms.dropFoo.predicate=isFoo
    predicates=isFoo
    predicates.isFoo.type=TopicNameMatches
    predicates.isFoo.pattern=foo.*
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from connect_core.sdk.transforms import Transformation, TransformConfig, column

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import Column, DataFrame

__all__ = ["Filter"]


class FilterConfig(TransformConfig):
    """Filter has no options."""


class Filter(Transformation[FilterConfig]):
    config_model = FilterConfig
    only_filters = True
    doc = "Drop records: all of them, or with a predicate those it holds for."

    def spark(self, df: DataFrame) -> dict[str, Column]:

        return {name: column(name) for name in df.columns}

    def arrow(self, batch: pa.RecordBatch) -> dict[str, pa.Array]:
        return {name: batch.column(name) for name in batch.schema.names}

    def spark_keep(self, df: DataFrame) -> Column | None:
        from pyspark.sql import functions as F

        return F.lit(False)

    def arrow_keep(self, batch: pa.RecordBatch) -> pa.Array | None:
        import pyarrow as pa

        return pa.repeat(pa.scalar(False), batch.num_rows)
