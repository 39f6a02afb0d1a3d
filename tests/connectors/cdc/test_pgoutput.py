"""The pgoutput decoder: a real PostgreSQL's logical replication stream of inserts, updates, deletes
and a truncate, decoded; and bytes no server should send, refused with a `PgOutputError`."""

from __future__ import annotations

import pickle
import select
import struct
import time
from datetime import UTC, date, datetime, timedelta
from datetime import time as clock
from decimal import Decimal
from typing import Any, TypeVar

import psycopg2
import pytest
from psycopg2.extras import LogicalReplicationConnection

from connect_core.connectors.cdc.postgres.pgoutput import (
    ROW_CHANGES,
    UNCHANGED_TOAST,
    Begin,
    Commit,
    Decoder,
    Delete,
    Insert,
    LogicalMessage,
    PgOutputError,
    PgOutputMessage,
    Relation,
    Truncate,
    TupleData,
    Update,
    change,
    format_lsn,
    parse,
)
from connect_core.sdk.errors import DataError
from connect_core.testing.servers import PgServer, unique_name

READ_TIMEOUT = 10.0  # seconds for a few small transactions to arrive; a failure, never a hang

TABLES = (
    """CREATE TABLE items (
        id int PRIMARY KEY, name text, payload bytea, price numeric(12,4), at timestamptz, born date,
        alarm time, seen timestamp, ok boolean, big bigint, small smallint, ratio double precision,
        score real, ref uuid, doc jsonb, tags text[], code char(3), label varchar(20))""",
    "CREATE TABLE audit (id int PRIMARY KEY, note text)",
    "ALTER TABLE audit REPLICA IDENTITY FULL",
    "CREATE TABLE docs (id int PRIMARY KEY, body text, version int)",
    "ALTER TABLE docs ALTER COLUMN body SET STORAGE EXTERNAL",  # out of line, uncompressed: TOASTed
    "CREATE PUBLICATION pub FOR TABLE items, audit, docs",
)

BODY = "toast " * 2000

TRANSACTIONS = (
    (
        """INSERT INTO items VALUES (1, 'Grüße, 世界 🚀', '\\x00ff10', 12345.6789, '2024-02-29 12:34:56.789+02',
            '2024-02-29', '23:59:59.5', '2024-02-29 01:02:03.000004', true, 9007199254740993, -32768, 0.1,
            1.5, 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '{"a": [1, 2]}', '{x,"y z"}', 'ab', 'label')""",
        "INSERT INTO items (id) VALUES (2)",
        "INSERT INTO audit VALUES (1, 'first')",
        f"INSERT INTO docs VALUES (1, '{BODY}', 1)",
    ),
    (
        "UPDATE items SET name = 'renamed' WHERE id = 1",
        "UPDATE items SET id = 3 WHERE id = 2",
        "UPDATE audit SET note = 'second' WHERE id = 1",
        "UPDATE docs SET version = 2 WHERE id = 1",
        "DELETE FROM items WHERE id = 1",
        "DELETE FROM audit WHERE id = 1",
        "SELECT pg_logical_emit_message(true, 'cdc-test', 'hello')",
    ),
    ("TRUNCATE items, audit RESTART IDENTITY",),
)

ROW_1 = {
    "id": 1,
    "name": "Grüße, 世界 🚀",
    "payload": b"\x00\xff\x10",
    "price": Decimal("12345.6789"),
    "at": datetime(2024, 2, 29, 10, 34, 56, 789000, tzinfo=UTC),
    "born": date(2024, 2, 29),
    "alarm": clock(23, 59, 59, 500000),
    "seen": datetime(2024, 2, 29, 1, 2, 3, 4),
    "ok": True,
    "big": 9007199254740993,
    "small": -32768,
    "ratio": 0.1,
    "score": 1.5,
    "ref": "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
    "doc": '{"a": [1, 2]}',
    "tags": '{x,"y z"}',
    "code": "ab ",
    "label": "label",
}
ALL_NULL = dict.fromkeys(ROW_1)


