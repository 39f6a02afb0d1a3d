"""Transforms that change a record's topic: Kafka's RegexRouter and TimestampRouter.

Regular expressions are Java's, as in Kafka: Spark runs them itself (`rlike`, `regexp_replace`).
On Arrow a batch's topics are few: each distinct topic is mapped once with Python's `re` (the
pattern translated: `(?<name>…)` groups, `\\z`, `\\Z`) and the mapping is applied to the column.
A pattern must compile in Python as well (checked with the config), so the constructs Java has and
Python lacks (`\\p{Alpha}` classes, for one) are refused.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from pydantic import Field, field_validator, model_validator

from connect_core.sdk._regex import MAX_PATTERN_LENGTH, compile_user_regex
from connect_core.sdk.records import TOPIC_COLUMN
from connect_core.sdk.transforms import TIMESTAMP_COLUMN, DataError, Transformation, TransformConfig, column
from connect_core.transforms import _javatime

if TYPE_CHECKING:
    from collections.abc import Callable

    import pyarrow as pa
    from pyspark.sql import Column, DataFrame

__all__ = ["RegexRouter", "TimestampRouter", "java_regex", "map_distinct_arrow"]


# -- Java regular expressions -----------------------------------------------------


def java_regex(pattern: str, key: str = "regex") -> re.Pattern[str]:
    """`pattern` (Java syntax) compiled with Python's `re`; ValueError naming `key` if Python cannot read
    it alike, or if it is too long or nested too deep to compile safely (`compile_user_regex`)."""
    if not isinstance(pattern, str) or len(pattern) > MAX_PATTERN_LENGTH:
        return compile_user_regex(pattern, key)  # raises, before the translation reads 1 MB
    out: list[str] = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern):
            nxt = pattern[i + 1]
            # Java's `\z` is the very end (Python's `\Z`); Java's `\Z` also allows a final line break
            out.append({"z": r"\Z", "Z": r"(?=\n?\Z)"}.get(nxt, c + nxt))
            i += 2
        elif pattern.startswith("(?<", i) and not pattern.startswith(("(?<=", "(?<!"), i):
            out.append("(?P<")  # a named group
            i += 3
        elif pattern.startswith("(?P", i):
            shown = pattern if len(pattern) <= 60 else pattern[:60] + "…"
            raise ValueError(
                f"`{key}`: invalid regex {shown!r}: `(?P` is Python's syntax; Java names a group `(?<name>…)`"
            )
        else:
            out.append(c)
            i += 1
    return compile_user_regex("".join(out), key)


def full_match_spark(column: Column, pattern: str) -> Column:
    """True where the whole of `column` matches `pattern` (Java's `Matcher.matches`), null where it is null."""
    return column.rlike(f"^(?:{pattern})\\z")


def map_distinct_arrow(column: pa.Array, mapping: Callable[[str], Any], kind: pa.DataType) -> pa.Array:
    """`mapping` applied to each distinct value of `column` once (null stays null), then spread over its rows."""
    import pyarrow as pa
    import pyarrow.compute as pc

    distinct = pc.unique(column)
    mapped = pa.array([None if v is None else mapping(v) for v in distinct.to_pylist()], kind)
    return pc.take(mapped, pc.index_in(column, value_set=distinct))


def _replacement(text: str, regex: re.Pattern[str]) -> list[str | int]:
    """Java's replacement string as parts: literal text, or a group (number, or name for `${name}`).

    As `Matcher.appendReplacement` reads it: `\\x` is `x`; `$` and digits take as many digits as
    still name a group (`$12` with 3 groups is group 1 then `2`); anything else after `$` is an error.
    """
    parts: list[str | int] = []
    literal: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c == "\\":
            if i + 1 == len(text):
                raise ValueError(f"replacement {text!r} ends with `\\`: escape it as `\\\\`")
            literal.append(text[i + 1])
            i += 2
            continue
        if c != "$":
            literal.append(c)
            i += 1
            continue
        if literal:
            parts.append("".join(literal))
            literal = []
        i += 1
        if text.startswith("{", i):
            end = text.find("}", i)
            name = text[i + 1 : end] if end > 0 else ""
            if end < 0 or not re.fullmatch(r"[A-Za-z][A-Za-z0-9]*", name):
                raise ValueError(f"replacement {text!r}: `${{` must be followed by a group name and `}}`")
            if name not in regex.groupindex:
                raise ValueError(f"replacement {text!r} names group `{name}`, which the regex does not have")
            parts.append(regex.groupindex[name])
            i = end + 1
            continue
        if i == len(text) or not text[i].isdigit():
            raise ValueError(
                f"replacement {text!r}: `$` must be followed by a group number or `{{name}}` (`\\$` for $)"
            )
        group = int(text[i])
        i += 1
        while i < len(text) and text[i].isdigit() and group * 10 + int(text[i]) <= regex.groups:
            group = group * 10 + int(text[i])
            i += 1
        if group > regex.groups:
            raise ValueError(f"replacement {text!r} refers to group {group}; the regex has {regex.groups}")
        parts.append(group)
    if literal:
        parts.append("".join(literal))
    return parts


# -- RegexRouter ------------------------------------------------------------------


class RegexRouterConfig(TransformConfig):
    regex: str = Field(description="A Java regular expression the whole topic must match.")
    replacement: str = Field(
        description="The new topic: Java's replacement syntax, `$1` or `${name}` for a group, `\\$` for $."
    )

    @field_validator("regex")
    @classmethod
    def _regex(cls, value: str) -> str:
        java_regex(value, "regex")
        return value

    @model_validator(mode="after")
    def _groups(self) -> RegexRouterConfig:
        _replacement(self.replacement, java_regex(self.regex, "regex"))
        return self


def _need_topic(names: list[str], who: str) -> None:
    if TOPIC_COLUMN not in names:
        raise DataError(f"{who} needs the record's topic, and these records have none (`{TOPIC_COLUMN}`)")


class RegexRouter(Transformation[RegexRouterConfig]):
    config_model = RegexRouterConfig
    routes = True
    doc = "Rename topics matching `regex` to `replacement` (with `$1`-style group references)."

    def __init__(self, config: RegexRouterConfig) -> None:
        super().__init__(config)
        self._regex = java_regex(config.regex)
        self._parts = _replacement(config.replacement, self._regex)

    def spark(self, df: DataFrame) -> dict[str, Column]:
        from pyspark.sql import functions as F

        _need_topic(df.columns, "RegexRouter")
        topic = F.col(TOPIC_COLUMN)
        # Kafka: `matcher.matches()`, then `matcher.replaceFirst(replacement)`; the first match of a
        # pattern that matches the whole topic starts at its first character
        renamed = F.regexp_replace(topic, f"^(?:{self.config.regex})", self.config.replacement)
        routed = F.when(full_match_spark(topic, self.config.regex), renamed).otherwise(topic)
        return {name: routed if name == TOPIC_COLUMN else column(name) for name in df.columns}

    def route_topic(self, topic: str) -> str | None:
        return self._route(topic)

    def _route(self, topic: str) -> str:
        if self._regex.fullmatch(topic) is None:
            return topic
        first = self._regex.match(topic)
        assert first is not None
        text = "".join(p if isinstance(p, str) else (first.group(p) or "") for p in self._parts)
        return text + topic[first.end() :]

    def arrow(self, batch: pa.RecordBatch) -> dict[str, pa.Array]:
        import pyarrow as pa

        _need_topic(batch.schema.names, "RegexRouter")
        routed = map_distinct_arrow(batch.column(TOPIC_COLUMN).cast(pa.string()), self._route, pa.string())
        return {name: routed if name == TOPIC_COLUMN else batch.column(name) for name in batch.schema.names}


# -- TimestampRouter --------------------------------------------------------------


class TimestampRouterConfig(TransformConfig):
    topic_format: str = Field(
        "${topic}-${timestamp}",
        alias="topic.format",
        description="The new topic: `${topic}` is the record's topic, `${timestamp}` its formatted timestamp.",
    )
    timestamp_format: str = Field(
        "yyyyMMdd",
        alias="timestamp.format",
        description="The Java date pattern of `${timestamp}` (in UTC): yyyy, yy, MM, dd, HH, mm, ss, S….",
    )

    _pattern = field_validator("timestamp_format")(_javatime.check_pattern)


_TOKENS = re.compile(r"\$\{(topic|timestamp)\}")


class TimestampRouter(Transformation[TimestampRouterConfig]):
    """A record without a timestamp is an error, as in Kafka: `errors_spark`/`errors_arrow` flag it, and
    the runtime fails the run or, with `errors.tolerance=all`, sets the record aside (its topic unchanged)."""

    config_model = TimestampRouterConfig
    routes = True
    doc = "Rename each record's topic to `topic.format` with its topic and its timestamp (as `timestamp.format`)."

    def _pieces(self) -> list[str]:
        """The topic format split into literal text and the tokens `topic` / `timestamp` (odd places)."""
        return _TOKENS.split(self.config.topic_format)

    def spark(self, df: DataFrame) -> dict[str, Column]:
        from pyspark.sql import functions as F

        _need_topic(df.columns, "TimestampRouter")
        topic = F.col(TOPIC_COLUMN)
        stamp = _javatime.format_spark(F.col(TIMESTAMP_COLUMN), self.config.timestamp_format)
        pieces = [(topic if p == "topic" else stamp) if i % 2 else F.lit(p) for i, p in enumerate(self._pieces())]
        kept = F.col(TIMESTAMP_COLUMN).isNull() | topic.isNull()
        routed = F.when(kept, topic).otherwise(F.concat(*pieces))
        return {name: routed if name == TOPIC_COLUMN else column(name) for name in df.columns}

    def arrow(self, batch: pa.RecordBatch) -> dict[str, pa.Array]:
        import pyarrow as pa
        import pyarrow.compute as pc

        _need_topic(batch.schema.names, "TimestampRouter")
        topic = batch.column(TOPIC_COLUMN).cast(pa.string())
        stamp = _javatime.format_arrow(batch.column(TIMESTAMP_COLUMN), self.config.timestamp_format)
        n = batch.num_rows
        pieces = [
            (topic if p == "topic" else stamp) if i % 2 else pa.repeat(pa.scalar(p, pa.string()), n)
            for i, p in enumerate(self._pieces())
        ]
        kept = pc.or_(stamp.is_null(), topic.is_null())
        routed = pc.if_else(kept, topic, pc.binary_join_element_wise(*pieces, ""))
        return {name: routed if name == TOPIC_COLUMN else batch.column(name) for name in batch.schema.names}

    def errors_spark(self, df: DataFrame) -> Column | None:
        """True for the records without a timestamp (Kafka fails on them)."""
        from pyspark.sql import functions as F

        return F.col(TIMESTAMP_COLUMN).isNull()

    def errors_arrow(self, batch: pa.RecordBatch) -> pa.Array | None:
        return batch.column(TIMESTAMP_COLUMN).is_null()
