"""PostgreSQL's fast path: psycopg2 for small queries, `COPY … TO STDOUT` for rows.

Spark's JDBC reader turns every value into a Java object and back; a COPY in
CSV parsed by pyarrow (in each Spark partition, C++ all the way) reads the same
rows at several times the speed. The Spark types are the ones Spark's own
PostgreSQL dialect gives (so a topic looks the same whichever path wrote it);
a column of any other type (arrays, ranges, …) sends the table down the JDBC
path instead.
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from connect_core.sdk.errors import FatalError, RetriableError

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql.types import StructType

__all__ = ["arrow_schema", "connect", "copy_reader", "spark_schema"]

#: Session settings that make COPY's text exact and parseable: ISO dates, UTC, shortest-exact floats, hex bytea.
SESSION = "-c client_encoding=UTF8 -c DateStyle=ISO -c TimeZone=UTC -c extra_float_digits=3 -c bytea_output=hex"


def connect(dsn: dict[str, str], host: str) -> Any:
    """A psycopg2 connection; a refused login or an unreachable server as a clear error (no password)."""
    import psycopg2

    try:
        return psycopg2.connect(**dsn, options=SESSION)
    except psycopg2.OperationalError as exc:
        text = str(exc).lower()
        if "password" in text or "authentication" in text:
            raise FatalError(f"{host} refused the login: wrong user or password") from None
        first = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else type(exc).__name__
        raise RetriableError(f"cannot reach the database at {host}: {first}") from None


# type OID → Spark type name, as Spark's PostgresDialect maps them (timestamps with preferTimestampNTZ)
_SPARK_TYPES = {
    16: "BooleanType",  # bool
    17: "BinaryType",  # bytea
    18: "StringType",  # "char"
    19: "StringType",  # name
    20: "LongType",  # int8
    21: "ShortType",  # int2
    23: "IntegerType",  # int4
    25: "StringType",  # text
    26: "LongType",  # oid
    114: "StringType",  # json
    142: "StringType",  # xml
    700: "FloatType",  # float4
    701: "DoubleType",  # float8
    1042: "StringType",  # bpchar
    1043: "StringType",  # varchar
    1082: "DateType",
    1114: "TimestampNTZType",
    1184: "TimestampType",  # timestamptz: an instant
    2950: "StringType",  # uuid
    3802: "StringType",  # jsonb
}
_NUMERIC = 1700


def spark_schema(description: Any) -> StructType | None:
    """The Spark schema of a psycopg2 cursor description; None if a column has a type this path does not read."""
    from pyspark.sql import types as T

    fields = []
    for col in description:
        dtype: T.DataType
        if col.type_code == _NUMERIC:
            precision, scale = col.precision, col.scale
            # numeric without a precision: Spark's dialect reads it as decimal(38,18)
            dtype = T.DecimalType(38, 18) if not precision or precision > 38 else T.DecimalType(precision, scale or 0)
        elif col.type_code in _SPARK_TYPES:
            dtype = getattr(T, _SPARK_TYPES[col.type_code])()
        else:
            return None
        fields.append(T.StructField(col.name, dtype, True))
    return T.StructType(fields)


def arrow_schema(schema: StructType) -> pa.Schema:
    """The Arrow schema Spark's `mapInArrow` expects for `schema` (timestamps with a zone in UTC)."""
    import pyarrow as pa
    from pyspark.sql import types as T

    simple: dict[type[T.DataType], pa.DataType] = {
        T.BooleanType: pa.bool_(),
        T.BinaryType: pa.binary(),
        T.StringType: pa.string(),
        T.ByteType: pa.int8(),
        T.ShortType: pa.int16(),
        T.IntegerType: pa.int32(),
        T.LongType: pa.int64(),
        T.FloatType: pa.float32(),
        T.DoubleType: pa.float64(),
        T.DateType: pa.date32(),
        T.TimestampNTZType: pa.timestamp("us"),
        T.TimestampType: pa.timestamp("us", tz="UTC"),
    }
    fields = []
    for f in schema.fields:
        if isinstance(f.dataType, T.DecimalType):
            arrow = pa.decimal128(f.dataType.precision, f.dataType.scale)
        else:
            arrow = simple[type(f.dataType)]
        fields.append(pa.field(f.name, arrow))
    return pa.schema(fields)


