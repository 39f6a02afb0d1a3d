"""What every JDBC target shares for a `replace` re-read (`SinkBatch.replacing`): the names of the
side tables beside the target, the register of the side tables the sink made, and the mark of the
generation the target holds.

A re-read's rows go into a copy of the target (`<table>__connect_resync_<g>_<topic hash>`), swapped
in for the target when the re-read ends, in one atomic step of the database. The copy carries, in
its table comment, the generation it holds (`mark`), set before the swap in the step that swaps it:
the target then says itself which re-read it is, so a batch given again after a kill -9 (before or
after the swap) is told apart without any other state. A user's own comment text is kept.

Every side table (a copy, or MariaDB's old target renamed away) is entered in the register table
`connect_sink_resync_tables` of the target's database before it is made: which connector, topic
and generation it is for, and which target it replaces. Only entered tables are ever dropped or
swapped in (a user's table that happens to be named like one is never touched: a clash is a
ConfigError naming it), and the end of a re-read finds its copy, and so its target, there, not
by deriving the target again from a batch that may not carry the routes its rows took.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any, NamedTuple

from connect_core.sdk.errors import ConfigError

__all__ = ["COPY", "OLD", "REGISTER", "Side", "claim", "claimed", "copy_of", "held", "mark", "release", "side_name"]

#: The suffix (before the generation) of the copy a re-read is written into.
COPY = "__connect_resync_"
#: The suffix (before the generation) of the target renamed away by a swap that is not one
#: transaction (MariaDB's RENAME, then DROP): a kill -9 between the two leaves it, dropped next time.
OLD = "__connect_old_"
#: The table of the target's database entering each side table a sink made (see the module doc).
REGISTER = "connect_sink_resync_tables"
#: Digits kept for a generation: the side tables' names have room for this many.
_GENERATION_DIGITS = 10
#: Hex digits of the topic's hash in a side table's name (two topics' copies never share a name).
_TAG = 6
_MARK = re.compile(r"\[connect-core re-read of topic ([A-Za-z0-9._-]{1,249}): generation ([0-9]{1,18})\]")


class Side(NamedTuple):
    """A side table entered in the register: where it is, what it is for."""

    schema: str
    name: str
    connector: str
    topic: str
    generation: int
    target: str  # the target's name, in `schema`


def _base(name: str, limit: int) -> str:
    """What every side table's name of target `name` begins with: `name`, or a prefix of it with a
    hash of the whole when a side table's name would not fit in `limit` characters (PostgreSQL: 63,
    MariaDB: 64); the same for every generation."""
    room = limit - len(COPY) - _GENERATION_DIGITS - _TAG - 1
    if len(name) <= room:
        return name
    return f"{name[: room - 9]}_{hashlib.sha256(name.encode()).hexdigest()[:8]}"


def side_name(name: str, suffix: str, topic: str, generation: int, limit: int) -> str:
    """The name of target `name`'s side table (`COPY` or `OLD`) for `generation` of `topic`, at most
    `limit` long."""
    if not 0 < generation < 10**_GENERATION_DIGITS:
        raise ValueError(f"re-read generation {generation} is out of range")
    return f"{_base(name, limit)}{suffix}{generation}_{hashlib.sha256(topic.encode()).hexdigest()[:_TAG]}"


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


_COLUMNS = "side_schema, side_name, connector, topic, generation, target_name"


def _entered(cur: Any, schema: str, name: str) -> Side | None:
    cur.execute(f"SELECT {_COLUMNS} FROM {REGISTER} WHERE side_schema = %s AND side_name = %s", (schema, name))
    found = cur.fetchone()
    return Side(*found) if found is not None else None


def claim(cur: Any, side: Side, exists: bool) -> None:
    """Enter `side` in the register before it is made (or find it entered already: a batch given
    again). ConfigError when a table of its name exists that the sink did not make, or another
    connector's re-read claimed the name: it is never dropped, written or swapped in."""
    entered = _entered(cur, side.schema, side.name)
    if entered == side:
        return
    if exists or entered is not None:
        whose = "not a copy this sink made" if entered is None else f"entered for connector `{entered.connector}`"
        raise ConfigError(
            f"table {side.schema}.{side.name} is in the way of the re-read of topic `{side.topic}` into "
            f"{side.schema}.{side.target} ({whose}): rename or drop it, then run the sink again"
        )
    cur.execute(
        f"INSERT INTO {REGISTER} ({_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s)",
        (side.schema, side.name, side.connector, side.topic, side.generation, side.target),
    )


def release(cur: Any, side: Side) -> None:
    """`side` out of the register (it was dropped, or swapped in under the target's name)."""
    cur.execute(f"DELETE FROM {REGISTER} WHERE side_schema = %s AND side_name = %s", (side.schema, side.name))


def claimed(cur: Any, connector: str, schema: str, target: str) -> list[Side]:
    """The side tables `connector` entered for target `schema`.`target`."""
    cur.execute(
        f"SELECT {_COLUMNS} FROM {REGISTER} WHERE connector = %s AND side_schema = %s AND target_name = %s",
        (connector, schema, target),
    )
    return [Side(*r) for r in cur.fetchall()]


def copy_of(cur: Any, connector: str, topic: str, generation: int) -> Side | None:
    """The copy `connector` entered for re-read `generation` of `topic`, if it made one."""
    cur.execute(
        f"SELECT {_COLUMNS} FROM {REGISTER} WHERE connector = %s AND topic = %s AND generation = %s "
        "AND side_name LIKE %s ORDER BY side_schema, side_name",
        (connector, topic, generation, f"%{COPY}%"),
    )
    found = cur.fetchall()
    return Side(*found[0]) if found else None
