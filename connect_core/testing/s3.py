"""An S3 server on a free loopback port, for the object-storage tests and benchmarks.

The S3 API is served by moto's server (`moto[server]`, `moto.server.ThreadedMotoServer`): a real
HTTP endpoint speaking the S3 protocol, so the code under test goes through the same client
(pyarrow's `S3FileSystem`, the AWS SDK for C++) that a user's AWS S3 or MinIO would see. It keeps
its objects in memory and forgets them when it stops.
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator
from dataclasses import dataclass

__all__ = ["S3Server", "s3_server"]

#: moto accepts any credentials; these are what the tests give, so they can check no log shows them.
ACCESS_KEY = "AKIATESTCONNECT0000"
SECRET_KEY = "connect-core-s3-test-secret-0123456789"


@dataclass(frozen=True)
class S3Server:
    """Where the server listens (`url`, the `store.url` a connector is given) and its credentials."""

    url: str
    access_key: str = ACCESS_KEY
    secret_key: str = SECRET_KEY
    region: str = "us-east-1"

    def filesystem(self) -> object:
        """A pyarrow `S3FileSystem` on this server, as a reader independent of the connector's."""
        from pyarrow import fs

        return fs.S3FileSystem(
            access_key=self.access_key,
            secret_key=self.secret_key,
            region=self.region,
            endpoint_override=self.url,
            allow_bucket_creation=True,
        )

    def create_bucket(self, name: str) -> None:
        self.filesystem().create_dir(name)  # type: ignore[attr-defined]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def s3_server() -> Iterator[S3Server]:
    """moto's S3 server on 127.0.0.1 and a free port, stopped on exit."""
    from moto.server import ThreadedMotoServer

    port = _free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield S3Server(f"http://127.0.0.1:{port}")
    finally:
        server.stop()
