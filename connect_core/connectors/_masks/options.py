"""Debezium's column masks as config keys: which columns a source hides before the topic, and how.

The number, the algorithm and the salt are parts of the key itself (Debezium's form); the key's
value lists the columns:

* `column.mask.hash.<algorithm>.with.salt.<salt>` (also `column.mask.hash.v2.…`): a value becomes
  the lowercase hex digest of `<algorithm>(salt + value)`, both as UTF-8.
* `column.mask.with.<n>.chars`: a non-null value becomes `n` `*`s.
* `column.truncate.to.<n>.chars`: text longer than `n` characters (binary: bytes) is cut to `n`.

Columns are comma-separated regular expressions, matched whole and ignoring case (as Debezium
matches them) against a column's fully qualified name, in linear time (RE2: the names come from
the database). The salt is a secret: shown keys have it masked (`shown_key`), and problems name the
key that way.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ValidationError, model_validator
from pydantic_core import InitErrorDetails, PydanticCustomError

from connect_core.sdk._keys import HASH_KEY_PREFIX, SALT_MARK, salt_of, shown_key
from connect_core.sdk._regex import compile_user_regex, linear_regex
from connect_core.sdk.config import split_list
from connect_core.sdk.errors import ConfigError

__all__ = [
    "HASH_ALGORITHMS",
    "ColumnMaskConfig",
    "ColumnMasks",
    "MaskRule",
    "parse_masks",
    "salt_of",
    "shown_key",
]

Kind = Literal["hash", "mask", "truncate"]

_HASH, _HASH_V2, _SALT = HASH_KEY_PREFIX, "v2.", SALT_MARK
_MASK, _TRUNCATE, _CHARS = "column.mask.with.", "column.truncate.to.", ".chars"
_FAMILY = ("column.mask.", "column.truncate.")

#: Debezium's algorithm names (Java's `MessageDigest`) that Spark SQL can compute too, so both the
#: Spark and the Arrow path give the same digest: name → (Spark function, SHA-2 bits, hashlib name).
HASH_ALGORITHMS: dict[str, tuple[str, int, str]] = {
    "MD5": ("md5", 0, "md5"),
    "SHA-1": ("sha1", 0, "sha1"),
    "SHA-224": ("sha2", 224, "sha224"),
    "SHA-256": ("sha2", 256, "sha256"),
    "SHA-384": ("sha2", 384, "sha384"),
    "SHA-512": ("sha2", 512, "sha512"),
}
#: Other spellings Java's providers accept for the same algorithms.
_ALIASES = {"SHA": "SHA-1", "SHA1": "SHA-1", "SHA224": "SHA-224", "SHA256": "SHA-256", "SHA384": "SHA-384"}
_ALIASES["SHA512"] = "SHA-512"
#: The salt is the one secret of a salted hash: a shorter one is guessed, and is too short for the
#: log masker to hide by value (it masks known values from 4 characters).
MIN_SALT = 8
#: `n` `*`s are made per value: a bound keeps a typo (`column.mask.with.1000000000.chars`) from
#: filling the memory.
MAX_MASK = 1024
_MAX_TRUNCATE = 2**31 - 1
#: Which of several rules matching one column applies: the one that reveals least (Debezium takes
#: the first in its own order, truncation first, which would leave a hashed column merely cut).
_STRENGTH: dict[Kind, int] = {"mask": 0, "hash": 1, "truncate": 2}


@dataclass(frozen=True)
class MaskRule:
    """One column mask key: what it does, and the columns it names."""

    key: str = field(repr=False)  # as written: a hash key holds its salt, so show `shown` instead
    kind: Kind = "mask"
    patterns: tuple[str, ...] = ()
    chars: int = 0  # mask: how many `*`; truncate: how many characters are kept
    algorithm: str = ""  # hash: one of HASH_ALGORITHMS
    salt: str = field(default="", repr=False)

    @property
    def shown(self) -> str:
        return shown_key(self.key)

    def __repr__(self) -> str:  # a rule in an error or a log line: never its salt
        return f"MaskRule({self.shown!r}, {self.kind!r}, {self.patterns!r})"

    @property
    def note(self) -> str:
        """How the rule hides a value, without the salt (lineage shows it)."""
        if self.kind == "hash":
            return f"hash {self.algorithm} of salt + value (hex)"
        if self.kind == "mask":
            return f"mask with {self.chars} `*`"
        return f"truncate to {self.chars} characters"

    def matches(self, names: Iterable[str]) -> bool:
        return any(linear_regex(p, ignore_case=True).fullmatch(name) for p in self.patterns for name in names)


@dataclass(frozen=True)
class ColumnMasks:
    """A connector's column mask rules."""

    rules: tuple[MaskRule, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.rules)

    def for_columns(
        self, tables: Sequence[str], columns: Iterable[str], key: Iterable[str] = ()
    ) -> dict[str, MaskRule]:
        """Each of `columns` that a rule names, with the rule that applies to it. A column is named by
        `<table>.<column>` for each of `tables` (the ways its table is written: `public.users`).

        ConfigError when a key column would be masked or truncated: its rows would share keys (a
        compacted topic or an upserting sink would keep one of them); hashing keeps them apart."""
        found: dict[str, MaskRule] = {}
        for column in columns:
            names = [f"{table}.{column}" for table in tables]
            matching = [rule for rule in self.rules if rule.matches(names)]
            if matching:
                found[column] = min(matching, key=lambda r: (_STRENGTH[r.kind], r.key))
        keyed = [(c, r) for c, r in found.items() if c in set(key) and r.kind != "hash"]
        if keyed:
            column, rule = keyed[0]
            problem = (
                f"`{rule.shown}` names key column `{column}` of {tables[0]}: masked or truncated, distinct "
                "keys would become one; hash it instead (`column.mask.hash.…`), or leave it out"
            )
            raise ConfigError(problem, {rule.shown: [problem]})
        return found


