"""A topic's own settings, as Kafka's topic configs: their names, defaults and validation.

`topics.config` (jsonb) holds only what was set for the topic; a missing key takes its default:

* `retention.ms`: how long segments are kept (-1: for ever); default: the runtime's `topic_retention_ms`.
* `retention.bytes`: the most bytes a partition keeps (-1: no limit, the default); the oldest
  segments go while the rest still holds at least that much (Kafka's rule).
* `cleanup.policy`: `delete` (the default: retention applies), `compact` (the latest record per
  key is kept, retention does not delete) or `compact,delete` (both).
* `delete.retention.ms`: how long compaction keeps a tombstone (a key's delete marker) so that a
  sink sees it; default a day.
* `segment.bytes`: consecutive segments of a partition are merged into one while together they
  stay under this size (default 128 MiB); a segment this big is never merged.

A source sets them for the topics it creates with `topic.creation.default.<key>` (KIP-158).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from connect_core.sdk.config import whole_number

__all__ = [
    "CLEANUP_POLICIES",
    "DEFAULTS",
    "TOPIC_KEYS",
    "TopicConfigError",
    "check_topic_changes",
    "check_topic_config",
    "creation_config",
    "effective_config",
]

#: The per-topic keys a topic's config takes, as Kafka's.
TOPIC_KEYS = ("retention.ms", "retention.bytes", "cleanup.policy", "delete.retention.ms", "segment.bytes")
CLEANUP_POLICIES = ("delete", "compact", "compact,delete")
#: Defaults of the keys but `retention.ms` (whose default is a runtime setting).
DEFAULTS: dict[str, Any] = {
    "retention.bytes": -1,
    "cleanup.policy": "delete",
    "delete.retention.ms": 24 * 3600 * 1000,
    "segment.bytes": 128 << 20,
}
#: The smallest value of each number key, and what it counts (for the messages).
_NUMBERS = {
    "retention.ms": (-1, "milliseconds (-1: for ever)"),
    "retention.bytes": (-1, "bytes (-1: no limit)"),
    "delete.retention.ms": (0, "milliseconds"),
    "segment.bytes": (1, "bytes"),
}
_CREATION_PREFIX = "topic.creation.default."


class TopicConfigError(ValueError):
    """Bad topic settings; `problems` says what is wrong with each key."""

    def __init__(self, problems: dict[str, str]) -> None:
        super().__init__("; ".join(problems.values()))
        self.problems = problems


def check_topic_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """`config` as stored (numbers as numbers, the policy in Kafka's spelling); TopicConfigError
    naming every bad key and value."""
    problems: dict[str, str] = {}
    clean: dict[str, Any] = {}
    for key, value in config.items():
        name = str(key)[:100]
        if key not in TOPIC_KEYS:
            problems[name] = f"`{name}` is not a topic setting ({', '.join(TOPIC_KEYS)})"
        elif key == "cleanup.policy":
            policy = _policy(value)
            if policy is None:
                problems[key] = f"`{key}` must be one of {', '.join(CLEANUP_POLICIES)}, not `{str(value)[:100]}`"
            else:
                clean[key] = policy
        else:
            least, unit = _NUMBERS[key]
            number = _whole(value)
            if number is None:  # a bool, a fraction, a list: never read as a number
                problems[key] = f"`{key}` must be a whole number of {unit}, not `{str(value)[:100]}`"
            elif number < least:
                floor = {"retention.ms": "-1 (for ever)", "retention.bytes": "-1 (no limit)"}.get(key, str(least))
                problems[key] = f"`{key}` must be {floor} or more, not {number}"
            else:
                clean[key] = number
    if problems:
        raise TopicConfigError(problems)
    return clean


def check_topic_changes(changes: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """A change of a topic's settings: (the values to set, as stored; the keys to reset to their
    default, given as null); TopicConfigError naming every bad key and value."""
    problems: dict[str, str] = {}
    clean: dict[str, Any] = {}
    try:
        clean = check_topic_config({k: v for k, v in changes.items() if v is not None})
    except TopicConfigError as exc:
        problems.update(exc.problems)
    removed = [k for k, v in changes.items() if v is None]
    for key in removed:
        if key not in TOPIC_KEYS:
            name = str(key)[:100]
            problems[name] = f"`{name}` is not a topic setting ({', '.join(TOPIC_KEYS)})"
    if problems:
        raise TopicConfigError(problems)
    return clean, removed


def _policy(value: Any) -> str | None:
    """Kafka's list of policies in either order (`delete,compact`), as one of CLEANUP_POLICIES."""
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        parts = value
    elif isinstance(value, str) and len(value) <= 100:
        parts = value.split(",")
    else:
        return None
    names = {p.strip().lower() for p in parts}
    if not names or not names <= {"delete", "compact"} or len(parts) != len(names):
        return None
    return ",".join(sorted(names))  # "compact,delete"


def _whole(value: Any) -> int | None:
    """`value` by the SDK's one rule of whole numbers (the rule create validated
    `topic.creation.default.*` with), None when it is not one."""
    try:
        return whole_number(value)
    except ValueError:
        return None


def effective_config(config: Mapping[str, Any], default_retention_ms: int) -> dict[str, Any]:
    """Every key's value for a topic whose own settings are `config`."""
    return {"retention.ms": default_retention_ms, **DEFAULTS, **{k: v for k, v in config.items() if k in TOPIC_KEYS}}


def creation_config(connector_config: Mapping[str, Any]) -> dict[str, Any] | None:
    """The settings a source gives the topics it creates (`topic.creation.default.<key>`); None
    when it gives none. TopicConfigError when one is bad."""
    given = {
        key[len(_CREATION_PREFIX) :]: value
        for key, value in connector_config.items()
        if key.startswith(_CREATION_PREFIX) and key[len(_CREATION_PREFIX) :] in TOPIC_KEYS and value is not None
    }
    return check_topic_config(given) if given else None
