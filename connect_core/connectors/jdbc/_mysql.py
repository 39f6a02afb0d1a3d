"""PyMySQL connections that never send a file of this host to the server.

`LOAD DATA LOCAL INFILE 'x'` makes the server answer with a request for a file (a 0xFB packet
with its name) which the client reads and sends. The server names the file, not the statement:
a hostile or compromised server may answer `LOAD DATA`, or any other statement, with a request
for `/proc/self/environ`, and PyMySQL (`local_infile=True`) sends whatever is asked for.

Here no file is ever read. A `LOAD DATA` goes through `load_data`, which names a fresh token as
the file and sends the bytes it was given, from memory, to a request for exactly that name, once.
Any other request (another name, a second one, one in answer to another statement, or on a
connection opened without `local_data`) gets an empty file and fails the statement with
`LocalFileRefused`, naming what the server asked for. PyMySQL's own file sender is switched off
on every connection (`_local_infile`); only a connection opened with `local_data` tells the server
it may load local data at all (the client's LOCAL_FILES capability).
"""

from __future__ import annotations

import contextlib
import uuid
from typing import Any

import pymysql
import pymysql.connections

from connect_core.sdk.errors import FatalError

__all__ = ["GuardedConnection", "LocalFileRefused", "guarded_connect"]

#: Bytes per packet of the data sent (PyMySQL's own size).
_CHUNK = 16 * 1024


class LocalFileRefused(FatalError):
    """The server asked for a local file the statement did not name: nothing was sent."""


class _GuardedResult(pymysql.connections.MySQLResult):
    def _read_load_local_packet(self, first_packet: Any) -> None:
        conn: GuardedConnection = self.connection
        requested = bytes(first_packet.get_all_data()[1:])
        expected, conn._expected_file = conn._expected_file, None  # one request per statement
        if expected is None or requested != expected[0]:
            conn.write_packet(b"")  # an empty file: nothing of this host goes out
            with contextlib.suppress(Exception):  # the server's answer to it, to stay in step
                conn._read_packet()
            raise LocalFileRefused(
                f"{conn.host}:{conn.port} asked for the local file {requested[:200]!r}, which "
                + ("no statement named" if expected is None else "its LOAD DATA statement did not name")
                + ": refused, nothing sent. A server asking for other files than the staging data is "
                "hostile or compromised: check the server `connection.url` names"
            )
        data = expected[1]
        size = min(conn.max_allowed_packet, _CHUNK)
        try:
            for start in range(0, len(data), size):
                conn.write_packet(data[start : start + size])
        finally:
            conn.write_packet(b"")  # the end of the data
            ok_packet = conn._read_packet()
        if not ok_packet.is_ok_packet():
            raise pymysql.err.OperationalError(2014, "Commands out of sync after LOAD DATA LOCAL")
        self._read_ok_packet(ok_packet)


class GuardedConnection(pymysql.connections.Connection):
    """A PyMySQL connection whose only local data is what `load_data` is given (see the module)."""

    def __init__(self, *, local_data: bool = False, **kwargs: Any) -> None:
        kwargs.pop("defer_connect", None)
        kwargs.pop("local_infile", None)
        super().__init__(local_infile=local_data, defer_connect=True, **kwargs)
        self._local_infile = False  # PyMySQL's file sender, for results read by its own classes
        self._expected_file: tuple[bytes, bytes] | None = None
        self.connect()

    def _read_query_result(self, unbuffered: bool = False) -> Any:
        self._result = None
        result = _GuardedResult(self)
        if unbuffered:
            result.init_unbuffered_query()
        else:
            result.read()
        self._result = result
        if result.server_status is not None:
            self.server_status = result.server_status
        return result.affected_rows

    def load_data(self, cursor: Any, statement: str, data: bytes) -> None:
        """Run `statement` (`LOAD DATA LOCAL INFILE %s …`) with `data` as the file's content."""
        token = f"connect-stage-{uuid.uuid4().hex}.tsv"
        self._expected_file = (token.encode(), data)
        try:
            cursor.execute(statement, (token,))
        finally:
            self._expected_file = None


def guarded_connect(*, local_data: bool = False, **kwargs: Any) -> GuardedConnection:
    """`pymysql.connect(**kwargs)`, guarded; `local_data`: `load_data` may send data."""
    return GuardedConnection(local_data=local_data, **kwargs)
