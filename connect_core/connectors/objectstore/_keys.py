"""Object keys: the prefix from the config, the parts from the records, the file names.

A key is `<topics.dir>/<topic>/<encoded partition>/<topic>+<partition>+<start offset:010d><ext>`,
as Confluent's S3 sink names them. Every part is confined to its own path segments: the config's
prefix is checked at create (`check_prefix`), a record's value is percent-encoded into one segment
(`encode_value`), so no `/`, `..`, NUL or control character from a record can move an object out
of its topic's directory, on S3 (where `..` means nothing but a local mirror would resolve it) or
on a local directory (where it would).
"""

from __future__ import annotations

import re

from connect_core.sdk import DataError

__all__ = ["MAX_VALUE_CHARS", "check_prefix", "encode_value", "file_name", "object_key"]

#: A configured segment: letters, digits and `_ . = -`, never `.` or `..`.
_SEGMENT = re.compile(r"[A-Za-z0-9_.=-]{1,128}")
#: Characters a record's value keeps as they are in its segment; everything else is `%XX` (UTF-8).
_KEEP = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.")
#: The longest encoded value: S3 keys are at most 1024 bytes, most file systems' names 255.
MAX_VALUE_CHARS = 200
#: Hive's name for a null partition value (a string "null" would be the same directory).
NULL_VALUE = "__HIVE_DEFAULT_PARTITION__"


def check_prefix(prefix: str) -> str:
    """`prefix` (`topics.dir`) if every `/`-separated part is a plain name; ValueError otherwise."""
    if not prefix:
        raise ValueError("`topics.dir` cannot be empty: objects are written under it")
    for part in prefix.split("/"):
        if not _SEGMENT.fullmatch(part) or part in (".", ".."):
            raise ValueError(
                "each `/`-separated part is 1-128 ASCII letters, digits, `_`, `.`, `=` or `-`, and not `.` or `..`"
            )
    return prefix


def encode_value(field: str, value: object) -> str:
    """A record's value as one path segment: percent-encoded, never `.`/`..`, at most
    `MAX_VALUE_CHARS`; DataError (naming the field, not the value) when it is longer."""
    if value is None:
        return NULL_VALUE
    text = str(value).lower() if isinstance(value, bool) else str(value)
    encoded = "".join(c if c in _KEEP else "".join(f"%{b:02X}" for b in c.encode("utf-8")) for c in text)
    if encoded in ("", ".", ".."):
        encoded = encoded.replace(".", "%2E") or "%00empty"
    if len(encoded) > MAX_VALUE_CHARS:
        raise DataError(
            f"a value of partition field `{field}` is {len(encoded)} characters once encoded, longer than the "
            f"{MAX_VALUE_CHARS} an object key's part may take; partition by a shorter field"
        )
    return encoded


def file_name(topic: str, partition: int, start_offset: int, extension: str) -> str:
    """Confluent's name: the topic, the partition and the file's first offset (so a rerun overwrites it)."""
    return f"{topic}+{partition}+{start_offset:010d}{extension}"


def object_key(prefix: str, topic: str, encoded_partition: str, name: str) -> str:
    return f"{prefix}/{topic}/{encoded_partition}/{name}"
