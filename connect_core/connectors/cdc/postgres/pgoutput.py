"""A decoder of PostgreSQL's `pgoutput` logical replication messages: protocol version 1, and 2
without streaming (which sends the same messages).

A log-based source reads a publication through a logical replication slot, with psycopg2's
`LogicalReplicationConnection`::

    cursor.start_replication(slot_name=slot, decode=False,
                             options={"proto_version": "1", "publication_names": "pub"})

and gives each message's `payload` to `Decoder.decode`, which returns one of the frozen dataclasses
below. A transaction arrives as `Begin`; `Origin` if it was replicated from elsewhere; a `Relation`
(after the `Type` of each of its columns' non-built-in types) before the first change to a table in
the session and again after its definition changed; the changes (`Insert`, `Update`, `Delete`,
`Truncate`, and `LogicalMessage` with the `messages` option); and `Commit`.

A tuple holds each column's value as the server's text output (`str`), None for NULL, or
`UNCHANGED_TOAST` for an out-of-line value an UPDATE did not change (pgoutput does not send it).
`Decoder.values` turns a tuple into `{column: Python value}` by column type; the text it reads
is what the walsender's settings make it: the defaults `DateStyle=ISO` and `bytea_output=hex`, and
a UTF8 database. Any `TimeZone` works (timestamptz values come back in UTC).

Not read (each fails with `PgOutputError`, naming the option to drop): streamed in-progress
transactions (`streaming`), two-phase commit (`two_phase`, protocol 3) and binary values (`binary`).
Message formats: https://www.postgresql.org/docs/15/protocol-logicalrep-message-formats.html
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from typing import Any, Final, TypeAlias

from connect_core.sdk.errors import DataError, FatalError

__all__ = [
    "ROW_CHANGES",
    "UNCHANGED_TOAST",
    "Begin",
    "Change",
    "Column",
    "ColumnValue",
    "Commit",
    "Decoder",
    "Delete",
    "Insert",
    "LogicalMessage",
    "Origin",
    "PgOutputError",
    "PgOutputMessage",
    "Relation",
    "Truncate",
    "TupleData",
    "Type",
    "Update",
    "change",
    "format_lsn",
    "parse",
    "values_of",
]


class PgOutputError(FatalError):
    """A replication message this decoder cannot read: malformed, of a feature it does not support,
    or about a table the stream never described."""


class _UnchangedToast:
    __slots__ = ()

    def __repr__(self) -> str:
        return "UNCHANGED_TOAST"

    def __reduce__(self) -> str:
        return "UNCHANGED_TOAST"  # unpickles as the module's one instance, so `is` still works


#: The value of a column an UPDATE left as it was and pgoutput did not send (an out-of-line TOAST value).
UNCHANGED_TOAST: Final = _UnchangedToast()

#: A column's value in a row: its text, `UNCHANGED_TOAST`, or None for NULL.
ColumnValue: TypeAlias = str | _UnchangedToast | None

#: One row: the value of each column of its relation, in order.
TupleData: TypeAlias = tuple[ColumnValue, ...]


@dataclass(frozen=True, slots=True)
class Begin:
    final_lsn: int  # of the transaction's commit record
    commit_ts: datetime
    xid: int


@dataclass(frozen=True, slots=True)
class Commit:
    commit_lsn: int
    end_lsn: int  # just past the commit record: where the slot resumes once this is confirmed
    commit_ts: datetime


@dataclass(frozen=True, slots=True)
class Origin:
    commit_lsn: int  # on the origin server
    name: str


@dataclass(frozen=True, slots=True)
class Column:
    name: str
    type_oid: int
    typmod: int  # -1 when the type has no modifier
    key: bool  # part of the replica identity


@dataclass(frozen=True, slots=True)
class Relation:
    oid: int
    namespace: str  # empty for pg_catalog
    name: str
    replica_identity: str  # d (default: the primary key), n (nothing), f (full), i (an index)
    columns: tuple[Column, ...]

    @property
    def key_columns(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns if c.key)


@dataclass(frozen=True, slots=True)
class Type:
    """A non-built-in type (an enum, a domain, …) of a column of the next Relation."""

    oid: int
    namespace: str
    name: str


@dataclass(frozen=True, slots=True)
class Insert:
    relation_oid: int
    new: TupleData


@dataclass(frozen=True, slots=True)
class Update:
    relation_oid: int
    new: TupleData
    old: TupleData | None = None  # the whole old row: REPLICA IDENTITY FULL
    key: TupleData | None = None  # the old key, other columns NULL: when the update changed the key


@dataclass(frozen=True, slots=True)
class Delete:
    relation_oid: int
    old: TupleData | None = None  # the whole old row: REPLICA IDENTITY FULL
    key: TupleData | None = None  # the key, other columns NULL: REPLICA IDENTITY DEFAULT or INDEX


@dataclass(frozen=True, slots=True)
class Truncate:
    relation_oids: tuple[int, ...]
    cascade: bool
    restart_identity: bool


@dataclass(frozen=True, slots=True)
class LogicalMessage:
    """`pg_logical_emit_message`'s message (with the `messages` option)."""

    transactional: bool
    lsn: int
    prefix: str
    content: bytes


