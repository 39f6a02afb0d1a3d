"""Change events in Debezium's envelope, as Arrow: one topic per table.

A record's value is `before`, `after` (rows of the table, or null), `source` (where and when the
change was made), `op` (`r` snapshot read, `c` create, `u` update, `d` delete, `t` truncate) and
`ts_ms` (when the connector saw it); its key (`__key`) is the table's primary key. A delete is
followed by a tombstone: the same key, a null value (`__tombstone`), so a compacting or
deleting sink can drop the key.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from connect_core.connectors._masks import ColumnMasks
from connect_core.connectors.cdc._masked import annotated, masked_events
from connect_core.sdk import ArrowRecords
from connect_core.sdk.errors import ConfigError, DataError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "MYSQL_SOURCE",
    "POSTGRES_SOURCE",
    "UNAVAILABLE",
    "ChangeTable",
    "arrow_type",
    "check_topics",
    "from_text",
    "merged_columns",
    "records_of",
    "topic_for",
]

#: Debezium's stand-in for a value the log did not carry (an unchanged TOAST column).
UNAVAILABLE = "__debezium_unavailable_value"

#: The `source` fields every connector's events have (Debezium's common source block).
_SOURCE_COMMON = [
    ("version", pa.string()),
    ("connector", pa.string()),
    ("name", pa.string()),
    ("ts_ms", pa.int64()),
    ("snapshot", pa.string()),
    ("db", pa.string()),
]
#: A PostgreSQL event's `source`: its transaction and commit LSN.
POSTGRES_SOURCE = pa.struct(
    [*_SOURCE_COMMON, ("schema", pa.string()), ("table", pa.string()), ("txId", pa.int64()), ("lsn", pa.int64())]
)
#: A MySQL / MariaDB event's `source`: where its transaction begins in the binlog, and its GTID.
MYSQL_SOURCE = pa.struct(
    [
        *_SOURCE_COMMON,
        ("table", pa.string()),
        ("server_id", pa.int64()),
        ("gtid", pa.string()),
        ("file", pa.string()),
        ("pos", pa.int64()),
    ]
)

# PostgreSQL type OID → Arrow type of its value (the others travel as their text)
_ARROW = {
    16: pa.bool_(),
    17: pa.binary(),
    20: pa.int64(),
    21: pa.int16(),
    23: pa.int32(),
    26: pa.int64(),
    700: pa.float32(),
    701: pa.float64(),
    1082: pa.date32(),
    1114: pa.timestamp("us"),
    1184: pa.timestamp("us", tz="UTC"),
}


def topic_for(prefix: str, schema: str, table: str) -> str:
    """A table's topic, `<prefix>.<schema>.<table>`, with what a topic name cannot hold as `_`."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", f"{prefix}.{schema}.{table}")[:249]


def check_topics(prefix: str, tables: Iterable[tuple[str, str]]) -> None:
    """ConfigError naming the tables when two of `(schema, table)` go to one topic (`a b` and `a_b`,
    `"a.b".c` and `a."b.c"`, names alike for their first 249 characters): their events would be
    merged into one topic, and the snapshot keep one table's rows of a key."""
    seen: dict[str, str] = {}
    clashes: list[str] = []
    for schema, table in tables:
        topic, qualified = topic_for(prefix, schema, table), f"{schema!r}.{table!r}"
        other = seen.setdefault(topic, qualified)
        if other != qualified:
            clashes.append(f"tables {other} and {qualified} would both go to topic `{topic}`")
    if clashes:
        raise ConfigError(
            "; ".join(clashes) + ": leave one out (table.exclude.list) or rename it",
            {"table.include.list": clashes},
        )


def arrow_type(type_oid: int, typmod: int) -> pa.DataType:
    """The Arrow type a column's values take: numeric with a precision as a decimal, without one
    (any scale) as its exact text, as Debezium's `decimal.handling.mode=string`."""
    if type_oid == 1700:
        if typmod >= 4:
            precision, scale = ((typmod - 4) >> 16) & 0xFFFF, (typmod - 4) & 0xFFFF
            if 0 < precision <= 38:
                return pa.decimal128(precision, scale)
        return pa.string()
    return _ARROW.get(type_oid, pa.string())