def parse_masks(config: Mapping[str, Any]) -> tuple[ColumnMasks, dict[str, list[str]]]:
    """The column mask rules of `config`'s `column.mask.*` / `column.truncate.*` keys, and the problems
    of those that are not valid, by key (a hash key's salt masked)."""
    rules: list[MaskRule] = []
    problems: dict[str, list[str]] = {}
    for key in sorted(k for k in config if isinstance(k, str) and k.startswith(_FAMILY)):
        try:
            rules.append(_rule(key, config[key]))
        except ValueError as exc:
            problems.setdefault(shown_key(key), []).append(str(exc))
    return ColumnMasks(tuple(rules)), problems


def _rule(key: str, value: Any) -> MaskRule:
    patterns = _patterns(value)
    if key.startswith(_HASH):
        rest = key[len(_HASH) :]
        rest = rest[len(_HASH_V2) :] if rest.startswith(_HASH_V2) and _SALT in rest[len(_HASH_V2) :] else rest
        algorithm, sep, salt = rest.partition(_SALT)
        if not sep or not algorithm or "." in algorithm:
            raise ValueError(
                "write the key as `column.mask.hash.<algorithm>.with.salt.<salt>` (e.g. "
                "`column.mask.hash.SHA-256.with.salt.<salt>`)"
            )
        return MaskRule(key, "hash", patterns, algorithm=_algorithm(algorithm), salt=_salt(salt))
    if key.startswith(_MASK) and key.endswith(_CHARS):
        return MaskRule(key, "mask", patterns, chars=_count(key[len(_MASK) : -len(_CHARS)], 0, MAX_MASK))
    if key.startswith(_TRUNCATE) and key.endswith(_CHARS):
        return MaskRule(key, "truncate", patterns, chars=_count(key[len(_TRUNCATE) : -len(_CHARS)], 1, _MAX_TRUNCATE))
    raise ValueError(
        "unknown column mask key: the keys are `column.mask.hash.<algorithm>.with.salt.<salt>`, "
        "`column.mask.with.<n>.chars` and `column.truncate.to.<n>.chars`"
    )


