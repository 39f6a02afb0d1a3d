"""Where each topic's table is, how delta-rs reaches it, and what a message may say about it.

A local table's directory is the confined `delta.table.path` (the runtime resolved it and checked
it against `file.allowed.paths` before the task started) with `${topic}` filled in. The filled-in
directory is resolved again and must still lie under the part of the path before `${topic}`:
a symlink named like a topic must not lead out of the allowed directory. A table on S3 is its URI
with the topic filled in, reached with the allow-listed storage options; their secret values
never appear in a message (`scrub`), whatever delta-rs echoes.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from connect_core.connectors.lakehouse.delta.config import TOPIC, DeltaSinkConfig, problems
from connect_core.sdk import ConfigError, LineageDataset, RetriableError, check_topic_name

if TYPE_CHECKING:
    from deltalake import DeltaTable

__all__ = ["Location", "checked", "locate"]

_SECRET_OPTIONS = ("aws_access_key_id", "aws_secret_access_key", "aws_session_token")


@dataclass(frozen=True)
class Location:
    """One table: `uri` as delta-rs is given it (an absolute directory when `local`, or `s3://…`)."""

    uri: str
    local: bool
    storage: dict[str, str] = field(default_factory=dict, repr=False)

    def scrub(self, text: str) -> str:
        """`text` without the credentials of the storage options."""
        for name in _SECRET_OPTIONS:
            secret = self.storage.get(name)
            if secret:
                text = text.replace(secret, "********")
        return text

    def load(self) -> DeltaTable | None:
        """The table, or None when there is none yet; RetriableError when the store does not answer."""
        from deltalake import DeltaTable
        from deltalake.exceptions import DeltaError, TableNotFoundError

        try:
            return DeltaTable(self.uri, storage_options=dict(self.storage) or None)
        except TableNotFoundError:
            return None
        except (OSError, DeltaError) as exc:
            raise RetriableError(f"Delta table `{self.uri}` cannot be read: {self.scrub(str(exc))[:500]}") from None

    def dataset(self, topic: str | None = None) -> LineageDataset:
        """The table as OpenLineage names it: `file://host` + its path, or `s3://bucket` + its key prefix."""
        if self.local:
            return LineageDataset(f"file://{socket.gethostname()}", self.uri, topic)
        parts = urlsplit(self.uri)
        return LineageDataset(f"s3://{parts.hostname}", parts.path.strip("/"), topic)


def checked(config: DeltaSinkConfig) -> DeltaSinkConfig:
    """`config` if it has no problem (checked again where it is used: placeholders are filled by now)."""
    found = problems(config)
    if found:
        keys = ", ".join(f"`{k}`: {'; '.join(v)}" for k, v in sorted(found.items()))
        raise ConfigError(f"the Delta sink's config is not valid: {keys}", found)
    return config


def locate(config: DeltaSinkConfig, topic: str) -> Location:
    """The table of `topic` (the records' topic after the sink's transforms)."""
    try:
        check_topic_name(topic)  # a router's output names a directory: a topic name, or nothing
    except ValueError as exc:
        raise ConfigError(f"the transforms route records to an invalid topic name: {exc}") from None
    if config.table_path is not None:
        return Location(_local(config.table_path, topic), local=True)
    return Location(str(config.table_uri).replace(TOPIC, topic), local=False, storage=config.storage_options())


def _local(template: str, topic: str) -> str:
    template = os.path.expanduser(template)
    parts = template.split("/")
    cut = next((i for i, p in enumerate(parts) if TOPIC in p), len(parts))
    base = os.path.realpath("/".join(parts[:cut]) or "/")
    real = os.path.realpath(template.replace(TOPIC, topic))
    if not Path(real).is_relative_to(base):
        raise ConfigError(
            f"the table directory of topic `{topic}` under `delta.table.path` leads out of `{base}` (a symlink): refused",
            {"delta.table.path": [f"the directory of topic `{topic}` is a symlink out of the configured directory"]},
        )
    _no_links_below(real)
    return real


def _no_links_below(table: str) -> None:
    """delta-rs follows links below the table's directory (its `_delta_log`, partition directories,
    data files), which could take its writes out of the allowed directories: a table holding a
    symbolic link is refused (the sink itself never makes one)."""
    for root, dirs, files in os.walk(table):  # links to directories are listed, never followed
        for name in (*dirs, *files):
            if os.path.islink(os.path.join(root, name)):
                shown = os.path.relpath(os.path.join(root, name), table)
                raise ConfigError(
                    f"the Delta table at `{table}` holds a symbolic link (`{shown}`): refused, as delta-rs "
                    "would follow it out of the allowed directories",
                    {"delta.table.path": ["the table's directory holds a symbolic link"]},
                )
