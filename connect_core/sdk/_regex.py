"""Compiling a regular expression a user wrote (a config value), with limits.

Python's `re` parses a pattern recursively: a group nested a few hundred deep raises
RecursionError (not `re.error`), whose traceback runs to thousands of lines; a repetition count
past its maximum raises OverflowError. Every user-given pattern is compiled here, so each of
these is one ValueError naming the config key, before the parser is reached: the caller's
validation turns it into a 400.

Limits: `MAX_PATTERN_LENGTH` characters and `MAX_GROUP_DEPTH` nested groups, counted in one
linear scan. Repetition counts are left to the engine (`a{1000000}` compiles to one opcode).
A character class with `[`, `&&`, `--`, `||` or `~~` is refused: Java reads them as nested classes
and set operations, Python as literals (with a FutureWarning per pattern).

Backtracking: patterns here match topic and table names (at most a few hundred characters, each
distinct name matched once per batch), so nested quantifiers (`(a+)+`) are accepted as Kafka and
Debezium accept them; they cost the connector's own runs, never the REST server's requests.
Patterns matched against names a database server supplies (CDC include lists, column masks) are
compiled for RE2 as well (`linear_regex`), which matches in time linear in the name.
"""

from __future__ import annotations

import functools
import re
from typing import Any

__all__ = ["MAX_GROUP_DEPTH", "MAX_PATTERN_LENGTH", "compile_user_regex", "group_depth", "linear_regex"]

#: Longest pattern accepted (a topic pattern is tens of characters; a list of names a few KB).
MAX_PATTERN_LENGTH = 10_000
#: Deepest group nesting accepted: far below where `re`'s recursive parser runs out of stack.
MAX_GROUP_DEPTH = 50


def group_depth(pattern: str) -> int:
    """How deep `pattern`'s groups and character classes nest, in one pass. A `[` inside a class
    counts as Java counts it (a nested class, `[a-z&&[^q]]`), so the bound holds for Spark's
    `java.util.regex` too, whose parser also recurses."""
    depth = deepest = 0
    classes = 0  # character classes open at this point
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\":
            i += 2
            continue
        if c == "[":
            classes += 1
            deepest = max(deepest, depth + classes)
            # `[]…]` and `[^]…]`: a `]` first in a class is a literal
            if pattern.startswith("^", i + 1):
                i += 1
            if pattern.startswith("]", i + 1):
                i += 1
        elif classes:
            if c == "]":
                classes -= 1
        elif c == "(":
            depth += 1
            deepest = max(deepest, depth)
        elif c == ")":
            depth = max(depth - 1, 0)
        i += 1
    return deepest


def _in_class_ambiguity(pattern: str) -> bool:
    """Whether a character class holds an unescaped `[` or `&&`/`--`/`||`/`~~` (Python warns and will
    change their meaning; Java reads them as set operations)."""
    in_class = False
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\":
            i += 2
            continue
        if not in_class:
            if c == "[":
                in_class = True
                if pattern.startswith("^", i + 1):
                    i += 1
                if pattern.startswith("]", i + 1):
                    i += 1
        elif c == "]":
            in_class = False
        elif c == "[" or (c in "&-|~" and pattern.startswith(c, i + 1)):
            return True
        i += 1
    return False


def compile_user_regex(pattern: str, key: str, *, flags: int = 0) -> re.Pattern[str]:
    """`pattern` compiled, or ValueError naming `key` if it is too long, nests too deep, or does not
    compile. The message quotes at most the pattern's first 60 characters (never a whole 1 MB one)."""
    if not isinstance(pattern, str):
        raise ValueError(f"`{key}` must be a regular expression (a string), not {type(pattern).__name__}")
    shown = pattern if len(pattern) <= 60 else pattern[:60] + "…"
    if len(pattern) > MAX_PATTERN_LENGTH:
        raise ValueError(
            f"`{key}`: regular expression {shown!r} is {len(pattern)} characters long; "
            f"at most {MAX_PATTERN_LENGTH} are accepted"
        )
    depth = group_depth(pattern)
    if depth > MAX_GROUP_DEPTH:
        raise ValueError(
            f"`{key}`: regular expression {shown!r} nests groups {depth} deep; at most {MAX_GROUP_DEPTH} are accepted"
        )
    if _in_class_ambiguity(pattern):
        raise ValueError(
            f"`{key}`: regular expression {shown!r} has `[`, `&&`, `--`, `||` or `~~` inside a character class, "
            "which Java (nested classes, intersections) and Python read differently: escape it (`\\[`, `\\&`)"
        )
    try:
        return re.compile(pattern, flags)
    except re.error as exc:
        raise ValueError(f"`{key}`: invalid regex {shown!r}: {exc.msg}") from None
    except (RecursionError, OverflowError, MemoryError) as exc:
        # RecursionError: a construct the depth count does not see; OverflowError: a repetition
        # count past the engine's maximum. Neither traceback says more than this line.
        raise ValueError(f"`{key}`: regular expression {shown!r} is too complex ({type(exc).__name__})") from None


@functools.lru_cache(maxsize=1024)
def linear_regex(pattern: str, *, ignore_case: bool = False) -> Any:
    """`pattern` for RE2, which matches in time linear in the name: names that come from a server the
    connector points at (anyone's) are matched with it, where a backtracking `(a+)+` over a crafted
    60-character name would hold the process for hours. A pattern RE2 cannot run (back-references,
    look-around) is a ValueError. Check its bounds with `compile_user_regex` first."""
    import re2

    options = re2.Options()
    options.log_errors = False
    options.case_sensitive = not ignore_case
    try:
        return re2.compile(pattern, options)
    except re2.error as exc:
        shown = pattern if len(pattern) <= 60 else pattern[:60] + "…"
        detail = exc.args[0].decode() if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        raise ValueError(
            f"`{shown}` uses what a linear-time matcher cannot run ({detail}): no back-references or look-around"
        ) from None
