"""Config keys that hold a secret in their own name: Debezium's `column.mask.hash.<algorithm>.with.salt.<salt>`.

A value can come from a config provider and is masked by its key's name; a key is shown wherever
its config is (REST, `apply`'s list of changed keys, the DAG's docs, validation errors), so the
secret part of such a key is masked in the key itself (`shown_key`), and the masker learns it as a
known value (`salt_of`) to hide it wherever else it turns up (a Spark plan printed in an error).

A key written almost so (`Column.Mask.Hash.…`, `….with_salt.…`, `column_mask_hash_…`) is refused,
but it is shown too, in that very refusal: so every key of the family (`column.mask*`,
`column.truncate*`, in any case, `_` or `-` for a dot) is shown by an allow-list. Only the words
the family's keys are made of and the names of hash algorithms are shown; from the first other
word on, the key is masked. A key of Debezium's hash form, in any case, is shown up to its
`.with.salt.`, the algorithm as written (a refusal names it).
"""

from __future__ import annotations

import re

__all__ = [
    "HASH_ALGORITHM_NAMES",
    "HASH_KEY_PREFIX",
    "SALT_MARK",
    "hash_algorithm",
    "is_mask_key",
    "salt_of",
    "shown_key",
]

HASH_KEY_PREFIX = "column.mask.hash."
SALT_MARK = ".with.salt."
_V2 = "v2."
_SHOWN = "********"

#: The hash algorithms of a `column.mask.hash.*` key, by Java's names (`MessageDigest`, which takes
#: them in any case), and the other spellings Java's providers accept for them.
HASH_ALGORITHM_NAMES = ("MD5", "SHA-1", "SHA-224", "SHA-256", "SHA-384", "SHA-512")
_ALIASES = {f"SHA{bits}": f"SHA-{bits}" for bits in (1, 224, 256, 384, 512)} | {"SHA": "SHA-1"}

#: A key of the column-mask family, as written or nearly (`Column_Mask…`, `columns-truncate…`).
_FAMILY = re.compile(r"columns?[._-]?(?:mask|trunc)", re.IGNORECASE)
#: A mask or truncate key (in any case): its words and number hold no secret.
_COUNTED = re.compile(r"column\.(?:mask\.with|truncate\.to)\.[0-9]{1,10}\.chars")
#: The words a family key is shown by, besides the algorithms' names (lower case).
_WORDS = frozenset({"column", "columns", "mask", "masks", "truncate", "hash", "v2", "with", "to"})
_WORD = re.compile(r"[^.]+")


def hash_algorithm(name: str) -> str | None:
    """The algorithm `name` stands for (Java's name, in any case, or another spelling it accepts:
    `sha256`), as one of `HASH_ALGORITHM_NAMES`; None when it names none of them."""
    upper = name.upper()
    canonical = _ALIASES.get(upper, upper)
    return canonical if canonical in HASH_ALGORITHM_NAMES else None


def is_mask_key(key: str) -> bool:
    """Whether `key` is of the column-mask family (`column.mask*`, `column.truncate*`), as written or
    nearly: each such key must be one of Debezium's three, exactly, or is refused."""
    return _FAMILY.match(key) is not None


def shown_key(key: str) -> str:
    """`key` as it may be shown: the secret part of a column-mask key masked (`…with.salt.********`,
    and in a near miss everything from its first word that is not the family's); any other key as is."""
    at = _secret_at(key)
    return key if at is None else key[:at] + _SHOWN


def salt_of(key: str) -> str | None:
    """The part of a column-mask key that `shown_key` masks (a hash key's salt), or None for a key that
    holds none."""
    at = _secret_at(key)
    return None if at is None else key[at:]


def _secret_at(key: str) -> int | None:
    """Where the secret part of `key` starts (masked from there to its end), or None."""
    family = _FAMILY.match(key)
    if family is None:
        return None
    lowered = key.lower()
    if _COUNTED.fullmatch(lowered):
        return None
    at = _salt_at(lowered)
    if at is None:
        word = next((w for w in _WORD.finditer(key) if not _shown_word(w.group())), None)
        # the first word is not the family's (`column_mask_hash_…`): the part that made it one is shown
        at = None if word is None else word.start() or family.end()
    return at if at is not None and at < len(key) else None


def _salt_at(lowered: str) -> int | None:
    """Where the salt of a (lower-cased) key of Debezium's hash form starts, or None for another key."""
    if not lowered.startswith(HASH_KEY_PREFIX):
        return None
    start = len(HASH_KEY_PREFIX)
    mark = lowered.find(SALT_MARK, start)
    if mark < 0:
        return None
    algorithm = lowered[start:mark]
    algorithm = algorithm[len(_V2) :] if algorithm.startswith(_V2) else algorithm
    return mark + len(SALT_MARK) if algorithm and "." not in algorithm else None


def _shown_word(word: str) -> bool:
    return word.lower() in _WORDS or hash_algorithm(word) is not None
