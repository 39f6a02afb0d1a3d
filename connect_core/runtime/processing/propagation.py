"""What a change of a topic's columns does to a sink's target (`schema.propagation`, Airbyte's choices).

The runner compares each topic's records (after the sink's transforms and contract) with the shape
the sink let through before, and decides here, once for every sink:

* `ignore`: the target keeps its columns: columns the records gained are not written;
* `propagate_columns`: the sink adds columns, widens types, and keeps a dropped column (nullable);
* `propagate_fully`: the same, and a dropped column is dropped from the target;
* `pause`: any change of columns, types or key pauses the connector.

A breaking change pauses the connector under every mode but `ignore`: a key column changed, or a
type changed to one that does not hold every value of the former (`bigint` to `int`, `string` to
`int`: `widens`). A rename is never guessed: it is a column dropped and one added. What the sink
does to its target is its own (`SinkBatch.schema_changes` tells it); the pause is the runner's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from connect_core.runtime.security.limits import one_line
from connect_core.runtime.topics.schemas import SchemaDiff, TopicSchema, diff_schemas
from connect_core.sdk.config import Propagation

__all__ = ["Decision", "decide", "widens"]

_INTEGRAL = ("tinyint", "smallint", "int", "bigint")
_DECIMAL = re.compile(r"decimal\((\d+),(\d+)\)")
#: Exact integers each integral type holds at most, in decimal digits (a decimal holds it when its
#: integer digits, precision - scale, are at least these).
_DIGITS = {"tinyint": 3, "smallint": 5, "int": 10, "bigint": 19}


def widens(former: str, new: str) -> bool:
    """Whether every value of Spark type `former` is a value of `new` (so the target's column can
    be widened to it without loss): integers to larger integers or a decimal wide enough, `float`
    to `double`, decimals to decimals with as many integer and fraction digits, `date` to
    `timestamp`; any type to itself."""
    if former == new:
        return True
    if former in _INTEGRAL and new in _INTEGRAL:
        return _INTEGRAL.index(new) >= _INTEGRAL.index(former)
    to_decimal = _DECIMAL.fullmatch(new)
    if former in _INTEGRAL and to_decimal:
        precision, scale = int(to_decimal[1]), int(to_decimal[2])
        return precision - scale >= _DIGITS[former]
    from_decimal = _DECIMAL.fullmatch(former)
    if from_decimal and to_decimal:
        p1, s1, p2, s2 = int(from_decimal[1]), int(from_decimal[2]), int(to_decimal[1]), int(to_decimal[2])
        return s2 >= s1 and p2 - s2 >= p1 - s1
    return (former, new) in {("float", "double"), ("date", "timestamp"), ("date", "timestamp_ntz")}


@dataclass(frozen=True)
class Decision:
    """What propagation makes of one topic's change: whether to pause (and why), the change the
    sink applies to its target, and the columns the records lose first (`ignore`)."""

    topic: str
    diff: SchemaDiff | None = None
    pause: str | None = None
    #: columns the records gained that the target does not get (`ignore`)
    strip: tuple[str, ...] = ()

    @property
    def changes(self) -> bool:
        return self.diff is not None and not self.diff.empty

    def for_sink(self) -> dict[str, Any]:
        """The change as the sink applies it (`SinkBatch.schema_changes`): a retyping only where it
        widens (an accepted narrowing keeps the target's wider column)."""
        if self.diff is None:
            return {}
        change = self.diff.to_dict()
        change["retyped"] = [r for r in self.diff.retyped if widens(r["from"], r["to"])]
        return change


def decide(
    mode: Propagation | None,
    topic: str,
    shape: TopicSchema,
    reference: TopicSchema | None,
    *,
    accepted: bool = False,
) -> Decision:
    """The decision for records of `shape` read from `topic`, against the shape the sink let
    through before (None: the topic is new to it, a first load: the target is made as the sink makes
    it). `accepted`: an operator accepted this very change after it paused the connector: it goes
    through, propagated as `propagate_columns` would (or as `propagate_fully`, under that mode)."""
    if mode is None or reference is None or reference.fingerprint == shape.fingerprint:
        return Decision(topic)
    diff = diff_schemas(reference.document, shape.document)
    if accepted:
        return Decision(topic, diff)
    if mode == "ignore":
        return Decision(topic, diff, strip=tuple(c["name"] for c in diff.added))
    narrowed = [r for r in diff.retyped if not widens(r["from"], r["to"])]
    breaking = [f"the key changed from {diff.key['from']} to {diff.key['to']}"] if diff.key else []
    breaking += [f"column `{_shown(r['name'])}` narrowed from {r['from']} to {r['to']}" for r in narrowed]
    if breaking:
        return Decision(topic, diff, pause=f"a breaking change of topic `{topic}`: " + "; ".join(breaking))
    if mode == "pause" and (diff.added or diff.dropped or diff.retyped):
        return Decision(topic, diff, pause=f"topic `{topic}` changed: {_summary(diff)}")
    return Decision(topic, diff)


def _summary(diff: SchemaDiff) -> str:
    parts = [f"column `{_shown(c['name'])}` ({c['type']}) added" for c in diff.added]
    parts += [f"column `{_shown(c['name'])}` ({c['type']}) dropped" for c in diff.dropped]
    parts += [f"column `{_shown(r['name'])}` retyped from {r['from']} to {r['to']}" for r in diff.retyped]
    return "; ".join(parts)


def _shown(name: str) -> str:
    return one_line(name if len(name) <= 80 else name[:80] + "…")