def copy_reader(dsn: dict[str, str], host: str, schema: pa.Schema) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """The function every Spark partition runs: for each `COPY … TO STDOUT` in its input, the rows as Arrow batches."""

    def read(inputs: Iterator[Any]) -> Iterator[Any]:
        for batch in inputs:
            for statement in batch.column(0).to_pylist():
                yield from _copy_out(dsn, host, statement, schema)

    return read


def _copy_out(dsn: dict[str, str], host: str, statement: str, schema: pa.Schema) -> Iterator[Any]:
    """Run one COPY in a thread writing into a pipe; pyarrow's streaming CSV reader parses the other end."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    read_end, write_end = os.pipe()
    failure: list[BaseException] = []

    def produce() -> None:
        try:
            with open(write_end, "wb", buffering=1 << 20) as out:
                conn = connect(dsn, host)
                try:
                    with conn.cursor() as cur:
                        cur.copy_expert(statement, out, size=1 << 20)
                finally:
                    conn.close()
        except BrokenPipeError:
            pass  # the reader stopped (it raises its own error)
        except BaseException as exc:
            failure.append(exc)

    decoded = {f.name: f.type for f in schema}
    binary = [f.name for f in schema if f.type == pa.binary()]
    for name in binary:
        decoded[name] = pa.string()  # `\x…` hex text, decoded below
    thread = threading.Thread(target=produce, name="copy-out", daemon=True)
    thread.start()
    try:
        # Buffered: a read of a block waits for the whole block, so pyarrow parses 8 MiB at a time, not
        # whatever the pipe held (batches of a few hundred rows, each a Parquet row group downstream).
        with open(read_end, "rb", buffering=1 << 20) as source:
            reader = pacsv.open_csv(
                source,
                read_options=pacsv.ReadOptions(column_names=schema.names, block_size=8 << 20),
                parse_options=pacsv.ParseOptions(newlines_in_values=True),
                convert_options=pacsv.ConvertOptions(
                    column_types=decoded,
                    null_values=[""],
                    true_values=["t"],
                    false_values=["f"],
                    strings_can_be_null=True,
                    quoted_strings_can_be_null=False,
                ),
            )
            for batch in reader:
                if binary:
                    batch = pa.RecordBatch.from_arrays(
                        [
                            _unhex(c) if n in binary else c
                            for n, c in zip(batch.schema.names, batch.columns, strict=True)
                        ],
                        schema=schema,
                    )
                yield batch
    except pa.ArrowInvalid as exc:
        thread.join()
        if failure:
            raise failure[0] from None
        raise FatalError(f"{host}: a value COPY returned does not parse as its column's type: {exc}") from None
    thread.join()
    if failure:
        raise failure[0]


def _unhex(column: Any) -> Any:
    """PostgreSQL's `\\x0a1b…` bytea text as binary, vectorized (numpy over the string buffer)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    digits = pc.utf8_slice_codeunits(column, 2)  # drop "\x"
    digits = pa.concat_arrays([digits]) if digits.offset else digits
    validity, offsets_buf, data_buf = digits.buffers()
    offsets = np.frombuffer(offsets_buf, dtype=np.int32, count=len(digits) + 1)
    data = np.frombuffer(data_buf, dtype=np.uint8, count=int(offsets[-1])) if data_buf else np.zeros(0, np.uint8)
    data = data[offsets[0] :]
    nibble = _nibbles()[data]
    raw = (nibble[0::2] << 4) | nibble[1::2]
    return pa.Array.from_buffers(
        pa.binary(),
        len(digits),
        [validity, pa.py_buffer(((offsets - offsets[0]) // 2).astype(np.int32)), pa.py_buffer(raw.astype(np.uint8))],
        null_count=digits.null_count,
    )


@functools.cache
def _nibbles() -> Any:
    import numpy as np

    table = np.zeros(256, dtype=np.uint8)
    for i, ch in enumerate("0123456789abcdef"):
        table[ord(ch)] = i
        table[ord(ch.upper())] = i
    return table
