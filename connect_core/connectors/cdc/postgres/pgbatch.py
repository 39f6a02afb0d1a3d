"""pgoutput's row changes decoded a column at a time: the stream's hot path.

While it streams, the PostgreSQL source only files each Insert, Update and Delete message as it
came (its bytes) under its table's current description (`Relation`) and transaction
(`RowChanges`); no value is decoded then. At the end of the run `envelope_table` turns each
table's messages into Debezium's events in bulk: the messages are joined into one buffer, numpy
walks a column's field of every message at once (one step per column, not per value), and a
column's values become an Arrow array straight from the buffer: its offsets interleave the
values with the gaps between them (value, gap, value, …) and `take` keeps the values. No Python
object is made per value, and the text forms are cast to the columns' types by Arrow
(`envelope.from_text`), as the row-at-a-time path does.

Every field is checked against its message's end; a message that does not read is decoded
again on its own by `pgoutput.change`, whose error names what is wrong with it.
Message formats: https://www.postgresql.org/docs/15/protocol-logicalrep-message-formats.html
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from connect_core.connectors.cdc.envelope import (
    POSTGRES_SOURCE,
    UNAVAILABLE,
    ChangeTable,
    arrow_type,
    from_text,
    merged_columns,
)
from connect_core.connectors.cdc.postgres import pgoutput
from connect_core.connectors.cdc.postgres.pgoutput import PgOutputError
from connect_core.sdk.errors import DataError

__all__ = ["RowChanges", "Truncated", "envelope_table"]

_T, _N, _U = 116, 110, 117  # a column value's kind: text, NULL, unchanged TOAST
_I, _D = 73, 68  # Insert, Delete (Update: 85)
_NEW, _KEY, _OLD = 78, 75, 79  # a tuple's marker: new row, old key, whole old row


@dataclass
class RowChanges:
    """Row-change messages of one table under one description, in stream order; `starts[i]` is
    the index of the first message of the transaction whose `source` is `sources[i]`.

    `decode` turns the messages filed so far into events while the stream waits for the server,
    with the description's own columns; `envelope_table` takes them when every piece of the table
    has the same columns, and decodes the messages again otherwise (a table described anew mid-run)."""

    relation: pgoutput.Relation
    topic: str
    key: tuple[str, ...]
    messages: list[bytes] = field(default_factory=list)
    starts: list[int] = field(default_factory=list)
    sources: list[dict[str, Any]] = field(default_factory=list)
    ts_ms: list[int] = field(default_factory=list)
    _decoded: list[pa.Table] = field(default_factory=list)
    _done: int = 0  # messages decoded into `_decoded`
    _eager: bool = True  # False: decoded only at the end, with the table's columns over the whole run

    def begin(self, source: dict[str, Any], ts_ms: int) -> list[bytes]:
        """The list a transaction's messages of this table go to."""
        self.starts.append(len(self.messages))
        self.sources.append(source)
        self.ts_ms.append(ts_ms)
        return self.messages

    @property
    def pending(self) -> int:
        """Messages filed and not decoded yet (while decoding early is allowed)."""
        return len(self.messages) - self._done if self._eager else 0

    @property
    def columns(self) -> list[tuple[str, pa.DataType]]:
        return _columns(self.relation)

    def decode(self, limit: int | None = None) -> None:
        """Decode up to `limit` (all) of the pending messages, with the description's own columns."""
        end = len(self.messages) if limit is None else min(len(self.messages), self._done + limit)
        if end > self._done:
            columns = self.columns
            schema = _schema(self.topic, columns, self.key)
            self._decoded.append(_decoded(self.topic, self.key, self, columns, schema, self._done, end))
            self._done = end

    def decode_early(self, limit: int) -> None:
        """`decode` while the stream runs. A value its own column type cannot hold may still be fine
        in the run's columns (retyped to text by a later description): then the piece is decoded at
        the end instead, where an error is the run's, whatever the stream's timing was."""
        try:
            self.decode(limit)
        except DataError:
            self._decoded, self._done, self._eager = [], 0, False