class ChangeTable:
    """The change events of one table in one run, in commit order, kept column-wise.

    Rows (`before`, `after`) are tuples in the order of the columns `describe` last gave: typed
    Python values, or with `text` the database's text forms (PostgreSQL's output functions), cast
    to the columns' Arrow types by Arrow at the end, a column at a time. A table's columns may
    change mid-run (a column added, dropped or retyped): the events then carry the union, a
    retyped column as text."""

    def __init__(
        self,
        topic: str,
        columns: Sequence[tuple[str, pa.DataType]],
        key: Sequence[str],
        *,
        text: bool = False,
        source: pa.StructType = POSTGRES_SOURCE,
    ) -> None:
        self.topic, self.key, self.text, self.source_type = topic, tuple(key), text, source
        self.columns: list[tuple[str, pa.DataType]] = list(columns)
        self._incoming: list[tuple[str, pa.DataType]] = list(columns)
        self._remap: list[int | None] | None = None  # incoming position of each column, when they differ
        self._op: list[str | None] = []
        self._before: list[tuple[Any, ...] | None] = []
        self._after: list[tuple[Any, ...] | None] = []
        self._key_rows: list[tuple[Any, ...] | None] = []  # the row the key is taken from
        self._sources: list[dict[str, Any]] = []
        self._source_at: dict[int, int] = {}  # id of a source dict → its index (the dicts are kept alive)
        self._source: list[int | None] = []
        self._ts: list[int | None] = []
        self._tombstone: list[bool] = []

    def __len__(self) -> int:
        return len(self._op)

    def describe(self, columns: Sequence[tuple[str, pa.DataType]]) -> None:
        """The columns the next rows come in (the table's, as the log describes it now)."""
        columns = list(columns)
        if columns == self._incoming:
            return
        merged = merged_columns(self.columns, columns) if self._op else columns
        if merged != self.columns:
            moved = _positions(self.columns, merged)
            self._before = [_take(r, moved) for r in self._before]
            self._after = [_take(r, moved) for r in self._after]
            self._key_rows = [_take(r, moved) for r in self._key_rows]
            self.columns = merged
        self._incoming = columns
        positions = _positions(columns, merged)
        self._remap = None if positions == list(range(len(columns))) else positions

    def add(
        self,
        op: str,
        before: dict[str, Any] | None,
        after: dict[str, Any] | None,
        source: dict[str, Any],
        ts_ms: int,
        tombstone: bool = False,
    ) -> None:
        """An event whose rows are dicts by column name (typed values)."""
        names = [name for name, _ in self._incoming]
        self.add_row(
            op,
            None if before is None else tuple(before.get(n) for n in names),
            None if after is None else tuple(after.get(n) for n in names),
            source,
            ts_ms,
            tombstone,
        )

    def add_row(
        self,
        op: str,
        before: tuple[Any, ...] | None,
        after: tuple[Any, ...] | None,
        source: dict[str, Any],
        ts_ms: int,
        tombstone: bool = False,
    ) -> None:
        """An event whose rows are tuples in the described columns' order; with `tombstone` (a
        delete), its tombstone follows: the same key, a null value."""
        if self._remap is not None:
            before, after = _take(before, self._remap), _take(after, self._remap)
        index = self._source_at.get(id(source))
        if index is None:
            index = self._source_at[id(source)] = len(self._sources)
            self._sources.append(source)
        keyed = after if after is not None else before
        self._append(op, before, after, keyed, index, ts_ms, False)
        if tombstone and self.key and keyed is not None:
            self._append(None, None, None, keyed, None, None, True)

    def mark_last(self, **source: Any) -> None:
        """Change fields of the last event's `source` (a snapshot's last row: `snapshot="last"`)."""
        for at in range(len(self._op) - 1, -1, -1):
            index = self._source[at]
            if index is not None:
                self._sources.append({**self._sources[index], **source})
                self._source[at] = len(self._sources) - 1
                return

    def _append(
        self,
        op: str | None,
        before: tuple[Any, ...] | None,
        after: tuple[Any, ...] | None,
        keyed: tuple[Any, ...] | None,
        source: int | None,
        ts_ms: int | None,
        tombstone: bool,
    ) -> None:
        self._op.append(op)
        self._before.append(before)
        self._after.append(after)
        self._key_rows.append(keyed)
        self._source.append(source)
        self._ts.append(ts_ms)
        self._tombstone.append(tombstone)

    @property
    def schema(self) -> pa.Schema:
        value = pa.struct([(name, kind) for name, kind in self.columns])
        kinds = dict(self.columns)
        # a key column the log's descriptions lack (added to the table since): null, as text
        key = (
            pa.struct([(k, kinds.get(k, pa.string())) for k in self.key])
            if self.key
            else pa.struct([("__none", pa.null())])
        )
        return pa.schema(
            [
                ("before", value),
                ("after", value),
                ("source", self.source_type),
                ("op", pa.string()),
                ("ts_ms", pa.int64()),
                ("__key", key),
                ("__tombstone", pa.bool_()),
            ]
        )

    def table(self) -> pa.Table:
        """The events as one Arrow table of `schema` (without `__key` when the table has no key).
        With typed values, a column whose values are not all of its type (retyped in the log since
        those rows were written) becomes text."""
        while True:
            try:
                return self._table()
            except _Retyped as retyped:
                self.columns = [(n, pa.string() if n == retyped.name else k) for n, k in self.columns]

    def _table(self) -> pa.Table:
        schema = self.schema
        sources = pa.array(self._sources, self.source_type).take(pa.array(self._source, pa.int64()))
        key_positions = [i for i, (name, _) in enumerate(self.columns) if name in self.key]
        key_columns = [self.columns[i] for i in key_positions]
        arrays = [
            self._struct(self._before, self.columns),
            self._struct(self._after, self.columns),
            sources,
            pa.array(self._op, pa.string()),
            pa.array(self._ts, pa.int64()),
            self._struct([_take(r, key_positions) for r in self._key_rows], key_columns) if self.key else None,
            pa.array(self._tombstone, pa.bool_()),
        ]
        names = schema.names
        if not self.key:
            arrays.pop(5)
            names = [n for n in names if n != "__key"]
            schema = pa.schema([schema.field(n) for n in names])
        return pa.Table.from_arrays(arrays, schema=schema)

    def _struct(self, rows: list[tuple[Any, ...] | None], columns: Sequence[tuple[str, pa.DataType]]) -> pa.Array:
        children = [
            self._column(name, kind, [None if r is None else r[i] for r in rows])
            for i, (name, kind) in enumerate(columns)
        ]
        mask = pa.array([r is None for r in rows], pa.bool_())
        return pa.StructArray.from_arrays(children, fields=[pa.field(n, k) for n, k in columns], mask=mask)

    def _column(self, name: str, kind: pa.DataType, values: list[Any]) -> pa.Array:
        if not self.text:
            if pa.types.is_string(kind):  # a numeric without precision, a retyped column: its text
                values = [v if v is None or isinstance(v, str) else str(v) for v in values]
            try:
                return pa.array(values, kind)
            except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError) as exc:
                raise _Retyped(name) from exc
        return from_text(self.topic, name, kind, pa.array(values, pa.string()))

    def records(self, spark: SparkSession, masks: ColumnMasks | None = None) -> ArrowRecords:
        """The events as records the runtime writes from the driver (no Spark job)."""
        return records_of(spark, self.table(), masks)