@pytest.mark.parametrize("proto_version", ["1", "2"])
def test_a_stream_of_changes_decodes_in_its_transactions(pg_db: PgServer, proto_version: str) -> None:
    pg_db.execute(*TABLES)
    slot = unique_name("slot")
    pg_db.execute(f"SELECT pg_create_logical_replication_slot('{slot}', 'pgoutput')")
    for statements in TRANSACTIONS:
        _commit(pg_db, *statements)

    options = {"proto_version": proto_version, "publication_names": "pub", "messages": "true"}
    decoder = Decoder()
    payloads = _read(pg_db, slot, options, commits=len(TRANSACTIONS))
    messages = [decoder.decode(p) for p in payloads]
    first, second, third = _transactions(messages)
    changes = [(change(p), m) for p, m in zip(payloads, messages, strict=True) if p[0] in ROW_CHANGES]
    assert len(changes) == 10
    for (kind, oid, new, old, key), message in changes:  # the stream's hot path reads what parse reads
        assert chr(kind) == type(message).__name__[0] and oid == message.relation_oid  # type: ignore[attr-defined]
        assert (new, old, key) == tuple(getattr(message, f, None) for f in ("new", "old", "key"))

    assert _kinds(first) == "Begin Relation Insert Insert Relation Insert Relation Insert Commit"
    assert _kinds(second) == "Begin Update Update Update Update Delete Delete LogicalMessage Commit"
    # TRUNCATE gives the tables new files, whose invalidation makes pgoutput describe them again
    assert _kinds(third) == "Begin Relation Relation Truncate Commit"

    items, audit, docs = _all(first, Relation)
    assert (items.namespace, items.name, items.replica_identity, items.key_columns) == ("public", "items", "d", ("id",))
    assert [c.name for c in items.columns] == list(ROW_1)
    price, label = items.columns[3], items.columns[17]
    assert (price.type_oid, price.typmod, label.type_oid, label.typmod) == (1700, (12 << 16 | 4) + 4, 1043, 20 + 4)
    assert (audit.replica_identity, audit.key_columns) == ("f", ("id", "note"))  # FULL: every column is the key
    assert _all(third, Relation) == [items, audit]

    def row(relation: Relation, data: TupleData | None) -> dict[str, Any]:
        assert data is not None
        return decoder.values(relation.oid, data)

    ins_1, ins_2, ins_audit, ins_docs = _all(first, Insert)
    assert [i.relation_oid for i in (ins_1, ins_2, ins_audit)] == [items.oid, items.oid, audit.oid]
    assert row(items, ins_1.new) == ROW_1
    assert row(items, ins_2.new) == {**ALL_NULL, "id": 2}
    assert row(audit, ins_audit.new) == {"id": 1, "note": "first"}
    assert row(docs, ins_docs.new) == {"id": 1, "body": BODY, "version": 1}

    renamed, rekeyed, noted, toasted = _all(second, Update)
    assert (renamed.old, renamed.key) == (None, None)  # the key did not change
    assert row(items, renamed.new) == {**ROW_1, "name": "renamed"}
    assert rekeyed.old is None
    assert (row(items, rekeyed.key), row(items, rekeyed.new)) == ({**ALL_NULL, "id": 2}, {**ALL_NULL, "id": 3})
    assert noted.key is None
    assert (row(audit, noted.old), row(audit, noted.new)) == ({"id": 1, "note": "first"}, {"id": 1, "note": "second"})
    assert toasted.new == ("1", UNCHANGED_TOAST, "2")
    assert row(docs, toasted.new) == {"id": 1, "body": UNCHANGED_TOAST, "version": 2}

    del_item, del_audit = _all(second, Delete)
    assert (del_item.old, row(items, del_item.key)) == (None, {**ALL_NULL, "id": 1})
    assert (del_audit.key, row(audit, del_audit.old)) == (None, {"id": 1, "note": "second"})
    (message,) = _all(second, LogicalMessage)
    assert message == LogicalMessage(True, message.lsn, "cdc-test", b"hello")

    (truncate,) = _all(third, Truncate)
    assert truncate == Truncate((items.oid, audit.oid), cascade=False, restart_identity=True)

    # Transaction boundaries: a Begin names its Commit's LSN and time; LSNs and xids only grow.
    begins = [b for t in (first, second, third) for b in _all(t[:1], Begin)]
    commits = [c for t in (first, second, third) for c in _all(t[-1:], Commit)]
    for begin, commit in zip(begins, commits, strict=True):
        assert (begin.final_lsn, begin.commit_ts) == (commit.commit_lsn, commit.commit_ts)
        assert commit.commit_lsn < commit.end_lsn
        assert commit.commit_ts.tzinfo is UTC and abs(datetime.now(UTC) - commit.commit_ts) < timedelta(minutes=1)
    assert begins[0].final_lsn < message.lsn <= begins[1].final_lsn  # the end of its record: here, the commit's start
    assert [c.commit_lsn for c in commits] == sorted({c.commit_lsn for c in commits})
    assert [b.xid for b in begins] == sorted({b.xid for b in begins})
    assert pg_db.rows("SELECT %s::pg_lsn <= pg_current_wal_lsn()", format_lsn(commits[-1].end_lsn)) == [(True,)]


