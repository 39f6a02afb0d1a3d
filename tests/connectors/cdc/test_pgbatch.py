"""The PostgreSQL source's column-at-a-time decoding of its stream (`pgbatch`) gives exactly the events
row-at-a-time decoding gives (`pgoutput.change` into a `ChangeTable`): for a real server's stream
of every column type, and for a long generated one with every message shape, NULLs, unchanged
TOAST values, keys that change, a table described anew mid-run and truncates. A message that does
not read fails the run, naming what is wrong with it."""

from __future__ import annotations

import bisect
import contextlib
import logging
import os
import random
import struct
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest

from connect_core.connectors.cdc.config import PostgresCdcConfig
from connect_core.connectors.cdc.envelope import UNAVAILABLE, ChangeTable, arrow_type
from connect_core.connectors.cdc.postgres import _server, pgbatch, pgoutput
from connect_core.connectors.cdc.postgres import _stream as streaming
from connect_core.connectors.cdc.postgres.pgoutput import (
    ROW_CHANGES,
    UNCHANGED_TOAST,
    PgOutputError,
    TupleData,
    change,
)
from connect_core.testing.servers import PgServer, unique_name
from tests.connectors.cdc.test_pgoutput import TABLES, TRANSACTIONS, _commit, _read

# --- the oracle: row-at-a-time decoding, as the source did before it decoded in bulk --------------


def _row(data: TupleData) -> tuple[Any, ...]:
    return tuple(UNAVAILABLE if v is UNCHANGED_TOAST else v for v in data)


def _key_differs(relation: Any, key: tuple[str, ...], old: TupleData, new: TupleData) -> bool:
    """Whether an update's old and new rows differ in the table's key (unchanged TOAST: no change)."""
    at = {c.name: i for i, c in enumerate(relation.columns)}
    return any(new[at[k]] is not UNCHANGED_TOAST and old[at[k]] != new[at[k]] for k in key if k in at)


def _reference(stream: streaming.Stream, topic: str) -> pa.Table:
    """`topic`'s events from its filed messages, each decoded on its own into a ChangeTable."""
    pieces = [p for p in stream._pieces[topic] if not isinstance(p, pgbatch.RowChanges) or p.messages]
    key = stream._tables[topic].key
    table: ChangeTable | None = None
    for piece in pieces:
        columns = [(c.name, arrow_type(c.type_oid, c.typmod)) for c in piece.relation.columns]
        if table is None:
            table = ChangeTable(topic, columns, key, text=True)
        table.describe(columns)
        if isinstance(piece, pgbatch.Truncated):
            table.add_row("t", None, None, piece.source, piece.ts_ms)
            continue
        for at, payload in enumerate(piece.messages):
            transaction = bisect.bisect_right(piece.starts, at) - 1
            source, ts = piece.sources[transaction], piece.ts_ms[transaction]
            kind, _, new, old, old_key = change(payload)
            if kind == ord("I"):
                table.add_row("c", None, _row(new), source, ts)  # type: ignore[arg-type]
            elif kind == ord("U"):
                first = old_key if old_key is not None else old
                if first is not None and _key_differs(piece.relation, key, first, new):  # type: ignore[arg-type]
                    table.add_row("d", _row(first), None, source, ts, tombstone=True)
                    table.add_row("c", None, _row(new), source, ts)  # type: ignore[arg-type]
                else:  # a key's old value that did not change (K) is no `before`
                    table.add_row("u", _row(old) if old is not None else None, _row(new), source, ts)  # type: ignore[arg-type]
            else:
                gone = old if old is not None else old_key
                table.add_row("d", _row(gone) if gone is not None else None, None, source, ts, tombstone=True)
    assert table is not None
    return table.table()


# --- a stream from a list of messages ------------------------------------------------------------


class _Cursor:
    """A replication cursor that gives `payloads`; with `pause`, nothing (the server is busy) after
    every `pause` of them."""

    def __init__(self, payloads: list[bytes], pause: int = 0) -> None:
        self._left = iter(payloads)
        self._pause, self._given = pause, 0
        self.wal_end = 2**63
        self._readable, writer = os.pipe()  # what the stream selects on: always readable
        os.write(writer, b"x")
        os.close(writer)

    def fileno(self) -> int:
        return self._readable

    def start_replication(self, **_: Any) -> None:
        pass

    def send_feedback(self, **_: Any) -> None:
        pass

    def read_message(self) -> Any:
        self._given += 1
        if self._pause and self._given % (self._pause + 1) == 0:
            return None
        payload = next(self._left, None)
        return None if payload is None else type("Message", (), {"payload": payload})()


