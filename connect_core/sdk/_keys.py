"""Config keys that hold a secret in their own name: Debezium's `column.mask.hash.<algorithm>.with.salt.<salt>`.

A value can come from a config provider and is masked by its key's name; a key is shown wherever
its config is (REST, the DAG's docs, validation errors), so the secret part of such a key is masked
in the key itself (`shown_key`), and the masker learns it as a known value (`salt_of`) to hide it
wherever else it turns up (a Spark plan printed in an error)."""

from __future__ import annotations

__all__ = ["HASH_KEY_PREFIX", "SALT_MARK", "salt_of", "shown_key"]

HASH_KEY_PREFIX = "column.mask.hash."
SALT_MARK = ".with.salt."
_SHOWN = "********"


def shown_key(key: str) -> str:
    """`key` as it may be shown: a hash key's salt masked (`…with.salt.********`); any other key as is."""
    if not key.startswith(HASH_KEY_PREFIX):
        return key
    head, sep, _salt = key.partition(SALT_MARK)
    return head + sep + _SHOWN if sep else key


def salt_of(key: str) -> str | None:
    """The salt a `column.mask.hash.*` key holds, or None for any other key."""
    if not key.startswith(HASH_KEY_PREFIX):
        return None
    _head, sep, salt = key.partition(SALT_MARK)
    return salt if sep and salt else None