def records_of(spark: SparkSession, table: pa.Table, masks: ColumnMasks | None = None) -> ArrowRecords:
    """An Arrow table of events as records the runtime writes from the driver (no Spark job), with
    the columns the connector's column `masks` name hidden (`_masked`)."""
    from pyspark.sql.pandas.types import from_arrow_schema
    from pyspark.sql.types import LongType, StructField, StructType

    rules: dict[str, Any] = {}
    if masks:
        table, rules = masked_events(table, masks, UNAVAILABLE)
    batches = table.to_batches()
    units = StructType([StructField("unit", LongType())])
    schema = annotated(from_arrow_schema(table.schema), rules)
    return ArrowRecords(spark, [(0,)], units, lambda _: iter(batches), schema, partitions=1, in_driver=True)


def from_text(topic: str, name: str, kind: pa.DataType, texts: pa.Array) -> pa.Array:
    """A column's values from the database's text forms (PostgreSQL's output functions), as `kind`;
    `UNAVAILABLE` (an unchanged TOAST value) stays as it is in text and binary columns, null in others."""
    if pa.types.is_string(kind):
        return texts
    if pa.types.is_binary(kind):  # bytea's hex output
        return pa.array([_bytea(v) if v is not None else None for v in texts.to_pylist()], kind)
    if texts.null_count < len(texts) and pc.any(pc.equal(texts, UNAVAILABLE)).as_py():
        texts = pc.if_else(pc.equal(texts, UNAVAILABLE), pa.scalar(None, pa.string()), texts)
    if pa.types.is_boolean(kind):
        return pc.equal(texts, "t")
    try:
        return texts.cast(kind)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise DataError(f"`{topic}`: column `{name}` has a value that is no {kind} ({exc})") from exc


class _Retyped(Exception):
    """A column's values are not all of its type."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


def merged_columns(
    old: list[tuple[str, pa.DataType]], new: list[tuple[str, pa.DataType]]
) -> list[tuple[str, pa.DataType]]:
    """Columns of rows before and after a schema change: the union, a retyped column as text."""
    kinds = dict(old)
    for name, kind in new:
        kinds[name] = kind if kinds.get(name, kind) == kind else pa.string()
    return list(kinds.items())


def _positions(source: Sequence[tuple[str, Any]], target: Sequence[tuple[str, Any]]) -> list[int | None]:
    """For each of `target`'s columns, its position in `source` (None: not there)."""
    at = {name: i for i, (name, _) in enumerate(source)}
    return [at.get(name) for name, _ in target]


def _take(row: tuple[Any, ...] | None, positions: Sequence[int | None]) -> tuple[Any, ...] | None:
    if row is None:
        return None
    return tuple(None if i is None else row[i] for i in positions)


def _bytea(text: str) -> bytes:
    if text == UNAVAILABLE:
        return UNAVAILABLE.encode()
    if not text.startswith("\\x"):
        raise DataError("a bytea value not in hex format (is the server's `bytea_output` `escape`?)")
    try:
        return bytes.fromhex(text[2:])
    except ValueError as exc:
        raise DataError(f"a bytea value that is not hex: {exc}") from exc