def _stream(
    monkeypatch: pytest.MonkeyPatch,
    cfg: PostgresCdcConfig,
    tables: list[Any],
    payloads: list[bytes],
    pause: int = 0,
    partitions: dict[str, Any] | None = None,
) -> Any:
    @contextlib.contextmanager
    def replication(_: Any) -> Iterator[Any]:
        yield type("Connection", (), {"cursor": lambda self: _Cursor(payloads, pause)})()

    monkeypatch.setattr(_server, "replication", replication)
    names = _server.Names(cfg.slot("batch"), cfg.publication("batch"), derived=False)
    stream = streaming.Stream(cfg, names, {t.qualified: t for t in tables}, logging.getLogger("test"), partitions)
    last = payloads[-1]
    assert last[:1] == b"C"
    (end,) = struct.unpack_from("!Q", last, 10)
    stream.reached = stream.read(1, end)
    if cfg.max_batch_size >= len(payloads) and cfg.max_batch_bytes >= sum(map(len, payloads)):
        assert stream.reached == end
    return stream


def _config(**server: Any) -> PostgresCdcConfig:
    return PostgresCdcConfig.model_validate(
        {
            "name": "batch",
            "connector.class": "PostgresCdcSourceConnector",
            "database.hostname": "127.0.0.1",
            "database.port": 5432,
            "database.user": "postgres",
            "database.dbname": "cdc",
            "topic.prefix": "srv",
            "slot.name": "s",
            "publication.name": "pub",
            "max.batch.size": 10_000_000,
            **server,
        }
    )


def _same(bulk: pa.Table, oracle: pa.Table) -> None:
    """Equal but for `ts_ms` (when the connector saw each event), which each sets from the clock."""
    assert bulk.schema == oracle.schema
    assert bulk.drop_columns(["ts_ms"]).to_pylist() == oracle.drop_columns(["ts_ms"]).to_pylist()
    assert bulk["ts_ms"].null_count == oracle["ts_ms"].null_count == sum(bulk["__tombstone"].to_pylist())


# --- a real server's stream ----------------------------------------------------------------------


