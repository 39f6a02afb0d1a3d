"""Where objects go: an S3 bucket (AWS or any S3-compatible endpoint) or a local directory.

Both are pyarrow file systems (`S3FileSystem` with `endpoint_override`, `LocalFileSystem`), so one
writer serves both and a user's MinIO is reached through the same client as AWS. A `Store` is
plain data (no open client) so that Spark can ship it to the executors, which write their own
files; its credentials never appear in its repr, in a log line or in an error (`scrub`).
"""

from __future__ import annotations

import os
import socket
import threading
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from connect_core.connectors.objectstore.config import S3SinkConfig
from connect_core.sdk import ConfigError, LineageDataset, RetriableError
from connect_core.sdk.config import is_placeholder

__all__ = ["Store"]


@dataclass(frozen=True)
class Store:
    """`root` is the bucket (S3) or the directory (local) keys are relative to."""

    kind: str  # "s3" or "local"
    root: str
    region: str = "us-east-1"
    endpoint: str | None = None
    access_key: str | None = field(default=None, repr=False)
    secret_key: str | None = field(default=None, repr=False)

    @classmethod
    def from_config(cls, cfg: S3SinkConfig) -> Store:
        """The store of a task's (resolved, confined) config. A `file://` store is only ever the
        `store.local.path` the runtime confined: one that came out of a placeholder only now was
        never checked, so it is refused."""
        if cfg.store_local_path is not None:
            return cls("local", cfg.store_local_path)
        if (cfg.store_url or "").startswith("file:"):
            raise ConfigError(
                "a `file://` `store.url` must be written out, not come from a config provider: its directory is "
                "checked against `file.allowed.paths` when the connector is created",
                {"store.url": ["a local store cannot be a placeholder"]},
            )
        return cls(
            "s3",
            str(cfg.s3_bucket_name),
            cfg.s3_region,
            cfg.store_url.rstrip("/") if cfg.store_url else None,
            cfg.aws_access_key_id,
            cfg.aws_secret_access_key,
        )

    # -- the client --------------------------------------------------------------

    def filesystem(self, *, timeout_s: float | None = None) -> Any:
        from pyarrow import fs

        if self.kind == "local":
            return fs.LocalFileSystem()
        options: dict[str, Any] = {"region": self.region}
        if self.endpoint:
            options["endpoint_override"] = self.endpoint
            options["scheme"] = urlsplit(self.endpoint).scheme
        if self.access_key is not None:
            options.update(access_key=self.access_key, secret_key=self.secret_key)
        if timeout_s is not None:
            options.update(
                connect_timeout=timeout_s,
                request_timeout=timeout_s,
                retry_strategy=fs.AwsStandardS3RetryStrategy(max_attempts=1),
            )
        return fs.S3FileSystem(**options)

    def path(self, key: str) -> str:
        return f"{self.root}/{key}"

    def scrub(self, text: str) -> str:
        """`text` without the credentials (an SDK's message may echo what it was given)."""
        for secret in (self.secret_key, self.access_key):
            if secret:
                text = text.replace(secret, "********")
        return text

    def where(self) -> str:
        """The store in words, for messages (never a credential)."""
        return (
            f"directory `{self.root}`" if self.kind == "local" else f"bucket `{self.root}` at {self.endpoint or 'AWS'}"
        )

    # -- writing -----------------------------------------------------------------

    def write(self, filesystem: Any, key: str, payload: Any) -> int:
        """Write one object from `payload(stream)`; its size. On S3 an object appears whole when its
        upload completes; locally the file is written under a hidden temporary name in its directory
        and renamed, so a reader (or a crash) never sees half a file under the real name."""
        target = self.path(key)
        try:
            if self.kind == "s3":
                with filesystem.open_output_stream(target, compression=None) as out:
                    payload(out)
                    return int(out.tell())
            directory, name = target.rsplit("/", 1)
            self._inside_root(directory)  # what exists of it: before anything is made there
            filesystem.create_dir(directory, recursive=True)
            self._inside_root(directory)
            temp = f"{directory}/.{name}.{uuid.uuid4().hex}.tmp"
            try:
                with filesystem.open_output_stream(temp, compression=None) as out:
                    payload(out)
                    size = int(out.tell())
                filesystem.move(temp, target)
            except BaseException:
                if os.path.lexists(temp):
                    os.unlink(temp)
                raise
            return size
        except OSError as exc:
            raise RetriableError(f"cannot write `{key}` to the {self.where()}: {self.scrub(str(exc))}") from None

    def _inside_root(self, directory: str) -> None:
        """A local directory (or its nearest existing ancestor) resolves inside the store's root: a
        symbolic link planted under the root since create cannot take the writes elsewhere."""
        existing = directory
        while not os.path.lexists(existing) and existing.rstrip("/") != self.root.rstrip("/"):
            existing = os.path.dirname(existing)
        root = os.path.realpath(self.root)
        if not Path(os.path.realpath(existing)).is_relative_to(root):
            shown = os.path.relpath(existing, self.root)
            raise ConfigError(
                f"`{shown}` under the {self.where()} leads out of it (a symbolic link): nothing written there",
                {"store.url": ["a directory under the store is a symbolic link out of it"]},
            )

    # -- create-time checks --------------------------------------------------------

    def probe(self, timeout_ms: int) -> dict[str, list[str]]:
        """At create: whether the bucket answers, within `timeout_ms` in all (the SDK's own lookups of
        credentials included: it runs in a thread the check stops waiting for)."""
        if (
            self.kind != "s3"
            or timeout_ms == 0
            or any(
                v is not None and is_placeholder(v)
                for v in (self.root, self.endpoint, self.access_key, self.secret_key)
            )
        ):
            return {}
        from pyarrow import fs

        found: list[Any] = []

        def look() -> None:
            try:
                found.append(self.filesystem(timeout_s=timeout_ms / 1000).get_file_info(self.root).type)
            except Exception as exc:  # an SDK error of any kind: reported, scrubbed
                found.append(exc)

        thread = threading.Thread(target=look, name="s3-probe", daemon=True)
        thread.start()
        thread.join(timeout_ms / 1000 + 0.5)
        if not found:
            return {"store.url": [f"the {self.where()} did not answer within {timeout_ms} ms (probe.timeout.ms)"]}
        result = found[0]
        if isinstance(result, Exception):
            reason = self.scrub(str(result)).split("\n")[0][:300]
            return {"store.url": [f"the {self.where()} could not be checked: {reason}"]}
        if result == fs.FileType.NotFound:
            return {"s3.bucket.name": [f"the {self.where()} does not exist; create it first"]}
        return {}

    # -- lineage -------------------------------------------------------------------

    def dataset(self, prefix: str, topic: str) -> LineageDataset:
        """A topic's objects as OpenLineage names them: `s3://bucket` + key prefix, or `file://host` + path."""
        if self.kind == "s3":
            return LineageDataset(f"s3://{self.root}", f"{prefix}/{topic}", topic)
        return LineageDataset(f"file://{socket.gethostname()}", f"{self.root.rstrip('/')}/{prefix}/{topic}", topic)
