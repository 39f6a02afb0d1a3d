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

The keys themselves are matched as Debezium matches them: exactly (its patterns are case-sensitive),
the algorithm in any case (Java's `MessageDigest`). Debezium ignores a key it does not match, which
leaves the columns in clear; here any other key of the family (`Column.Mask.…`, `….with_salt.…`,
`column.mask.width.…`: `is_mask_key`) is refused, as is a pattern that can match no column's name.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, PrivateAttr, ValidationError, model_validator
from pydantic_core import InitErrorDetails, PydanticCustomError

from connect_core.sdk._keys import (
    HASH_ALGORITHM_NAMES,
    HASH_KEY_PREFIX,
    SALT_MARK,
    hash_algorithm,
    is_mask_key,
    salt_of,
    shown_key,
)
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

#: Debezium's algorithm names (Java's `MessageDigest`) that Spark SQL can compute too, so both the
#: Spark and the Arrow path give the same digest: name → (Spark function, SHA-2 bits, hashlib name).
_FUNCTIONS: dict[str, tuple[str, int, str]] = {
    "MD5": ("md5", 0, "md5"),
    "SHA-1": ("sha1", 0, "sha1"),
    "SHA-224": ("sha2", 224, "sha224"),
    "SHA-256": ("sha2", 256, "sha256"),
    "SHA-384": ("sha2", 384, "sha384"),
    "SHA-512": ("sha2", 512, "sha512"),
}
HASH_ALGORITHMS = {name: _FUNCTIONS[name] for name in HASH_ALGORITHM_NAMES}  # one list of names: `_keys`'
_CASE = (
    "write the key in lower case, as Debezium does: `column.mask.hash.<algorithm>.with.salt.<salt>`, "
    "`column.mask.with.<n>.chars`, `column.truncate.to.<n>.chars` (Debezium matches these keys case-sensitively, "
    "and would ignore this one; only the algorithm may be in any case)"
)
#: The salt is the one secret of a salted hash: a shorter one is guessed, and is too short for the
#: log masker to hide by value (it masks known values from 4 characters).
MIN_SALT = 8
#: `n` `*`s are made per value: a bound keeps a typo (`column.mask.with.1000000000.chars`) from
#: filling the memory.
MAX_MASK = 1024
_MAX_TRUNCATE = 2**31 - 1
#: The keys that count characters: prefix, kind, and the range of `<n>`.
_COUNTED: tuple[tuple[str, Kind, int, int], ...] = (
    (_MASK, "mask", 0, MAX_MASK),
    (_TRUNCATE, "truncate", 1, _MAX_TRUNCATE),
)
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


@dataclass
class _Applied:
    """What a connector's masks were applied to in one run: the tables, and the rules that matched."""

    tables: dict[str, None] = field(default_factory=dict)  # in the order read, each once
    matched: set[str] = field(default_factory=set)  # the rules' keys


@dataclass(frozen=True)
class ColumnMasks:
    """A connector's column mask rules, and (for `warn_unmatched`) the tables of a run they met."""

    rules: tuple[MaskRule, ...] = ()
    _applied: _Applied = field(default_factory=_Applied, compare=False, repr=False)

    def __bool__(self) -> bool:
        return bool(self.rules)

    def for_columns(
        self, tables: Sequence[str], columns: Iterable[str], key: Iterable[str] = ()
    ) -> dict[str, MaskRule]:
        """Each of `columns` that a rule names, with the rule that applies to it. A column is named by
        `<table>.<column>` for each of `tables` (the ways its table is written: `public.users`).

        ConfigError when a key column would be masked or truncated: its rows would share keys (a
        compacted topic or an upserting sink would keep one of them); hashing keeps them apart.
        The table (`tables[0]`) and the rules that matched are noted, for `warn_unmatched`."""
        found: dict[str, MaskRule] = {}
        for column in columns:
            names = [f"{table}.{column}" for table in tables]
            matching = [rule for rule in self.rules if rule.matches(names)]
            self._applied.matched.update(rule.key for rule in matching)
            if matching:
                found[column] = min(matching, key=lambda r: (_STRENGTH[r.kind], r.key))
        if tables:
            self._applied.tables[tables[0]] = None
        keyed = [(c, r) for c, r in found.items() if c in set(key) and r.kind != "hash"]
        if keyed:
            column, rule = keyed[0]
            problem = (
                f"`{rule.shown}` names key column `{column}` of {tables[0]}: masked or truncated, distinct "
                "keys would become one; hash it instead (`column.mask.hash.…`), or leave it out"
            )
            raise ConfigError(problem, {rule.shown: [problem]})
        return found

    def masked(self, tables: Sequence[str], columns: Iterable[str]) -> list[str]:
        """Those of `columns` a rule masks, hashes or truncates (named as in `for_columns`), with no
        side effect: what a query's condition may not read (its result would tell the value)."""
        return [c for c in columns if any(rule.matches([f"{t}.{c}" for t in tables]) for rule in self.rules)]

    def unmatched(self) -> list[MaskRule]:
        """The rules that named no column of the tables `for_columns` was asked about (none when it
        was not asked: nothing was read)."""
        if not self._applied.tables:
            return []
        return [rule for rule in self.rules if rule.key not in self._applied.matched]

    def warn_unmatched(self, log: logging.Logger) -> None:
        """A warning per rule that named no column of the tables read (a run's): it hid nothing, and
        Debezium would say nothing either (a bare `email` names no `<schema>.<table>.<column>`)."""
        tables = list(self._applied.tables)
        read = ", ".join(tables[:_TABLES_SHOWN])
        if len(tables) > _TABLES_SHOWN:
            read += f" and {len(tables) - _TABLES_SHOWN} more"
        for rule in self.unmatched():
            log.warning(
                "column mask `%s` matched no column of the table(s) read (%s): it hid nothing. Its columns (%s) are "
                "regular expressions matched whole, ignoring case, against `<schema>.<table>.<column>` (MariaDB: "
                "`<database>.<table>.<column>`; a JDBC query's: `<topic>.<column>`)",
                rule.shown,
                read,
                ", ".join(rule.patterns),
            )


#: How many tables a warning names.
_TABLES_SHOWN = 10


def parse_masks(config: Mapping[str, Any]) -> tuple[ColumnMasks, dict[str, list[str]]]:
    """The column mask rules of `config`'s keys of the family (`is_mask_key`: `column.mask*`,
    `column.truncate*`, in any case), and the problems of those that are not valid, by key (shown:
    `shown_key`, a salt masked)."""
    rules: list[MaskRule] = []
    problems: dict[str, list[str]] = {}
    for key in sorted(k for k in config if isinstance(k, str) and is_mask_key(k)):
        found: list[str] = []
        patterns: tuple[str, ...] = ()
        try:
            patterns = _patterns(config[key])
        except ValueError as exc:
            found.append(str(exc))
        try:
            rule = _rule(key, patterns)
        except ValueError as exc:
            found.append(str(exc))
        if found:
            problems.setdefault(shown_key(key), []).extend(found)
        else:
            rules.append(rule)
    return ColumnMasks(tuple(rules)), problems


def _rule(key: str, patterns: tuple[str, ...]) -> MaskRule:
    """The rule of one key of the family: one of Debezium's three, written as Debezium matches them
    (case-sensitively, but for the algorithm), else ValueError (which never holds the key)."""
    lowered = key.lower()
    if lowered.startswith(_HASH):
        return _hash_rule(key, patterns)
    for prefix, kind, low, high in _COUNTED:
        if lowered.startswith(prefix) and lowered.endswith(_CHARS):
            if not (key.startswith(prefix) and key.endswith(_CHARS)):
                raise ValueError(_CASE)
            chars = _count(key[len(prefix) : -len(_CHARS)], low, high)
            return MaskRule(key, kind, patterns, chars=chars)
    raise ValueError(
        "unknown column mask key: the keys are `column.mask.hash.<algorithm>.with.salt.<salt>`, "
        "`column.mask.with.<n>.chars` and `column.truncate.to.<n>.chars`, in lower case"
    )


def _hash_rule(key: str, patterns: tuple[str, ...]) -> MaskRule:
    """`column.mask.hash.[v2.]<algorithm>.with.salt.<salt>` (Debezium's `[^.]+` algorithm)."""
    lowered = key.lower()
    start = len(_HASH)
    if lowered.startswith(_HASH_V2, start) and _SALT in lowered[start + len(_HASH_V2) :]:
        start += len(_HASH_V2)
    mark = lowered.find(_SALT, start)
    algorithm = key[start:mark] if mark >= 0 else ""
    if not algorithm or "." in algorithm:
        raise ValueError(
            "write the key as `column.mask.hash.<algorithm>.with.salt.<salt>` (e.g. "
            "`column.mask.hash.SHA-256.with.salt.<salt>`)"
        )
    salt = key[mark + len(_SALT) :]
    if key != lowered[:start] + algorithm + _SALT + salt:
        raise ValueError(_CASE)
    return MaskRule(key, "hash", patterns, algorithm=_algorithm(algorithm), salt=_salt(salt))


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
        if not any(c in pattern for c in _MATCHES_A_DOT):
            shown = pattern if len(pattern) <= 40 else pattern[:40] + "…"
            raise ValueError(
                f"`{shown}` can name no column: columns are matched whole by their fully qualified name, "
                "`<schema>.<table>.<column>` (MariaDB `<database>.<table>.<column>`, a JDBC query's `<topic>.<column>`); "
                f"write `<schema>.<table>.{shown}`, or `.*\\.{shown}` for that column of every table"
            )
    return tuple(listed)


#: A fully qualified column name holds a `.`; a regular expression can match one only with one of
#: these (`.`, `\.`, `\W`, `[^a]`…). Without any, it names no column: Debezium ignores it, and the
#: column stays in clear; here it is refused.
_MATCHES_A_DOT = ".\\["


def _algorithm(name: str) -> str:
    canonical = hash_algorithm(name)
    if canonical is None:
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
            "`column.mask.hash.v2.…` (the same hash). The key in lower case, as Debezium matches it (the algorithm in "
            "any case). Comma-separated regular expressions of fully qualified column names "
            "(`<schema>.<table>.<column>`; MariaDB `<database>.<table>.<column>`), matched whole, ignoring case.",
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

    #: The rules, made once per config: a run's reads (its snapshot and stream) share them, so the
    #: tables they met are known when it ends (`ColumnMasks.warn_unmatched`).
    _masks: ColumnMasks | None = PrivateAttr(default=None)

    def column_masks(self) -> ColumnMasks:
        """The config's column mask rules (validated with the model); the same each call."""
        if self._masks is None:
            self._masks = parse_masks(self.model_extra or {})[0]
        return self._masks


def _again(err: Any) -> InitErrorDetails:
    """A pydantic error as it can be raised again, its message and type kept (its context is in the
    message, which a custom error without context shows as it is)."""
    return InitErrorDetails(
        type=PydanticCustomError(err["type"], str(err["msg"])), loc=err["loc"], input=err.get("input")
    )