PgOutputMessage: TypeAlias = (
    Begin | Commit | Origin | Relation | Type | Insert | Update | Delete | Truncate | LogicalMessage
)


def format_lsn(lsn: int) -> str:
    """An LSN as PostgreSQL writes it (`16/B374D848`)."""
    return f"{lsn >> 32:X}/{lsn & 0xFFFFFFFF:X}"


def parse(payload: bytes) -> PgOutputMessage:
    """One pgoutput message; a `Decoder` also keeps the relations the changes refer to."""
    if not payload:
        raise PgOutputError("an empty pgoutput message")
    kind = chr(payload[0])
    parser = _PARSERS.get(kind)
    if parser is None:
        if kind in _NOT_READ:
            raise PgOutputError(
                f"pgoutput sent a {_NOT_READ[kind]} message (`{kind}`), which this decoder does not read: "
                "start replication without the `streaming` and `two_phase` options"
            )
        raise PgOutputError(f"an unknown pgoutput message type `{kind}` (0x{payload[0]:02x})")
    reader = _Reader(payload, kind)
    message = parser(reader)
    reader.finish()
    return message


class Decoder:
    """Decodes one replication session's messages, from its first: a change refers to its table by
    OID, described by the Relation message sent earlier in the same session."""

    def __init__(self) -> None:
        self._relations: dict[int, Relation] = {}

    def decode(self, payload: bytes) -> PgOutputMessage:
        message = parse(payload)
        if isinstance(message, Relation):
            self._relations[message.oid] = message  # a newer definition replaces the old
        return message

    def relation(self, oid: int) -> Relation:
        try:
            return self._relations[oid]
        except KeyError:
            raise PgOutputError(
                f"a change to relation {oid}, which this stream never described: decode a replication "
                "session from its first message, with one `Decoder`"
            ) from None

    def values(self, relation_oid: int, data: TupleData) -> dict[str, Any]:
        """`{column: value}`: NULL as None, an unchanged TOAST value as `UNCHANGED_TOAST`; boolean, bytea
        (bytes), the integer types and oid (int), real and double precision (float), numeric (Decimal),
        date, time, timestamp (naive) and timestamptz (in UTC) as Python values; any other type (text,
        varchar, char, uuid, json, jsonb, arrays, intervals, enums, …) as its text."""
        return values_of(self.relation(relation_oid), data)


def values_of(relation: Relation, data: TupleData) -> dict[str, Any]:
    """`{column: value}` of a row of `relation` in text form (as `Decoder.values`; also for rows read
    with `::text` casts, as a snapshot reads them)."""
    if len(data) != len(relation.columns):
        raise PgOutputError(
            f"a row of {len(data)} columns for `{relation.namespace}.{relation.name}`, "
            f"described with {len(relation.columns)}"
        )
    return {column.name: _python(relation, column, value) for column, value in zip(relation.columns, data, strict=True)}


# --- reading messages --------------------------------------------------------------------------

_U8 = struct.Struct("!B")
_I16 = struct.Struct("!h")
_I32 = struct.Struct("!i")
_U32 = struct.Struct("!I")
_U64 = struct.Struct("!Q")
_BEGIN = struct.Struct("!QqI")  # final LSN, commit time, xid
_COMMIT = struct.Struct("!BQQq")  # flags (none yet), commit LSN, end LSN, commit time
_COLUMN_TYPE = struct.Struct("!Ii")  # type OID, typmod

_PG_EPOCH = datetime(2000, 1, 1, tzinfo=UTC)


