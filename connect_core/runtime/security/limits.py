"""Limits on the shape of user JSON: nesting depth, string size, NUL characters, finite numbers.

Checked at the REST edge (before a route parses the body) and again where every config enters
the store (REST body or query, CLI file), so a config too deep to mask, encode or show, or a
value Postgres cannot hold, never gets in. Iterative: a hostile depth costs no recursion.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

__all__ = ["ShapeError", "check_json_shape", "one_line"]


def one_line(text: str) -> str:
    """`text` for one line of a terminal or log: each control or other unprintable character (a
    newline, CR, ESC, U+2028 …) shown as its escape (`\\n`, `\\x1b`), so that a value from the
    user can neither start a forged line nor send the terminal an escape sequence."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


class ShapeError(ValueError):
    """A JSON value outside the limits; the message says where (`config.a.b`) and which limit."""


def check_json_shape(value: Any, *, max_depth: int, max_value_bytes: int, root: str = "body") -> None:
    stack: list[tuple[str, Any, int]] = [(root, value, 1)]
    while stack:
        where, item, depth = stack.pop()
        if isinstance(item, Mapping | list):
            if depth > max_depth:
                raise ShapeError(f"`{where}` is nested deeper than {max_depth} levels (CONNECT_REST_MAX_DEPTH)")
            if isinstance(item, Mapping):
                for key, child in item.items():
                    key = str(key)
                    _check_string(f"{where} key", key, max_value_bytes)
                    stack.append((f"{where}.{key[:64]}", child, depth + 1))
            else:
                stack.extend((f"{where}[{i}]", child, depth + 1) for i, child in enumerate(item))
        elif isinstance(item, str):
            _check_string(where, item, max_value_bytes)
        elif isinstance(item, float) and not math.isfinite(item):
            raise ShapeError(f"`{where}` is {item}, which JSON does not allow (a finite number only)")


def _check_string(where: str, text: str, max_value_bytes: int) -> None:
    if len(text) > max_value_bytes or len(text.encode("utf-8", "surrogatepass")) > max_value_bytes:
        raise ShapeError(f"`{where}` is longer than {max_value_bytes} bytes (CONNECT_REST_MAX_VALUE_BYTES)")
    if "\x00" in text:
        raise ShapeError(f"`{where}` contains a NUL character, which no config value may hold")