@dataclass(frozen=True)
class Truncated:
    """A TRUNCATE of the table, in its place among the row changes."""

    relation: pgoutput.Relation
    source: dict[str, Any]
    ts_ms: int


def envelope_table(topic: str, key: Sequence[str], pieces: Sequence[RowChanges | Truncated]) -> pa.Table:
    """One table's events in Debezium's envelope (the schema `ChangeTable` gives), in stream order:
    the columns are the union of its descriptions' (a column retyped mid-run as text)."""
    pieces = [p for p in pieces if not isinstance(p, RowChanges) or p.messages]
    columns: list[tuple[str, pa.DataType]] = []
    for piece in pieces:
        columns = merged_columns(columns, _columns(piece.relation)) if columns else _columns(piece.relation)
    schema = _schema(topic, columns, key)
    tables = []
    for piece in pieces:
        if isinstance(piece, Truncated):
            tables.append(_truncated(piece, columns, schema))
        elif piece.columns == columns and piece._eager:  # decoded as it is: what the stream decoded holds
            piece.decode()
            tables.extend(piece._decoded)
        else:
            tables.append(_decoded(topic, key, piece, columns, schema, 0, len(piece.messages)))
    if not tables:
        return schema.empty_table()
    return pa.concat_tables(tables) if len(tables) > 1 else tables[0]


def _columns(relation: pgoutput.Relation) -> list[tuple[str, pa.DataType]]:
    """A description's columns, each with the Arrow type its values take."""
    return [(c.name, arrow_type(c.type_oid, c.typmod)) for c in relation.columns]


def _schema(topic: str, columns: list[tuple[str, pa.DataType]], key: Sequence[str]) -> pa.Schema:
    shape = ChangeTable(topic, columns, key, text=True).schema
    return shape if key else pa.schema([f for f in shape if f.name != "__key"])


def _truncated(piece: Truncated, columns: list[tuple[str, pa.DataType]], schema: pa.Schema) -> pa.Table:
    row = {
        "before": None,
        "after": None,
        "source": piece.source,
        "op": "t",
        "ts_ms": piece.ts_ms,
        "__key": None,
        "__tombstone": False,
    }
    return pa.Table.from_pylist([{n: row[n] for n in schema.names}], schema=schema)


# --- walking the messages ----------------------------------------------------------------------


@dataclass
class _Tuples:
    """One tuple of each of some messages (`rows`): per column, where its value starts in the
    buffer, its length and its kind (text, NULL, unchanged TOAST)."""

    rows: np.ndarray
    starts: list[np.ndarray]
    lengths: list[np.ndarray]
    kinds: list[np.ndarray]


class _Malformed(Exception):
    """Some message does not read: the caller finds which, and why, one message at a time."""


def _be(data: np.ndarray, at: np.ndarray, width: int) -> np.ndarray:
    """Big-endian unsigned integers of `width` (2 or 4) bytes at each of `at` (all within `data`)."""
    if not len(at):
        return np.zeros(0, np.int64)
    fields = data[at[:, None] + np.arange(width)]  # one gather of every field's bytes
    return fields.view(f">u{width}").ravel().astype(np.int64)


def _walk(data: np.ndarray, at: np.ndarray, ends: np.ndarray, width: int) -> tuple[_Tuples, np.ndarray]:
    """The tuples starting at `at` (one per message, each ending by `ends`), of `width` columns;
    and where each ends."""
    size = len(data)
    if np.any(at + 2 > ends) or np.any(_be(data, at, 2) != width):
        raise _Malformed
    pos = at + 2
    starts, lengths, kinds = [], [], []
    for _ in range(width):
        if np.any(pos >= ends):
            raise _Malformed
        kind = data[pos]
        text = kind == _T
        if not np.all(text | (kind == _N) | (kind == _U)):
            raise _Malformed
        length = np.zeros(len(pos), np.int64)
        if text.any():
            head = pos[text]
            if np.any(head + 5 > ends[text]):
                raise _Malformed
            length[text] = _be(data, np.minimum(head + 1, size - 4), 4)
        step = np.where(text, 5 + length, 1)
        if np.any(pos + step > ends):  # a length past the message (a "negative" one too: ≥ 2**31)
            raise _Malformed
        starts.append(np.where(text, pos + 5, pos))
        lengths.append(length)
        kinds.append(kind)
        pos = pos + step
    return _Tuples(np.arange(0), starts, lengths, kinds), pos