def test_timestamptz_values_come_back_in_utc_whatever_the_sessions_time_zone(pg_db: PgServer) -> None:
    pg_db.execute("CREATE TABLE t (id int PRIMARY KEY, at timestamptz)", "CREATE PUBLICATION pub FOR TABLE t")
    slot = unique_name("slot")
    pg_db.execute(f"SELECT pg_create_logical_replication_slot('{slot}', 'pgoutput')")
    _commit(pg_db, "INSERT INTO t VALUES (1, '2024-06-01 12:00:00+00')")

    options = {"proto_version": "1", "publication_names": "pub"}
    decoder = Decoder()
    payloads = _read(pg_db, slot, options, commits=1, dsn=f"{pg_db.dsn} options='-c TimeZone=Asia/Kolkata'")
    (insert,) = (m for m in map(decoder.decode, payloads) if isinstance(m, Insert))
    assert insert.new == ("1", "2024-06-01 17:30:00+05:30")
    assert decoder.values(insert.relation_oid, insert.new) == {"id": 1, "at": datetime(2024, 6, 1, 12, tzinfo=UTC)}


# --- bytes no server should send ---------------------------------------------------------------


def _relation_payload(oid: int = 16385) -> bytes:
    columns = b"".join(
        struct.pack("!B", key) + name + b"\0" + struct.pack("!Ii", type_oid, -1)
        for key, name, type_oid in ((1, b"id", 23), (0, b"born", 1082))
    )
    return b"R" + struct.pack("!I", oid) + b"public\0t\0d" + struct.pack("!h", 2) + columns


def _insert_payload(oid: int = 16385, born: bytes = b"2024-01-02") -> bytes:
    values = b"t" + struct.pack("!i", 1) + b"7" + b"t" + struct.pack("!i", len(born)) + born
    return b"I" + struct.pack("!I", oid) + b"N" + struct.pack("!h", 2) + values


def test_a_relation_and_its_insert_decode() -> None:
    decoder = Decoder()
    relation = decoder.decode(_relation_payload())
    assert isinstance(relation, Relation) and relation.key_columns == ("id",)
    insert = decoder.decode(_insert_payload())
    assert insert == Insert(16385, ("7", "2024-01-02"))
    assert decoder.values(16385, insert.new) == {"id": 7, "born": date(2024, 1, 2)}


@pytest.mark.parametrize("payload", [_relation_payload(), _insert_payload()], ids=["relation", "insert"])
def test_a_cut_or_padded_message_is_malformed(payload: bytes) -> None:
    decoders = [parse, change] if payload[0] in ROW_CHANGES else [parse]
    for decode in decoders:  # the stream's hot path checks what parse checks
        for end in range(1, len(payload)):
            with pytest.raises(PgOutputError, match="malformed"):
                decode(payload[:end])
        with pytest.raises(PgOutputError, match="1 bytes follow its last field"):
            decode(payload + b"\0")