class _Reader:
    """The fields of one message, in order, each checked against the message's end."""

    __slots__ = ("_data", "_kind", "_pos")

    def __init__(self, data: bytes, kind: str) -> None:
        self._data = data
        self._kind = kind
        self._pos = 1  # past the type byte

    def take(self, layout: struct.Struct) -> tuple[Any, ...]:
        try:
            values = layout.unpack_from(self._data, self._pos)
        except struct.error as exc:
            raise self.error(f"it ends inside a field ({exc})") from exc
        self._pos += layout.size
        return values

    def number(self, layout: struct.Struct) -> int:
        return int(self.take(layout)[0])

    def char(self) -> str:
        return chr(self.number(_U8))

    def string(self) -> str:
        end = self._data.find(b"\0", self._pos)
        if end < 0:
            raise self.error("a string has no terminating NUL")
        raw, self._pos = self._data[self._pos : end], end + 1
        return self._text(raw)

    def chunk(self, length: int) -> bytes:
        if length < 0 or self._pos + length > len(self._data):
            raise self.error(f"a value of {length} bytes at byte {self._pos} of {len(self._data)}")
        raw, self._pos = self._data[self._pos : self._pos + length], self._pos + length
        return raw

    def text(self, length: int) -> str:
        return self._text(self.chunk(length))

    def timestamp(self, microseconds: int) -> datetime:
        try:
            return _PG_EPOCH + timedelta(microseconds=microseconds)
        except OverflowError as exc:
            raise self.error(f"a timestamp out of range ({microseconds} µs since 2000)") from exc

    def finish(self) -> None:
        if self._pos != len(self._data):
            raise self.error(f"{len(self._data) - self._pos} bytes follow its last field")

    def _text(self, raw: bytes) -> str:
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise self.error(f"text that is not UTF-8 (the database's encoding must be UTF8): {exc}") from exc

    def error(self, problem: str) -> PgOutputError:
        return PgOutputError(f"a malformed pgoutput `{self._kind}` message: {problem}")


def _begin(r: _Reader) -> Begin:
    final_lsn, commit_ts, xid = r.take(_BEGIN)
    return Begin(final_lsn, r.timestamp(commit_ts), xid)


def _commit(r: _Reader) -> Commit:
    _flags, commit_lsn, end_lsn, commit_ts = r.take(_COMMIT)
    return Commit(commit_lsn, end_lsn, r.timestamp(commit_ts))


def _origin(r: _Reader) -> Origin:
    return Origin(r.number(_U64), r.string())


def _relation(r: _Reader) -> Relation:
    oid, namespace, name, identity = r.number(_U32), r.string(), r.string(), r.char()
    return Relation(oid, namespace, name, identity, tuple(_column(r) for _ in range(r.number(_I16))))


def _column(r: _Reader) -> Column:
    flags, name = r.number(_U8), r.string()
    type_oid, typmod = r.take(_COLUMN_TYPE)
    return Column(name, type_oid, typmod, key=bool(flags & 1))


def _type(r: _Reader) -> Type:
    return Type(r.number(_U32), r.string(), r.string())


def _insert(r: _Reader) -> Insert:
    oid = r.number(_U32)
    _expect(r, "N")
    return Insert(oid, _tuple(r))


def _update(r: _Reader) -> Update:
    oid, old, key = r.number(_U32), None, None
    match r.char():
        case "K":
            key = _tuple(r)
            _expect(r, "N")
        case "O":
            old = _tuple(r)
            _expect(r, "N")
        case "N":
            pass
        case other:
            raise r.error(f"`{other}` where `K`, `O` or `N` belongs")
    return Update(oid, _tuple(r), old=old, key=key)


def _delete(r: _Reader) -> Delete:
    oid = r.number(_U32)
    match r.char():
        case "K":
            return Delete(oid, key=_tuple(r))
        case "O":
            return Delete(oid, old=_tuple(r))
        case other:
            raise r.error(f"`{other}` where `K` or `O` belongs")


def _truncate(r: _Reader) -> Truncate:
    count, options = r.number(_I32), r.number(_U8)
    oids = tuple(r.number(_U32) for _ in range(count))  # a false count runs out of bytes, not memory
    return Truncate(oids, cascade=bool(options & 1), restart_identity=bool(options & 2))


def _message(r: _Reader) -> LogicalMessage:
    flags, lsn, prefix = r.number(_U8), r.number(_U64), r.string()
    return LogicalMessage(bool(flags & 1), lsn, prefix, r.chunk(r.number(_I32)))


def _expect(r: _Reader, kind: str) -> None:
    if (found := r.char()) != kind:
        raise r.error(f"`{found}` where `{kind}` belongs")


#: A row change as `change` gives it: (type byte `I`, `U` or `D`; relation OID; new row; old row; key).
Change = tuple[int, int, "TupleData | None", "TupleData | None", "TupleData | None"]
#: The type bytes of Insert, Update and Delete.
ROW_CHANGES = frozenset(b"IUD")


