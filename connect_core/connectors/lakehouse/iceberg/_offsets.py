"""The topic offsets an Iceberg table holds: in its snapshots' summaries, and after an alteration.

Every commit of the sink to a table records, in its snapshot summary under
`connect.offsets.<connector>`, the next offset of every topic partition that table has taken
(JSON `{topic: {partition: offset}}`): the newest such summary along the main branch's history
says how far the table is. A run killed after the Iceberg commit and before the runtime's reads
it back and skips what landed, so it neither writes twice nor loses anything.

An offset reset or alteration through Connect has no data to commit: it is written as the table
property of the same name, `{"snapshot-id": S, "offsets": {…}}`, S being the table's current
snapshot then. It holds until a snapshot newer than S carries offsets of its own.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from connect_core.sdk.errors import DataError

if TYPE_CHECKING:
    from pyiceberg.table import Table

    from connect_core.sdk.records import TopicPartition

__all__ = ["Offsets", "alter", "encode", "key", "read"]

#: topic → partition → next offset
Offsets = dict[str, dict[int, int]]


def key(connector: str) -> str:
    """The summary key (and table property) of `connector`'s offsets."""
    return f"connect.offsets.{connector}"


def encode(offsets: Offsets) -> str:
    return json.dumps(
        {t: {str(p): o for p, o in sorted(ps.items())} for t, ps in sorted(offsets.items())}, separators=(",", ":")
    )


def _decode(text: str, where: str) -> Offsets:
    try:
        raw = json.loads(text)
        return {str(t): {int(p): int(o) for p, o in ps.items()} for t, ps in raw.items()}
    except (ValueError, TypeError, AttributeError) as exc:
        raise DataError(f"{where} holds offsets that are not `{{topic: {{partition: offset}}}}` JSON") from exc


def read(table: Table, connector: str) -> Offsets:
    """The offsets `table` holds for `connector` (empty: it never committed there)."""
    name = key(connector)
    override_text = table.properties.get(name)
    override = json.loads(override_text) if override_text else None
    since = override.get("snapshot-id") if isinstance(override, dict) else None
    snapshot = table.current_snapshot()
    while snapshot is not None:
        if since is not None and snapshot.snapshot_id == since:
            break
        found = snapshot.summary.get(name) if snapshot.summary is not None else None
        if found is not None:
            return _decode(found, f"snapshot {snapshot.snapshot_id} of table `{'.'.join(table.name())}`")
        parent = snapshot.parent_snapshot_id
        snapshot = table.snapshot_by_id(parent) if parent is not None else None
    if isinstance(override, dict):
        return _decode(json.dumps(override.get("offsets", {})), f"table property `{name}`")
    return {}


def alter(table: Table, connector: str, offsets: Mapping[TopicPartition, int | None] | None) -> None:
    """Apply an offset reset (`offsets` None) or alteration (None for a partition: removed) to the
    offsets `table` holds, as a table property (one metadata commit, no snapshot)."""
    current = read(table, connector)
    if offsets is None:
        current = {}
    else:
        for tp, offset in offsets.items():
            partitions = current.setdefault(tp.topic, {})
            if offset is None:
                partitions.pop(tp.partition, None)
            else:
                partitions[tp.partition] = offset
        current = {t: ps for t, ps in current.items() if ps}
    snapshot = table.current_snapshot()
    value: dict[str, Any] = {
        "snapshot-id": snapshot.snapshot_id if snapshot is not None else None,
        "offsets": json.loads(encode(current)),
    }
    with table.transaction() as tx:
        tx.set_properties({key(connector): json.dumps(value, separators=(",", ":"))})
