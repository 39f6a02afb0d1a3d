"""A hostile MySQL server for tests: it speaks just enough of the protocol (handshake v10, any
login, OK to every statement, an empty result to a SELECT) and answers the statements it chooses
with a LOCAL INFILE request (0xFB + a file name of its choosing), recording every byte clients send."""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

__all__ = ["FakeMySql", "fake_mysql"]

_CAPABILITIES = 0x0000_0001 | 0x0000_0008 | 0x0000_0080 | 0x0000_0200 | 0x0000_2000 | 0x0000_8000 | 0x0008_0000
_CAPABILITIES |= 0x0001_0000 | 0x0002_0000  # multi statements, multi results


def _ok(seq: int) -> bytes:
    return _packet(seq, b"\x00\x00\x00\x02\x00\x00\x00")  # OK: 0 rows, no insert id, autocommit, 0 warnings


def _packet(seq: int, payload: bytes) -> bytes:
    return struct.pack("<I", len(payload))[:3] + bytes([seq & 0xFF]) + payload


def _lenenc(text: bytes) -> bytes:
    return bytes([len(text)]) + text


def _empty_result(seq: int) -> bytes:
    """One VARCHAR column `x`, no rows (column count, definition, EOF, EOF)."""
    column = b"".join(_lenenc(s) for s in (b"def", b"", b"", b"", b"x", b"x"))
    column += b"\x0c" + struct.pack("<HIBHB", 33, 255, 253, 0, 0) + b"\x00\x00"
    eof = b"\xfe\x00\x00\x02\x00"
    return _packet(seq, b"\x01") + _packet(seq + 1, column) + _packet(seq + 2, eof) + _packet(seq + 3, eof)


@dataclass
class FakeMySql:
    """`port`; `asks(statement)`: the file name to request in answer to it, None for none."""

    port: int
    asks: Callable[[str], bytes | None]
    statements: list[str] = field(default_factory=list)
    received: bytearray = field(default_factory=bytearray)  # every byte the clients sent after a request
    requests: int = 0


def _read_packet(conn: socket.socket) -> tuple[int, bytes] | None:
    header = _read_exactly(conn, 4)
    if header is None:
        return None
    length = header[0] | header[1] << 8 | header[2] << 16
    payload = _read_exactly(conn, length)
    return (header[3], payload) if payload is not None else None


def _read_exactly(conn: socket.socket, n: int) -> bytes | None:
    data = b""
    while len(data) < n:
        chunk = conn.recv(n - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def _serve_client(conn: socket.socket, server: FakeMySql) -> None:
    with conn:
        conn.settimeout(30)
        salt = b"abcdefgh" + b"ijklmnopqrst"
        greeting = (
            b"\x0a5.7.99-fake\x00"
            + struct.pack("<I", 7)
            + salt[:8]
            + b"\x00"
            + struct.pack("<H", _CAPABILITIES & 0xFFFF)
            + bytes([33])
            + struct.pack("<H", 2)
            + struct.pack("<H", _CAPABILITIES >> 16)
            + bytes([21])
            + b"\x00" * 10
            + salt[8:]
            + b"\x00"
            + b"mysql_native_password\x00"
        )
        conn.sendall(_packet(0, greeting))
        if _read_packet(conn) is None:  # the login: any is fine
            return
        conn.sendall(_ok(2))
        while (packet := _read_packet(conn)) is not None:
            _, payload = packet
            if not payload or payload[0] == 0x01:  # COM_QUIT
                return
            if payload[0] != 0x03:  # COM_PING, COM_INIT_DB, …
                conn.sendall(_ok(1))
                continue
            statement = payload[1:].decode("utf-8", "replace")
            server.statements.append(statement)
            if (name := server.asks(statement)) is not None:
                server.requests += 1
                conn.sendall(_packet(1, b"\xfb" + name))
                seq = 1
                while (data := _read_packet(conn)) is not None:
                    seq = data[0]
                    if not data[1]:  # the empty packet: the end of the file
                        break
                    server.received += data[1]
                conn.sendall(_ok(seq + 1))
            elif statement.lstrip().upper().startswith(("SELECT", "SHOW")):
                conn.sendall(_empty_result(1))
            else:
                conn.sendall(_ok(1))


@contextmanager
def fake_mysql(asks: Callable[[str], bytes | None]) -> Iterator[FakeMySql]:
    """A FakeMySql on a free loopback port, serving each client in a thread, until the block ends."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    server = FakeMySql(listener.getsockname()[1], asks)

    listener.settimeout(0.05)  # to see `stop` soon: a blocked accept() outlives close()
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            conn.settimeout(None)
            threading.Thread(target=_serve_client, args=(conn, server), daemon=True).start()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        stop.set()
        thread.join(timeout=5)
        listener.close()
