"""The messages of PostgreSQL's `pgoutput` protocol as `pgoutput` gives them: frozen dataclasses, the
row tuples they hold, and the decoder's error."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Final, TypeAlias

from connect_core.sdk.errors import FatalError

__all__ = [
    "UNCHANGED_TOAST",
    "Begin",
    "Column",
    "ColumnValue",
    "Commit",
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
    "format_lsn",
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
