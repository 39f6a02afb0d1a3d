"""What Cast's two paths share: its types and the syntax of the numbers it reads from text."""

from __future__ import annotations

__all__ = ["CAST_TYPES", "FLOATS", "FLOAT_NOISE", "FLOAT_TEXT", "INT_BITS", "INT_TEXT", "SOURCES", "WHOLE"]

#: Kafka's Cast target types, by their spec names, with their Spark names.
CAST_TYPES = {
    "int8": "tinyint",
    "int16": "smallint",
    "int32": "int",
    "int64": "bigint",
    "float32": "float",
    "float64": "double",
    "boolean": "boolean",
    "string": "string",
}
INT_BITS = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}
FLOATS = ("float32", "float64")
#: Source kinds Cast reads, besides the targets: decimals (to anything), dates and timestamps (to string).
SOURCES = (*CAST_TYPES, "decimal", "date", "timestamp", "null")
WHOLE = ""  # the spec's key for a type that casts the whole part

# Java's number syntax (Integer.parseInt; Double.parseDouble without hex), each unambiguous so a
# match is linear in the text. Java trims characters up to U+0020 around a floating-point number.
# `\z`, not `$`: Java's `$` also matches before a final line break, RE2's (Arrow's) does not.
INT_TEXT = r"^[+-]?[0-9]+\z"
FLOAT_TEXT = r"^[\x00-\x20]*[+-]?(NaN|Infinity|([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?[fFdD]?)[\x00-\x20]*\z"
FLOAT_NOISE = r"^[\x00-\x20]+|[fFdD]?[\x00-\x20]*\z"  # what Java ignores, and Spark and Arrow may not
