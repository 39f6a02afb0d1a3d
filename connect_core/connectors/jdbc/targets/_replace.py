"""What every JDBC target shares for a `replace` re-read (`SinkBatch.replacing`): the names of the
side tables beside the target and the mark of the generation the target holds.

A re-read's rows go into a copy of the target (`<table>__connect_resync_<g>`), swapped in for the
target when the re-read ends, in one atomic step of the database. The copy carries, in its table
comment, the generation it holds (`mark`), set before the swap in the step that swaps it: the
target then says itself which re-read it is, so a batch given again after a kill -9 (before or
after the swap) is told apart without any other state. A user's own comment text is kept.
"""

from __future__ import annotations

import hashlib
import re

__all__ = ["COPY", "OLD", "base", "held", "is_side", "mark", "side_name"]

#: The suffix (before the generation) of the copy a re-read is written into.
COPY = "__connect_resync_"
#: The suffix (before the generation) of the target renamed away by a swap that is not one
#: transaction (MariaDB's RENAME, then DROP): a kill -9 between the two leaves it, dropped next time.
OLD = "__connect_old_"
#: Digits kept for a generation: the side tables' names have room for this many.
_GENERATION_DIGITS = 10
_MARK = re.compile(r"\[connect-core re-read of topic ([A-Za-z0-9._-]{1,249}): generation ([0-9]{1,18})\]")


def base(name: str, limit: int) -> str:
    """What every side table's name of target `name` begins with: `name`, or a prefix of it with a hash of the whole when a side table's name would not fit in
    `limit` characters (PostgreSQL: 63, MariaDB: 64); the same for every generation."""
    room = limit - len(COPY) - _GENERATION_DIGITS
    if len(name) <= room:
        return name
    return f"{name[: room - 9]}_{hashlib.sha256(name.encode()).hexdigest()[:8]}"


def side_name(name: str, suffix: str, generation: int, limit: int) -> str:
    """The name of target `name`'s side table (`COPY` or `OLD`) for `generation`, at most `limit` long."""
    if not 0 < generation < 10**_GENERATION_DIGITS:
        raise ValueError(f"re-read generation {generation} is out of range")
    return f"{base(name, limit)}{suffix}{generation}"


def is_side(name: str, candidate: str, limit: int) -> bool:
    """Whether table `candidate` is a side table (a copy or an old target) of target `name`."""
    start = base(name, limit)
    return any(
        candidate.startswith(start + suffix) and candidate[len(start + suffix) :].isdigit() for suffix in (COPY, OLD)
    )


def held(comment: str | None, topic: str) -> int | None:
    """The generation of `topic`'s re-reads a table's comment says it holds (None: none)."""
    for found in _MARK.finditer(comment or ""):
        if found[1] == topic:
            return int(found[2])
    return None


def mark(comment: str | None, topic: str, generation: int) -> str:
    """`comment` (the target's: a user's text is kept) marked as holding `generation` of `topic`."""
    kept = [m for m in _MARK.finditer(comment or "") if m[1] != topic]
    text = _MARK.sub("", comment or "").strip()
    marks = [*(m[0] for m in kept), f"[connect-core re-read of topic {topic}: generation {generation}]"]
    return " ".join(filter(None, [text, *marks]))
