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
    format_lsn,
)
from connect_core.connectors.cdc.postgres._pgvalues import values_of
from connect_core.connectors.cdc.postgres._pgwire import ROW_CHANGES, Change, change, parse

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
