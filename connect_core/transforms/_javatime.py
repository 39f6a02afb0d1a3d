"""Java date patterns (`yyyy-MM-dd HH:mm:ss.SSS`, as Kafka's and Spark's options take them) on both paths.

Spark formats and parses them itself (`date_format`, `try_to_timestamp`: `DateTimeFormatter`
semantics). On Arrow a pattern is translated: formatting goes through `pc.strftime`, parsing
through a regular expression per field and `pc.strptime` of the fields put back together, so that
a string parses on Arrow exactly when it parses on Spark (fixed digit counts, no day 30 of
February, literals matched without regard to case as Spark's parser does).

Only the letters both paths treat alike are accepted (`check_pattern` names the others, at config
validation): `yyyy`, `yy` (2000-2099 when parsing, as Spark), `MM`, `dd`, `HH`, `mm`, `ss`, and
`S` to `SSSSSSSSS` (a fraction of the second with that many digits; parsing accepts 1 to that many
digits), with `'quoted text'` (`''` for a quote) and punctuation or spaces as literals. Every time
is in UTC.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable

    import pyarrow as pa
    from pyspark.sql import Column

__all__ = [
    "check_pattern",
    "format_arrow",
    "format_spark",
    "from_utc_wall_spark",
    "parse_arrow",
    "parse_spark",
    "utc_wall_spark",
]

#: letter run -> (strftime code, regex group name, digits); `S` runs are fractions (handled apart).
_FIELDS = {
    "yyyy": ("%Y", "year", 4),
    "yy": ("%y", "year2", 2),
    "MM": ("%m", "month", 2),
    "dd": ("%d", "day", 2),
    "HH": ("%H", "hour", 2),
    "mm": ("%M", "minute", 2),
    "ss": ("%S", "second", 2),
}
_SUPPORTED = "yyyy, yy, MM, dd, HH, mm, ss, S to SSSSSSSSS, 'quoted text' and punctuation"
#: characters Java's `DateTimeFormatter` reserves (optional sections, padding): not literals.
_RESERVED = set("[]{}#")


@dataclass(frozen=True)
class _Token:
    kind: str  # "field", "fraction" or "literal"
    text: str  # the letter run, or the literal text


def _tokens(pattern: str) -> list[_Token]:
    """The pattern's fields and literals; ValueError naming what is not supported."""
    tokens: list[_Token] = []
    bad: list[str] = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "'":
            literal, i = _quoted(pattern, i)
            tokens.append(_Token("literal", literal))
        elif c.isascii() and c.isalpha():
            run = re.match(rf"{c}+", pattern[i:])
            assert run is not None
            letters = run.group()
            if letters in _FIELDS:
                tokens.append(_Token("field", letters))
            elif c == "S" and len(letters) <= 9:
                tokens.append(_Token("fraction", letters))
            else:
                bad.append(letters)
            i += len(letters)
        elif c in _RESERVED:
            bad.append(c)
            i += 1
        else:
            tokens.append(_Token("literal", c))
            i += 1
    if bad:
        named = ", ".join(f"`{b}`" for b in dict.fromkeys(bad))
        raise ValueError(f"date pattern {pattern!r} uses {named}, which is not supported: use {_SUPPORTED}")
    names = [_FIELDS[t.text][1] if t.kind == "field" else "fraction" for t in tokens if t.kind != "literal"]
    twice = sorted({n for n in names if names.count(n) > 1} | ({"year"} if {"year", "year2"} <= set(names) else set()))
    if twice:
        raise ValueError(f"date pattern {pattern!r} gives the {', '.join(twice)} more than once")
    return tokens


def _quoted(pattern: str, start: int) -> tuple[str, int]:
    """The literal text of the quote at `start` and the index after it: `''` is a quote, inside quotes too."""
    if pattern.startswith("''", start):
        return "'", start + 2
    text: list[str] = []
    i = start + 1
    while True:
        if i >= len(pattern):
            raise ValueError(f"unterminated quote in date pattern {pattern!r}")
        if pattern.startswith("''", i):
            text.append("'")
            i += 2
        elif pattern[i] == "'":
            return "".join(text), i + 1
        else:
            text.append(pattern[i])
            i += 1


def check_pattern(pattern: str) -> str:
    """`pattern` if both paths can format and parse it, else ValueError naming what is not supported."""
    _tokens(pattern)
    return pattern


# -- Spark ----------------------------------------------------------------------


def utc_wall_spark(ts: Column) -> Column:
    """`ts` shifted so that the session's time zone shows its UTC wall-clock time (a no-op in UTC):
    what `date_format` or `to_date` then read is the time in UTC."""
    from pyspark.sql import functions as F

    return F.to_utc_timestamp(ts, F.current_timezone())


def from_utc_wall_spark(ts: Column) -> Column:
    """The reverse of `utc_wall_spark`: a time read as a wall-clock time of the session's zone, taken as UTC."""
    from pyspark.sql import functions as F

    return F.from_utc_timestamp(ts, F.current_timezone())


def format_spark(ts: Column, pattern: str) -> Column:
    """The timestamps `ts` as strings of `pattern`, in UTC."""
    from pyspark.sql import functions as F

    return F.date_format(utc_wall_spark(ts), pattern)