@pytest.mark.parametrize(
    ("payload", "problem"),
    [
        (b"", "an empty pgoutput message"),
        (b"Z\0", "unknown pgoutput message type `Z`"),
        (b"S" + struct.pack("!IB", 1234, 1), "Stream Start.*without the `streaming` and `two_phase` options"),
        (b"I" + struct.pack("!I", 1) + b"N" + struct.pack("!h", 1) + b"b", "without the `binary` option"),
        (b"I" + struct.pack("!I", 1) + b"N" + struct.pack("!h", 1) + b"t\xff\xff\xff\xff", "a value of -1 bytes"),
        (b"D" + struct.pack("!I", 1) + b"N" + struct.pack("!h", 0), "`N` where `K` or `O` belongs"),
        (b"I" + struct.pack("!I", 1) + b"N" + struct.pack("!h", 1) + b"t\0\0\0\1\xff", "not UTF-8"),
    ],
)
def test_what_the_decoder_cannot_read_fails_and_says_why(payload: bytes, problem: str) -> None:
    with pytest.raises(PgOutputError, match=problem):
        parse(payload)
    if payload[:1] and payload[0] in ROW_CHANGES:
        with pytest.raises(PgOutputError, match=problem):
            change(payload)


def test_a_change_to_a_table_never_described_fails() -> None:
    decoder = Decoder()
    insert = decoder.decode(_insert_payload(oid=99))
    assert isinstance(insert, Insert)
    with pytest.raises(PgOutputError, match="relation 99, which this stream never described"):
        decoder.values(99, insert.new)


def test_a_value_python_cannot_hold_is_a_data_error() -> None:
    decoder = Decoder()
    decoder.decode(_relation_payload())
    with pytest.raises(DataError, match=r"`public.t`.`born`: 'infinity' is no date"):
        decoder.values(16385, ("1", "infinity"))


def test_the_unchanged_toast_marker_stays_one_object_and_lsns_print_as_postgres_does() -> None:
    assert pickle.loads(pickle.dumps(UNCHANGED_TOAST)) is UNCHANGED_TOAST
    assert format_lsn(0x16_B374D848) == "16/B374D848"
    assert format_lsn(0) == "0/0"


# --- helpers -----------------------------------------------------------------------------------


def _commit(db: PgServer, *statements: str) -> None:
    """`statements` in one transaction."""
    conn = psycopg2.connect(db.dsn)
    try:
        with conn, conn.cursor() as cur:
            for statement in statements:
                cur.execute(statement)
    finally:
        conn.close()


def _read(db: PgServer, slot: str, options: dict[str, str], *, commits: int, dsn: str | None = None) -> list[bytes]:
    """The slot's messages up to its `commits`th Commit, read within `READ_TIMEOUT`."""
    conn = psycopg2.connect(dsn or db.dsn, connection_factory=LogicalReplicationConnection)
    try:
        cur = conn.cursor()
        cur.start_replication(slot_name=slot, decode=False, options=options)
        payloads: list[bytes] = []
        deadline = time.monotonic() + READ_TIMEOUT
        while sum(p[:1] == b"C" for p in payloads) < commits:
            message = cur.read_message()
            if message is not None:
                payloads.append(message.payload)
                continue
            if (left := deadline - time.monotonic()) <= 0:
                kinds = "".join(chr(p[0]) for p in payloads)
                pytest.fail(f"not {commits} commits from slot `{slot}` in {READ_TIMEOUT:.0f}s; read `{kinds}`")
            select.select([cur], [], [], min(left, 0.5))
        return payloads
    finally:
        conn.close()


def _transactions(messages: list[PgOutputMessage]) -> list[list[PgOutputMessage]]:
    """`messages` cut after each Commit."""
    transactions: list[list[PgOutputMessage]] = [[]]
    for message in messages:
        transactions[-1].append(message)
        if isinstance(message, Commit):
            transactions.append([])
    assert transactions.pop() == []
    return transactions


def _kinds(messages: list[PgOutputMessage]) -> str:
    return " ".join(type(m).__name__ for m in messages)


_Message = TypeVar("_Message", bound=PgOutputMessage)


def _all(messages: list[PgOutputMessage], kind: type[_Message]) -> list[_Message]:
    return [m for m in messages if isinstance(m, kind)]