def _patterns(value: Any) -> tuple[str, ...]:
    listed = split_list(value)
    if not isinstance(listed, list) or not all(isinstance(p, str) for p in listed) or not listed:
        raise ValueError(
            "list the columns it applies to: fully qualified names or regular expressions, comma-separated "
            "(`inventory.customers.email`)"
        )
    for pattern in listed:
        compile_user_regex(pattern, "column")  # bounded: length, nesting, errors
        linear_regex(pattern, ignore_case=True)  # and matchable in linear time
    return tuple(listed)


def _algorithm(name: str) -> str:
    upper = name.upper()
    canonical = _ALIASES.get(upper, upper)
    if canonical not in HASH_ALGORITHMS:
        shown = name if len(name) <= 40 else name[:40] + "…"
        raise ValueError(
            f"hash algorithm `{shown}` is not one of {', '.join(HASH_ALGORITHMS)} (the ones Spark SQL computes too)"
        )
    return canonical


def _salt(salt: str) -> str:
    if set(salt) <= {"*"}:  # a config read back from GET, where the salt is masked, and sent again
        raise ValueError("the salt is the masked one a shown config has (`********`): write the salt itself")
    if len(salt) < MIN_SALT:
        raise ValueError(f"the salt must be at least {MIN_SALT} characters (it is the hash's one secret)")
    return salt


def _count(text: str, low: int, high: int) -> int:
    if not (0 < len(text) <= 10 and text.isascii() and text.isdigit()) or not low <= int(text) <= high:
        raise ValueError(f"`<n>` must be a whole number from {low} to {high}")
    return int(text)


class ColumnMaskConfig(BaseModel):
    """Debezium's column mask keys (`column.mask.*`, `column.truncate.*`), a source config's extra
    keys: checked with the model, each bad one reported under its own key with the model's other
    problems (so a create's 400 lists them all)."""

    #: Keys whose names carry a value (Debezium's form): the configuration reference lists them by
    #: their pattern, as it lists the model's fields.
    pattern_keys: ClassVar[tuple[tuple[str, str], ...]] = (
        (
            "column.mask.hash.<algorithm>.with.salt.<salt>",
            "Columns whose values become the hex digest of `<algorithm>(salt + value)`: MD5, SHA-1, SHA-224, "
            "SHA-256, SHA-384 or SHA-512; a salt of 8 characters or more, masked wherever the key is shown. Also "
            "`column.mask.hash.v2.…` (the same hash). Comma-separated regular expressions of fully qualified column "
            "names (`<schema>.<table>.<column>`; MariaDB `<database>.<table>.<column>`), matched whole, ignoring case.",
        ),
        ("column.mask.with.<n>.chars", "Columns whose non-null values become `n` `*` (0 to 1024)."),
        (
            "column.truncate.to.<n>.chars",
            "Columns whose text (binary: bytes) longer than `n` (1 or more) is cut to its first `n` characters.",
        ),
    )

    @model_validator(mode="wrap")
    @classmethod
    def _column_masks(cls, data: Any, handler: Any) -> Any:
        problems = parse_masks(data)[1] if isinstance(data, Mapping) else {}
        if not problems:
            return handler(data)
        found: list[InitErrorDetails] = []
        try:
            handler(data)
        except ValidationError as exc:
            found = [_again(err) for err in exc.errors()]
        for key, messages in problems.items():
            found += [
                InitErrorDetails(type=PydanticCustomError("column_mask", message), loc=(key,), input=key)
                for message in messages
            ]
        raise ValidationError.from_exception_data(cls.__name__, found)

    def column_masks(self) -> ColumnMasks:
        """The config's column mask rules (validated with the model)."""
        return parse_masks(self.model_extra or {})[0]


def _again(err: Any) -> InitErrorDetails:
    """A pydantic error as it can be raised again, its message and type kept (its context is in the
    message, which a custom error without context shows as it is)."""
    return InitErrorDetails(
        type=PydanticCustomError(err["type"], str(err["msg"])), loc=err["loc"], input=err.get("input")
    )