def test_a_real_stream_of_every_column_type_decodes_as_row_at_a_time(
    pg_db: PgServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    pg_db.execute(*TABLES)
    slot = unique_name("slot")
    pg_db.execute(f"SELECT pg_create_logical_replication_slot('{slot}', 'pgoutput')")
    for statements in TRANSACTIONS:
        _commit(pg_db, *statements)
    payloads = _read(pg_db, slot, {"proto_version": "1", "publication_names": "pub"}, commits=len(TRANSACTIONS))
    cfg = _config(**{"database.port": pg_db.port, "database.user": pg_db.user, "database.dbname": pg_db.database})
    with _server.connect(cfg) as conn:
        tables = _server.captured_tables(conn, cfg)

    stream = _stream(monkeypatch, cfg, tables, payloads)
    bulk = stream.tables()
    assert sorted(bulk) == ["srv.public.audit", "srv.public.docs", "srv.public.items"]
    for topic, events in bulk.items():
        _same(events, _reference(stream, topic))
    items = bulk["srv.public.items"].to_pylist()
    # c, c, u, (key change: d, tombstone, c), d, tombstone, t
    assert [(e["op"], e["__tombstone"]) for e in items] == [
        ("c", False),
        ("c", False),
        ("u", False),
        ("d", False),
        (None, True),
        ("c", False),
        ("d", False),
        (None, True),
        ("t", False),
    ]
    assert items[0]["after"]["name"] == "Grüße, 世界 🚀" and items[0]["after"]["payload"] == b"\x00\xff\x10"
    assert [e["__key"] for e in items[3:6]] == [{"id": 2}, {"id": 2}, {"id": 3}]
    docs = bulk["srv.public.docs"].to_pylist()
    assert docs[1]["after"] == {"id": 1, "body": UNAVAILABLE, "version": 2}  # unchanged TOAST
    assert stream.count == 12  # 10 row changes, and the truncate of two captured tables


# --- a generated stream ---------------------------------------------------------------------------

_ITEMS = [("id", 20, -1, True), ("name", 25, -1, False), ("price", 1700, (10 << 16 | 2) + 4, False)]
_ITEMS += [("at", 1184, -1, False), ("ok", 16, -1, False), ("raw", 17, -1, False), ("n", 23, -1, False)]
_NOTES = [("id", 23, -1, True), ("body", 25, -1, False)]


def _relation(oid: int, name: str, columns: list[tuple[str, int, int, bool]], identity: bytes = b"d") -> bytes:
    body = struct.pack("!I", oid) + b"public\0" + name.encode() + b"\0" + identity + struct.pack("!h", len(columns))
    for column, type_oid, typmod, key in columns:
        body += bytes([key]) + column.encode() + b"\0" + struct.pack("!Ii", type_oid, typmod)
    return b"R" + body


def _tuple(values: list[Any]) -> bytes:
    out = struct.pack("!h", len(values))
    for value in values:
        if value is None:
            out += b"n"
        elif value is UNCHANGED_TOAST:
            out += b"u"
        else:
            raw = value.encode()
            out += b"t" + struct.pack("!i", len(raw)) + raw
    return out


def _value(rng: random.Random, type_oid: int, at: int) -> Any:
    roll = rng.random()
    if roll < 0.1:
        return None
    if roll < 0.15 and type_oid in (25, 17, 1700, 16):
        return UNCHANGED_TOAST
    return {
        20: str(at),
        23: str(rng.randint(-(2**31), 2**31 - 1)),
        25: rng.choice(["", "plain", "Grüße 世界 🚀", "a" * 300, 'quote\'s "and" \\ back']),
        1700: f"{rng.randint(-(10**7), 10**7)}.{rng.randint(0, 99):02d}",
        1184: f"2024-0{rng.randint(1, 9)}-1{rng.randint(0, 9)} 0{rng.randint(0, 9)}:30:00.{rng.randint(0, 999999):06d}+00",
        16: rng.choice("tf"),
        17: "\\x" + rng.randbytes(rng.randint(0, 6)).hex(),
    }[type_oid]


def _row_change(rng: random.Random, oid: int, columns: list[tuple[str, int, int, bool]], at: int) -> bytes:
    def row(keys_only: bool = False, key_value: int = at) -> bytes:
        values = [str(key_value) if key else (None if keys_only else _value(rng, t, at)) for _, t, _, key in columns]
        return _tuple([v if v is not UNCHANGED_TOAST or not keys_only else None for v in values])

    head = struct.pack("!I", oid)
    shape = rng.choice(["I", "I", "U", "UO", "UK", "DK", "DO"])
    moved = at + rng.choice([0, 1_000_000])  # an update's old key: the same, or another (the key changed)
    if shape == "I":
        return b"I" + head + b"N" + row()
    if shape == "U":
        return b"U" + head + b"N" + row()
    if shape == "UO":
        return b"U" + head + b"O" + row(key_value=moved) + b"N" + row()
    if shape == "UK":
        return b"U" + head + b"K" + row(keys_only=True, key_value=moved) + b"N" + row()
    return b"D" + head + shape[1].encode() + row(keys_only=shape == "DK")


def _generated(rng: random.Random) -> list[bytes]:
    """Transactions of inserts, updates and deletes to two tables; `items` gains a column and has
    `n` retyped (int → text) mid-run; a truncate between changes; a change to a table not captured."""
    lsn, payloads = 1 << 24, []
    items, notes = list(_ITEMS), list(_NOTES)
    payloads += [_relation(1, "items", items), _relation(2, "notes", notes), _relation(3, "other", notes)]
    at = 0
    for transaction in range(60):
        lsn += 1000
        payloads.append(b"B" + struct.pack("!QqI", lsn + 900, 700_000_000_000_000 + transaction, 500 + transaction))
        if transaction == 20:
            items = [*items[:-1], ("n", 25, -1, False), ("extra", 23, -1, False)]
            payloads.append(_relation(1, "items", items))
        if transaction == 40:
            payloads.append(b"T" + struct.pack("!iB", 1, 0) + struct.pack("!I", 2))
        for _ in range(rng.randint(1, 80)):
            at += 1
            oid, columns = rng.choice([(1, items), (1, items), (2, notes), (3, notes)])
            payloads.append(_row_change(rng, oid, columns, at))
        payloads.append(b"C" + struct.pack("!BQQq", 0, lsn + 900, lsn + 1000, 700_000_000_000_000 + transaction))
    return payloads


def _generated_tables() -> list[Any]:
    def table(name: str, columns: list[tuple[str, int, int, bool]]) -> Any:
        cols = tuple(pgoutput.Column(c, t, m, k) for c, t, m, k in columns)
        return _server.Table("public", name, cols, tuple(c for c, _, _, k in columns if k))

    return [table("items", _ITEMS), table("notes", _NOTES)]


@pytest.mark.parametrize(("seed", "pause"), [(1, 0), (2, 0), (3, 5), (4, 3)])
def test_a_generated_stream_decodes_as_row_at_a_time(seed: int, pause: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """With `pause`, the server is slow: the stream decodes what it has while it waits, in chunks
    of 7 changes that split transactions."""
    monkeypatch.setattr(streaming, "DECODE_CHUNK", 7)
    payloads = _generated(random.Random(seed))
    stream = _stream(monkeypatch, _config(), _generated_tables(), payloads, pause)
    chunks = [
        len(p._decoded) for pieces in stream._pieces.values() for p in pieces if isinstance(p, pgbatch.RowChanges)
    ]
    assert (sum(chunks) > 10) == bool(pause)  # decoded while streaming, or all at the end
    bulk = stream.tables()
    assert sorted(bulk) == ["srv.public.items", "srv.public.notes"]  # `other` is published, not captured
    for topic, events in bulk.items():
        _same(events, _reference(stream, topic))
    items = bulk["srv.public.items"]
    assert items.schema.field("after").type.get_field_index("extra") >= 0
    assert items.schema.field("after").type.field("n").type == pa.string()  # retyped mid-run: text
    assert "t" in bulk["srv.public.notes"]["op"].to_pylist()
    ops = items["op"].to_pylist()
    befores = items["before"].to_pylist()
    assert any(op == "u" and b is not None for op, b in zip(ops, befores, strict=True))  # O, the same key
    assert any(a == "d" and b == "c" for a, b in zip(ops, ops[2:], strict=False))  # a key change: d, tombstone, c
    rows = sum(1 for p in payloads if p[0] in ROW_CHANGES and struct.unpack_from("!I", p, 1)[0] != 3)
    assert stream.count == rows + 1  # and the truncate


@pytest.mark.parametrize("bound", [{"max.batch.size": 100}, {"max.batch.bytes": 70_000}])
def test_a_run_stops_at_the_first_commit_past_its_bound(bound: dict[str, int], monkeypatch: pytest.MonkeyPatch) -> None:
    payloads = _generated(random.Random(5))
    stream = _stream(monkeypatch, _config(**bound), _generated_tables(), payloads)
    changes = size = 0  # of every table, captured or not, up to each commit
    at = 0
    for payload in payloads:
        at += 1
        if payload[0] in ROW_CHANGES:
            changes, size = changes + 1, size + len(payload)
        elif payload[:1] == b"C" and (
            changes >= bound.get("max.batch.size", 2**62) or size >= bound.get("max.batch.bytes", 2**62)
        ):
            break
    assert at < len(payloads)  # the bound stopped the run before the stream's end
    (end_lsn,) = struct.unpack_from("!Q", payloads[at - 1], 10)
    assert stream.reached == end_lsn  # the position: just past the last whole transaction read
    captured = [p for p in payloads[:at] if p[0] in ROW_CHANGES and struct.unpack_from("!I", p, 1)[0] != 3]
    assert stream.count == len(captured) + any(p[:1] == b"T" for p in payloads[:at])
    assert sum(t.num_rows for t in stream.tables().values()) > 0


def test_a_table_without_a_key_has_no_key_and_no_tombstones(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(7)
    columns = [(c, t, m, False) for c, t, m, _ in _ITEMS]
    table = _server.Table("public", "items", tuple(pgoutput.Column(c, t, m, k) for c, t, m, k in columns), ())
    payloads = [_relation(1, "items", columns, b"f"), b"B" + struct.pack("!QqI", 900, 0, 1)]
    payloads += [
        b"D" + struct.pack("!I", 1) + b"O" + _tuple([_value(rng, t, i) for _, t, _, _ in columns]) for i in range(5)
    ]
    payloads += [b"C" + struct.pack("!BQQq", 0, 900, 1000, 0)]
    stream = _stream(monkeypatch, _config(), [table], payloads)
    (events,) = stream.tables().values()
    assert "__key" not in events.schema.names and not any(events["__tombstone"].to_pylist())
    _same(events, _reference(stream, "srv.public.items"))


# --- what does not read -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("bad", "problem"),
    [
        (b"I\x00\x00\x00\x01N\x00\x01t\x00\x00\x00\x05ab", "a value of 5 bytes"),  # cut
        (b"I\x00\x00\x00\x01N\x00\x02t\x00\x00\x00\x01at\x00\x00\x00\x01b", "a row of 2 columns"),
        (b"I\x00\x00\x00\x01N\x00\x01t\x00\x00\x00\x01\xff", "not UTF-8"),
        (b"I\x00\x00\x00\x01N\x00\x01t\x00\x00\x00\x01xy", "follow its last field"),  # padded
        (b"I\x00\x00\x00\x01N\x00\x01b\x00\x00\x00\x01x", "binary"),
        (b"D\x00\x00\x00\x01N\x00\x01n", "where `K` or `O` belongs"),
        (b"U\x00\x00\x00\x01K\x00\x01n", "ends inside a field"),  # no new row after the key
    ],
)
def test_a_message_that_does_not_read_fails_naming_why(
    bad: bytes, problem: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    columns = [("id", 25, -1, True)]
    table = _server.Table("public", "items", (pgoutput.Column("id", 25, -1, True),), ("id",))
    good = b"I" + struct.pack("!I", 1) + b"N" + _tuple(["ok"])
    payloads = [_relation(1, "items", columns), b"B" + struct.pack("!QqI", 900, 0, 1), good, bad, good]
    payloads.append(b"C" + struct.pack("!BQQq", 0, 900, 1000, 0))
    stream = _stream(monkeypatch, _config(), [table], payloads)
    with pytest.raises(PgOutputError, match=problem):
        stream.tables()


def test_a_key_changed_under_replica_identity_full_is_a_delete_and_a_create(
    pg_db: PgServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """FULL sends every update's whole old row (`O`): the key change is read from the values."""
    pg_db.execute(
        "CREATE TABLE full_rows (id int PRIMARY KEY, note text)",
        "ALTER TABLE full_rows REPLICA IDENTITY FULL",
        "CREATE PUBLICATION full_pub FOR TABLE full_rows",
    )
    slot = unique_name("slot")
    pg_db.execute(f"SELECT pg_create_logical_replication_slot('{slot}', 'pgoutput')")
    _commit(pg_db, "INSERT INTO full_rows VALUES (1, 'a')")
    _commit(pg_db, "UPDATE full_rows SET note = 'b' WHERE id = 1", "UPDATE full_rows SET id = 2 WHERE id = 1")
    payloads = _read(pg_db, slot, {"proto_version": "1", "publication_names": "full_pub"}, commits=2)
    cfg = _config(**{"database.port": pg_db.port, "database.user": pg_db.user, "database.dbname": pg_db.database})
    with _server.connect(cfg) as conn:
        tables = _server.captured_tables(conn, cfg)
    stream = _stream(monkeypatch, cfg, tables, payloads)
    events = stream.tables()["srv.public.full_rows"]
    _same(events, _reference(stream, "srv.public.full_rows"))
    assert [(e["op"], e["__key"], e["before"], e["after"]) for e in events.to_pylist()] == [
        ("c", {"id": 1}, None, {"id": 1, "note": "a"}),
        ("u", {"id": 1}, {"id": 1, "note": "a"}, {"id": 1, "note": "b"}),
        ("d", {"id": 1}, {"id": 1, "note": "b"}, None),
        (None, {"id": 1}, None, None),
        ("c", {"id": 2}, None, {"id": 2, "note": "b"}),
    ]


def test_a_change_sent_under_a_partitions_name_goes_to_its_tables_topic(monkeypatch: pytest.MonkeyPatch) -> None:
    """Before the publication publishes via the partitioned table, the server names the partition."""
    items, _ = _generated_tables()
    payloads = [_relation(9, "items_2024", _ITEMS), b"B" + struct.pack("!QqI", 900, 0, 1)]
    payloads += [b"I" + struct.pack("!I", 9) + b"N" + _tuple(["1", "x", None, None, "t", None, "5"])]
    payloads += [b"C" + struct.pack("!BQQq", 0, 900, 1000, 0)]
    stream = _stream(monkeypatch, _config(), [items], payloads, partitions={"public.items_2024": items})
    (events,) = stream.tables().values()
    assert list(stream.tables()) == ["srv.public.items"]
    assert events.to_pylist()[0]["after"]["id"] == 1 and events.to_pylist()[0]["source"]["table"] == "items_2024"
