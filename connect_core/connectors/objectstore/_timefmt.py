"""Joda-style `path.format` patterns (Confluent's `'year'=YYYY/'month'=MM`) as strftime patterns.

Only what names a time bucket with digits is translated: year (`yyyy`, `YYYY`, `yy`), month (`MM`),
day (`dd`), hour (`HH`), minute (`mm`), second (`ss`), quoted literals and the separators `/ = - _ .`.
Anything else (month names, weekdays, eras, a literal that could carry a `..` or `%`) is refused
at create: a pattern this sink cannot render exactly as Confluent's would put objects elsewhere.
"""

from __future__ import annotations

import re

__all__ = ["translate_path_format"]

_TOKENS = {
    "yyyy": "%Y",
    "YYYY": "%Y",
    "yy": "%y",
    "YY": "%y",
    "MM": "%m",
    "dd": "%d",
    "HH": "%H",
    "mm": "%M",
    "ss": "%S",
}
_SEPARATORS = frozenset("/=-_.")
_LITERAL = re.compile(r"[A-Za-z0-9_=-]*")


def translate_path_format(pattern: str) -> str:
    """The strftime pattern of `pattern`; ValueError saying what it cannot translate."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "'":
            end = pattern.find("'", i + 1)
            if end < 0:
                raise ValueError("`path.format` has an unclosed quote")
            literal = pattern[i + 1 : end]
            if not _LITERAL.fullmatch(literal):
                raise ValueError(
                    f"`path.format` literal {literal!r}: only letters, digits, `_`, `=` and `-` are supported"
                )
            out.append(literal)
            i = end + 1
        elif c.isalpha():
            j = i
            while j < len(pattern) and pattern[j] == c:
                j += 1
            token = pattern[i:j]
            if token not in _TOKENS:
                raise ValueError(
                    f"`path.format` field `{token}` is not supported: use yyyy/YYYY, yy, MM, dd, HH, mm, ss "
                    "(numbers only) and quoted literals"
                )
            out.append(_TOKENS[token])
            i = j
        elif c in _SEPARATORS:
            out.append(c)
            i += 1
        else:
            raise ValueError(f"`path.format` character {c!r} is not supported (separators: / = - _ .)")
    result = "".join(out)
    parts = result.split("/")
    if any(p in ("", ".", "..") for p in parts):
        raise ValueError("`path.format` makes an empty, `.` or `..` directory; each `/` part must name something")
    if "%" not in result:
        raise ValueError("`path.format` has no time field: every bucket would be the same directory")
    return result
