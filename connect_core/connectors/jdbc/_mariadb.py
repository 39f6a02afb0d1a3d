"""MariaDB/MySQL's fast path: every slice of a window read by connectorx, in its own Spark partition.

connectorx (Rust) reads the MySQL protocol straight into Arrow, where Spark's JDBC
reader makes a Java object of every value and converts it twice more on the way
to Parquet. The topic's types stay the ones Spark's JDBC reader gives (the schema
comes from it, no rows read): a column connectorx would not give exactly is
selected in a form it does (DECIMAL and BIGINT UNSIGNED as text, TIMESTAMP as
epoch microseconds) and cast by pyarrow, which refuses anything inexact. A table
with a column of any other type (BIT, ENUM, SET, spatial) stays on the JDBC path.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from connect_core.sdk.errors import FatalError, RetriableError

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql.types import StructType

__all__ = ["READABLE", "reader", "select_list"]

#: information_schema `data_type`s this path reads (JSON is LONGTEXT; TIME and YEAR arrive as text).
READABLE = frozenset(
    [
        "tinyint",
        "smallint",
        "mediumint",
        "int",
        "bigint",
        "decimal",
        "float",
        "double",
        "boolean",
        "char",
        "varchar",
        "tinytext",
        "text",
        "mediumtext",
        "longtext",
        "date",
        "datetime",
        "timestamp",
        "time",
        "year",
        "binary",
        "varbinary",
        "tinyblob",
        "blob",
        "mediumblob",
        "longblob",
    ]
)

#: Rows per Arrow batch.
BATCH_ROWS = 65_536


def select_list(schema: StructType, quote: Callable[[str], str]) -> str | None:
    """The columns of `schema` as connectorx reads them exactly; None if a Spark type is not one this path gives."""
    from pyspark.sql import types as T

    plain = (
        T.BooleanType,
        T.ByteType,
        T.ShortType,
        T.IntegerType,
        T.LongType,
        T.FloatType,
        T.DoubleType,
        T.StringType,
        T.BinaryType,
        T.DateType,
        T.TimestampNTZType,
    )
    items = []
    for field in schema.fields:
        q = quote(field.name)
        if isinstance(field.dataType, T.DecimalType):
            items.append(f"CAST({q} AS CHAR) AS {q}")  # connectorx fixes decimals at scale 10
        elif isinstance(field.dataType, T.TimestampType):  # MariaDB TIMESTAMP: an instant, whatever the session zone
            items.append(f"CAST(UNIX_TIMESTAMP({q}) * 1000000 AS SIGNED) AS {q}")
        elif isinstance(field.dataType, plain):
            items.append(q)
        else:
            return None
    return ", ".join(items)


def reader(url: str, host: str, schema: pa.Schema) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """The function every Spark partition runs: for each SELECT in its input, the rows as batches of `schema`."""

    def read(inputs: Iterator[Any]) -> Iterator[Any]:
        for batch in inputs:
            for statement in batch.column(0).to_pylist():
                yield from _read(url, host, statement, schema)

    return read


def _read(url: str, host: str, statement: str, schema: pa.Schema) -> Iterator[Any]:
    import connectorx as cx
    import pyarrow as pa

    try:
        batches = cx.read_sql(url, statement, return_type="arrow_stream", batch_size=BATCH_ROWS)
    except RuntimeError as exc:
        raise _error(exc, host) from None
    for batch in batches:
        try:
            columns = [_cast(column, field.type) for column, field in zip(batch.columns, schema, strict=True)]
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            raise FatalError(f"{host}: a value read does not convert exactly to its column's type: {exc}") from None
        yield pa.RecordBatch.from_arrays(columns, schema=schema)


def _cast(column: Any, target: pa.DataType) -> Any:
    import pyarrow as pa
    import pyarrow.compute as pc

    if column.type == target:
        return column
    if pa.types.is_boolean(target):  # TINYINT(1): any non-zero is true, as MariaDB's driver reads it
        return pc.not_equal(column, 0)
    return column.cast(target)  # safe: overflow or a lost digit raises


def _error(exc: RuntimeError, host: str) -> Exception:
    """connectorx's error text (the server's message; never the URL) as a clear error."""
    text = str(exc)
    lower = text.lower()
    if "access denied" in lower:
        return FatalError(f"{host} refused the login: wrong user or password")
    if "could not connect" in lower or "connection refused" in lower or "timed out" in lower:
        return RetriableError(f"cannot reach the database at {host}")
    return FatalError(f"{host}: reading failed: {text[:500]}")
