"""Debezium's column masks (`column.mask.hash.*`, `column.mask.with.<n>.chars`,
`column.truncate.to.<n>.chars`), shared by the JDBC and CDC sources: the keys (`options`), and
their application where rows enter a topic, as Spark SQL (`spark`) or over Arrow (`arrow`)."""

from connect_core.connectors._masks.arrow import masked_array, masked_batch, masked_records, masked_struct
from connect_core.connectors._masks.options import (
    HASH_ALGORITHMS,
    ColumnMaskConfig,
    ColumnMasks,
    MaskRule,
    parse_masks,
    salt_of,
    shown_key,
)
from connect_core.connectors._masks.spark import masked_column, masked_field, masked_frame

__all__ = [
    "HASH_ALGORITHMS",
    "ColumnMaskConfig",
    "ColumnMasks",
    "MaskRule",
    "masked_array",
    "masked_batch",
    "masked_column",
    "masked_field",
    "masked_frame",
    "masked_records",
    "masked_struct",
    "parse_masks",
    "salt_of",
    "shown_key",
]
