"""Reading `pgoutput` messages from their bytes: `parse` for any message, `change` for the row
changes of the stream's hot path (see `pgoutput` for the protocol and what is not read)."""

from __future__ import annotations

import struct
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from connect_core.connectors.cdc.postgres._pgmessages import (
    UNCHANGED_TOAST,
    Begin,
    Column,
    ColumnValue,
    Commit,
    Delete,
    Insert,
    LogicalMessage,
    Origin,
    PgOutputError,
    PgOutputMessage,
    Relation,
    Truncate,
    TupleData,
    Type,
    Update,
)

__all__ = ["ROW_CHANGES", "Change", "change", "parse"]


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