def parse_spark(text: Column, pattern: str) -> Column:
    """The strings `text` parsed with `pattern` as UTC timestamps; null where one does not parse."""
    from pyspark.sql import functions as F

    return from_utc_wall_spark(F.try_to_timestamp(text, F.lit(pattern)))


# -- Arrow ----------------------------------------------------------------------


def _utc(ts: pa.Array) -> pa.Array:
    import pyarrow as pa

    return ts.cast(pa.timestamp("us", tz="UTC"))


def _fraction(ts: pa.Array, whole: pa.Array, digits: int) -> pa.Array:
    """The first `digits` digits of the fraction of the second of `ts` (`whole`: `ts` floored to seconds)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    micros = pc.subtract(ts.cast(pa.int64()), whole.cast(pa.int64()))
    text = pc.utf8_lpad(micros.cast(pa.string()), width=6, padding="0")
    if digits <= 6:
        return pc.utf8_slice_codeunits(text, 0, digits)
    return pc.utf8_rpad(text, width=digits, padding="0")


def format_arrow(ts: pa.Array, pattern: str) -> pa.Array:
    """The timestamps `ts` as strings of `pattern`, in UTC (as `format_spark`)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    ts = _utc(ts)
    # whole seconds: `%S` of a finer timestamp would print the fraction too
    whole = pc.floor_temporal(ts, unit="second")
    seconds = whole.cast(pa.timestamp("s", tz="UTC"))
    pieces: list[pa.Array] = []
    code = ""
    for token in _tokens(pattern):
        if token.kind == "fraction":
            if code:
                pieces.append(pc.strftime(seconds, format=code, locale="C"))
                code = ""
            pieces.append(_fraction(ts, whole, len(token.text)))
        elif token.kind == "field":
            code += _FIELDS[token.text][0]
        else:
            code += token.text.replace("%", "%%")
    if code:
        pieces.append(pc.strftime(seconds, format=code, locale="C"))
    if not pieces:  # a pattern of no fields and no text
        return pc.if_else(ts.is_null(), pa.scalar(None, pa.string()), pa.scalar("", pa.string()))
    return pc.binary_join_element_wise(*pieces, "")


def _regex(tokens: list[_Token]) -> str:
    """A regular expression (RE2) matching the strings the pattern parses, a named group per field."""
    parts = ["(?i)^"]  # Spark's parser matches literal text without regard to case
    for token in tokens:
        if token.kind == "field":
            _, name, digits = _FIELDS[token.text]
            parts.append(rf"(?P<{name}>\d{{{digits}}})")
        elif token.kind == "fraction":
            parts.append(rf"(?P<fraction>\d{{1,{len(token.text)}}})")
        else:
            parts.extend(f"\\x{{{ord(c):X}}}" for c in token.text)
    parts.append("$")
    return "".join(parts)


def parse_arrow(text: pa.Array, pattern: str) -> pa.Array:
    """The strings `text` parsed with `pattern` as UTC timestamps; null where one does not parse (as `parse_spark`)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    tokens = _tokens(pattern)
    found = pc.extract_regex(text.cast(pa.string()), pattern=_regex(tokens))  # null where it does not match
    names = {f.name for f in found.type}

    def part(name: str, default: str) -> pa.Array:
        if name in names:
            return pc.struct_field(found, name)
        return pc.if_else(found.is_null(), pa.scalar(None, pa.string()), pa.scalar(default, pa.string()))

    if "year2" in names:  # `yy` reads years 2000-2099, as Spark does
        year = pc.binary_join_element_wise("20", pc.struct_field(found, "year2"), "")
    else:
        year = part("year", "1970")
    fields = {
        "year": year,
        "month": part("month", "01"),
        "day": part("day", "01"),
        "hour": part("hour", "00"),
        "minute": part("minute", "00"),
        "second": part("second", "00"),
    }
    joined = pc.binary_join_element_wise(
        *[fields[n] for n in ("year", "month", "day", "hour", "minute", "second")], "-"
    )
    parsed = pc.strptime(joined, format="%Y-%m-%d-%H-%M-%S", unit="us", error_is_null=True)
    # strptime rolls a day 30 of February or a second 60 over; Spark's parser refuses them
    exact = pc.and_(
        pc.and_(_same(pc.year, parsed, fields["year"]), _same(pc.month, parsed, fields["month"])),
        pc.and_(
            pc.and_(_same(pc.day, parsed, fields["day"]), _same(pc.hour, parsed, fields["hour"])),
            pc.and_(_same(pc.minute, parsed, fields["minute"]), _same(pc.second, parsed, fields["second"])),
        ),
    )
    micros = parsed.cast(pa.int64())
    if "fraction" in names:
        digits = pc.utf8_rpad(pc.struct_field(found, "fraction"), width=9, padding="0")
        micros = pc.add(micros, pc.utf8_slice_codeunits(digits, 0, 6).cast(pa.int64()))
    exact = pc.fill_null(exact, False)
    result = pc.if_else(exact, micros, pa.scalar(None, pa.int64()))
    return result.cast(pa.timestamp("us", tz="UTC"))


def _same(extract: Callable[[pa.Array], pa.Array], parsed: pa.Array, digits: pa.Array) -> pa.Array:
    import pyarrow as pa
    import pyarrow.compute as pc

    return pc.equal(extract(parsed), digits.cast(pa.int64()))