def _values(buffer: pa.Buffer, tuples: _Tuples, column: int) -> tuple[pa.Array, np.ndarray]:
    """A column of `tuples` as text (NULL and unchanged TOAST null), and where it is unchanged TOAST."""
    starts, lengths, kinds = tuples.starts[column], tuples.lengths[column], tuples.kinds[column]
    n = len(starts)
    if n == 0:
        return pa.array([], pa.string()), np.zeros(0, bool)
    # offsets: value, gap, value, gap, …, value; the values are the even elements
    offsets = np.empty(2 * n, np.int64)
    offsets[0::2] = starts
    offsets[1::2] = starts + lengths
    large = offsets[-1] >= 2**31
    offsets = offsets if large else offsets.astype(np.int32)
    kind = pa.large_binary() if large else pa.binary()
    interleaved = pa.Array.from_buffers(kind, 2 * n - 1, [None, pa.py_buffer(offsets), buffer])
    picked = interleaved.take(pa.array(np.arange(0, 2 * n, 2)))  # no validity yet: take is 10x faster so
    text = kinds == _T
    if not text.all():  # NULLs and unchanged TOAST values: null
        validity = pa.array(text).buffers()[1]
        picked = pa.Array.from_buffers(kind, n, [validity, *picked.buffers()[1:]], offset=picked.offset)
    try:
        texts = picked.cast(pa.large_string() if large else pa.string())  # checks the UTF-8
    except pa.ArrowInvalid as exc:
        raise PgOutputError(f"text that is not UTF-8 (the database's encoding must be UTF8): {exc}") from exc
    return (texts.cast(pa.string()) if large else texts), kinds == _U


def _key_changed(
    key: Sequence[str],
    present: dict[str, int],
    kind: np.ndarray,
    has_old: np.ndarray,
    old_of: np.ndarray,
    new_of: np.ndarray,
    text_of: Callable[[str, bool], tuple[pa.Array, np.ndarray]],
) -> np.ndarray:
    """Per message: an update whose old and new rows differ in a column of the table's key (an
    unchanged out-of-line value in the new row is no change)."""
    changed = np.zeros(len(kind), bool)
    updates = np.flatnonzero((kind == 85) & has_old)
    if not len(updates):
        return changed
    old_at, new_at = pa.array(old_of[updates]), pa.array(new_of[updates])
    differs = np.zeros(len(updates), bool)
    for name in key:
        if name not in present:
            continue
        (old_text, _), (new_text, new_toast) = text_of(name, True), text_of(name, False)
        before, after = old_text.take(old_at), new_text.take(new_at)
        same = pc.fill_null(pc.equal(before, after), False)
        both_null = pc.and_(pc.is_null(before), pc.is_null(after))
        unchanged = np.asarray(pc.or_(same, both_null)) | new_toast[new_of[updates]]
        differs |= ~unchanged
    changed[updates] = differs
    return changed


def _sources(sources: list[dict[str, Any]], index: np.ndarray) -> pa.Array:
    """The `source` of each event (`index` into `sources`; -1: null): a field the same in every
    source (the table, the connector, …) is repeated, the others taken, a field at a time."""
    children = []
    at = pa.array(np.maximum(index, 0))
    for field_ in POSTGRES_SOURCE:
        values = [s[field_.name] for s in sources]
        if all(v == values[0] for v in values):
            children.append(pa.repeat(pa.scalar(values[0], field_.type), len(index)))
        else:
            children.append(pa.array(values, field_.type).take(at))
    return pa.StructArray.from_arrays(children, fields=list(POSTGRES_SOURCE), mask=pa.array(index < 0))