def change(payload: bytes) -> Change:
    """An Insert, Update or Delete message as a plain tuple, with `parse`'s checks: the stream's hot
    path (no message object, no per-field calls)."""
    kind = payload[0]
    r = _Reader(payload, chr(kind))
    if kind not in ROW_CHANGES:
        raise r.error("not an Insert, Update or Delete")
    try:
        (oid,) = _U32.unpack_from(payload, 1)
        marker = payload[5]
    except (struct.error, IndexError) as exc:
        raise r.error(f"it ends inside a field ({exc})") from exc
    r._pos = 6
    new = old = key = None
    if kind == 73:  # I: N + the new row
        if marker != 78:
            raise r.error(f"`{chr(marker)}` where `N` belongs")
        new = _tuple(r)
    elif kind == 85:  # U: [K key | O old row] N + the new row
        if marker in (75, 79):
            first = _tuple(r)
            key, old = (first, None) if marker == 75 else (None, first)
            _expect(r, "N")
        elif marker != 78:
            raise r.error(f"`{chr(marker)}` where `K`, `O` or `N` belongs")
        new = _tuple(r)
    else:  # D: K key | O old row
        if marker == 75:
            key = _tuple(r)
        elif marker == 79:
            old = _tuple(r)
        else:
            raise r.error(f"`{chr(marker)}` where `K` or `O` belongs")
    r.finish()
    return kind, oid, new, old, key


def _tuple(r: _Reader) -> TupleData:
    # The hot loop of decoding (every column of every change): unpacked inline, not field by field.
    data, pos, end = r._data, r._pos, len(r._data)
    try:
        (count,) = _I16.unpack_from(data, pos)
        pos += 2
        values: list[ColumnValue] = []
        for _ in range(count):
            kind = data[pos]
            pos += 1
            if kind == 116:  # t: text
                (length,) = _I32.unpack_from(data, pos)
                pos += 4
                if length < 0 or pos + length > end:
                    r._pos = pos
                    raise r.error(f"a value of {length} bytes at byte {pos} of {end}")
                values.append(data[pos : pos + length].decode("utf-8"))
                pos += length
            elif kind == 110:  # n: NULL
                values.append(None)
            elif kind == 117:  # u: unchanged TOAST
                values.append(UNCHANGED_TOAST)
            elif kind == 98:  # b
                raise r.error("a binary value: start replication without the `binary` option")
            else:
                raise r.error(f"a column value of unknown kind `{chr(kind)}`")
    except (struct.error, IndexError) as exc:
        raise r.error(f"it ends inside a field ({exc})") from exc
    except UnicodeDecodeError as exc:
        raise r.error(f"text that is not UTF-8 (the database's encoding must be UTF8): {exc}") from exc
    r._pos = pos
    return tuple(values)


_PARSERS: dict[str, Callable[[_Reader], PgOutputMessage]] = {
    "B": _begin,
    "C": _commit,
    "O": _origin,
    "R": _relation,
    "Y": _type,
    "I": _insert,
    "U": _update,
    "D": _delete,
    "T": _truncate,
    "M": _message,
}

# Protocol 2's streaming and 3's two-phase messages: sent only when asked for.
_NOT_READ = {
    "S": "Stream Start",
    "E": "Stream Stop",
    "c": "Stream Commit",
    "A": "Stream Abort",
    "b": "Begin Prepare",
    "P": "Prepare",
    "K": "Commit Prepared",
    "r": "Rollback Prepared",
    "p": "Stream Prepare",
}


# --- column values -----------------------------------------------------------------------------


def _boolean(text: str) -> bool:
    return {"t": True, "f": False}[text]


def _bytea(text: str) -> bytes:
    if not text.startswith("\\x"):
        raise ValueError("not in hex format (is the server's `bytea_output` `escape`?)")
    return bytes.fromhex(text[2:])


def _timestamptz(text: str) -> datetime:
    value = datetime.fromisoformat(text)
    if value.tzinfo is None:
        raise ValueError("no UTC offset")
    return value.astimezone(UTC)


# By type OID (pg_type.oid of the built-in types): its name, and its text output to a Python value.
_FROM_TEXT: dict[int, tuple[str, Callable[[str], Any]]] = {
    16: ("boolean", _boolean),
    17: ("bytea", _bytea),
    20: ("bigint", int),
    21: ("smallint", int),
    23: ("integer", int),
    26: ("oid", int),
    700: ("real", float),
    701: ("double precision", float),
    1700: ("numeric", Decimal),
    1082: ("date", date.fromisoformat),
    1083: ("time", time.fromisoformat),
    1114: ("timestamp", datetime.fromisoformat),
    1184: ("timestamptz", _timestamptz),
}


def _python(relation: Relation, column: Column, value: ColumnValue) -> Any:
    if not isinstance(value, str) or column.type_oid not in _FROM_TEXT:
        return value
    type_name, convert = _FROM_TEXT[column.type_oid]
    try:
        return convert(value)
    except (ValueError, KeyError, ArithmeticError) as exc:  # Decimal's InvalidOperation is an ArithmeticError
        shown = value if len(value) <= 40 else f"{value[:40]}…"
        raise DataError(
            f"`{relation.namespace}.{relation.name}`.`{column.name}`: {shown!r} is no {type_name} Python reads "
            f"({type(exc).__name__}: {exc})"
        ) from exc