# --- the events --------------------------------------------------------------------------------


def _decoded(
    topic: str,
    key: Sequence[str],
    piece: RowChanges,
    columns: list[tuple[str, pa.DataType]],
    schema: pa.Schema,
    first: int,
    end: int,
) -> pa.Table:
    """The events of `piece`'s messages `first` to `end` (excluded)."""
    try:
        return _events(topic, key, piece, columns, schema, first, end)
    except _Malformed:
        relation, width = piece.relation, len(piece.relation.columns)
        for message in piece.messages[first:end]:
            for row in pgoutput.change(message)[2:]:  # raises, naming the problem
                if row is not None and len(row) != width:
                    raise PgOutputError(
                        f"a row of {len(row)} columns for `{relation.namespace}.{relation.name}`, described with {width}"
                    ) from None
        raise PgOutputError(f"`{topic}`: a pgoutput row change that does not read") from None


def _events(
    topic: str,
    key: Sequence[str],
    piece: RowChanges,
    columns: list[tuple[str, pa.DataType]],
    schema: pa.Schema,
    first: int,
    end: int,
) -> pa.Table:
    messages, relation = piece.messages[first:end], piece.relation
    width = len(relation.columns)
    joined = b"".join(messages)
    data = np.frombuffer(joined, np.uint8)
    sizes = np.fromiter(map(len, messages), np.int64, len(messages))
    if np.any(sizes < 6):
        raise _Malformed
    ends = np.cumsum(sizes)
    begins = ends - sizes
    kind, marker = data[begins], data[begins + 5]
    has_old = (marker == _KEY) | (marker == _OLD)
    # Insert: N new; Update: [K key | O old] N new; Delete: K key | O old
    if np.any((kind == _I) & (marker != _NEW)) or np.any((kind == _D) & ~has_old):
        raise _Malformed
    if np.any((kind != _I) & (kind != _D) & (kind != 85)) or np.any((marker != _NEW) & ~has_old):
        raise _Malformed
    old_rows = np.flatnonzero(has_old)
    old, old_end = _walk(data, begins[old_rows] + 6, ends[old_rows], width)
    old.rows = old_rows
    new_rows = np.flatnonzero(kind != _D)
    new_at = begins + 6
    updated_old = has_old & (kind != _D)
    if updated_old.any():
        after_old = old_end[kind[old_rows] != _D]
        if np.any(after_old >= ends[updated_old]) or np.any(data[np.minimum(after_old, len(data) - 1)] != _NEW):
            raise _Malformed
        new_at[updated_old] = after_old + 1
    if np.any(old_end[kind[old_rows] == _D] != ends[old_rows][kind[old_rows] == _D]):
        raise _Malformed
    new, new_end = _walk(data, new_at[new_rows], ends[new_rows], width)
    new.rows = new_rows
    if np.any(new_end != ends[new_rows]):
        raise _Malformed

    count = len(messages)
    old_of = np.full(count, -1, np.int64)
    old_of[old_rows] = np.arange(len(old_rows))
    new_of = np.full(count, -1, np.int64)
    new_of[new_rows] = np.arange(len(new_rows))
    buffer = pa.py_buffer(joined)
    present = {c.name: at for at, c in enumerate(relation.columns)}
    texts: dict[tuple[str, bool], tuple[pa.Array, np.ndarray]] = {}

    def text_of(name: str, from_old: bool) -> tuple[pa.Array, np.ndarray]:
        """Column `name` of the old or new rows as text (NULL and unchanged TOAST null), and where TOAST."""
        if (name, from_old) not in texts:
            texts[name, from_old] = _values(buffer, old if from_old else new, present[name])
        return texts[name, from_old]

    # events per message: c / u: one; d: one, then its tombstone (a keyed table); an update that
    # changed the key: Debezium's delete (+ tombstone) and create. Whether it did is read from the
    # values: an old row comes with an update that changed the replica identity's columns (K), with
    # every update under REPLICA IDENTITY FULL (O), and when the identity's value is out of line (K).
    key_change = _key_changed(key, present, kind, has_old, old_of, new_of, text_of)
    deletes = (kind == _D) | key_change
    per = 1 + (deletes & bool(key)) + key_change
    message = np.repeat(np.arange(count), per)
    step = np.arange(len(message)) - np.repeat(np.cumsum(per) - per, per)  # 0, 1, 2 within a message
    m_kind, m_key_change = kind[message], key_change[message]
    lead = step == 0  # the first event of its message
    delete_event = lead & ((m_kind == _D) | m_key_change)
    tombstone = (step == 1) & bool(key)
    create = (m_key_change & (step == per[message] - 1)) | (lead & (m_kind == _I))
    update = lead & (m_kind == 85) & ~m_key_change
    op = np.full(len(message), 3, np.int8)  # 0 c, 1 u, 2 d, 3 none (a tombstone)
    op[create], op[update], op[delete_event] = 0, 1, 2

    # before: an update's whole old row (O), a delete's; after: a create's and an update's new row
    before = np.where(delete_event | (update & (marker[message] == _OLD)), old_of[message], -1)
    after = np.where((create | update), new_of[message], -1)
    # the key: the after row's, else the before row's (a tombstone: its delete's)
    key_new = after
    key_old = np.where(after < 0, old_of[message], -1)

    # the chunk's transactions only: a chunk's cost must not grow with the run's
    t0 = bisect.bisect_right(piece.starts, first) - 1
    t1 = bisect.bisect_left(piece.starts, end)
    transaction = np.searchsorted(np.asarray(piece.starts[t0:t1], np.int64), first + message, side="right") - 1
    source_index = np.where(tombstone, -1, transaction)
    ts = np.asarray(piece.ts_ms[t0:t1], np.int64)[transaction]
    sources = piece.sources[t0:t1]

    kinds = dict(columns)
    typed: dict[tuple[str, bool], pa.Array] = {}

    def pick(name: str, from_old: bool, index: np.ndarray) -> pa.Array:
        """Column `name` of the old or new rows at `index` (-1: null), as its type."""
        if name not in present:  # not in this description of the table
            return pa.nulls(len(index), kinds.get(name, pa.string()))  # a key column added since: text
        values = typed.get((name, from_old))
        if values is None:
            texts, toast = text_of(name, from_old)
            if toast.any():
                texts = pc.if_else(pa.array(toast), UNAVAILABLE, texts)
            values = typed[name, from_old] = from_text(topic, name, kinds[name], texts)
        return values.take(pa.array(index, mask=index < 0))

    def struct(index: np.ndarray, from_old: bool) -> pa.Array:
        return pa.StructArray.from_arrays(
            [pick(name, from_old, index) for name, _ in columns],
            fields=[pa.field(n, k) for n, k in columns],
            mask=pa.array(index < 0),
        )

    arrays: dict[str, pa.Array] = {
        "before": struct(before, True),
        "after": struct(after, False),
        "source": _sources(sources, source_index),
        "op": pa.array(["c", "u", "d", None]).take(pa.array(op)),
        "ts_ms": pa.array(ts, mask=tombstone),
        "__tombstone": pa.array(tombstone),
    }
    if key:
        arrays["__key"] = pa.StructArray.from_arrays(
            [pc.coalesce(pick(name, False, key_new), pick(name, True, key_old)) for name in key],
            fields=[pa.field(n, kinds.get(n, pa.string())) for n in key],
        )
    return pa.Table.from_arrays([arrays[n] for n in schema.names], schema=schema)
