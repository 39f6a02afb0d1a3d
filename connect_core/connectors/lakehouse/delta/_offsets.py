"""The topic offsets a Delta table holds: its application transactions (as kafka-delta-ingest's).

Every commit of the sink to a table carries one `txn` action per topic partition it covers:
app id `connect-core/<connector>/<topic>/<partition>`, version the partition's next offset. The
table's snapshot keeps the newest version of each app id (log checkpoints keep them too, unless
`delta.setTransactionRetentionDuration` is set on the table: leave it unset), so a run killed after
the Delta commit and before the runtime's reads them back and skips the records that landed.

An offset reset or alteration through Connect is a commit of no rows carrying the new versions:
version 0 for a reset or removed partition, the altered offset otherwise. delta-rs lists no app
ids, so a reset looks up partitions 0 … `MAX_PARTITIONS` - 1 of each topic (a lookup in the
loaded snapshot, no I/O).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from deltalake import DeltaTable, Transaction

    from connect_core.sdk.records import TopicPartition

__all__ = ["MAX_PARTITIONS", "alter", "app_id", "held", "transactions"]

#: The most partitions a topic has (`topic.partitions` ≤ 1024).
MAX_PARTITIONS = 1024


def app_id(connector: str, topic: str, partition: int) -> str:
    return f"connect-core/{connector}/{topic}/{partition}"


def held(table: DeltaTable | None, connector: str, topic: str, partitions: Iterable[int]) -> dict[int, int]:
    """The next offset `table` holds for each of `partitions` of `topic` (absent: none committed)."""
    if table is None:
        return {}
    found: dict[int, int] = {}
    for partition in partitions:
        version = table.transaction_version(app_id(connector, topic, partition))
        if version:
            found[partition] = int(version)
    return found


def transactions(connector: str, topic: str, reached: Mapping[int, int]) -> list[Transaction]:
    """The `txn` actions of a commit that brings `topic`'s partitions to `reached`."""
    from deltalake import Transaction

    return [Transaction(app_id(connector, topic, p), int(o)) for p, o in sorted(reached.items())]


def alter(
    table: DeltaTable, connector: str, topics: Iterable[str], offsets: Mapping[TopicPartition, int | None] | None
) -> int:
    """Apply a reset (`offsets` None: every partition of `topics` the table holds back to 0) or an
    alteration (None for a partition: back to 0) to `table`, in one commit of no rows; the number
    of app ids it changes (none: no commit)."""
    import pyarrow as pa
    from deltalake import CommitProperties, Transaction, write_deltalake

    wanted: dict[str, int] = {}
    if offsets is None:
        for topic in topics:
            for partition, _ in held(table, connector, topic, range(MAX_PARTITIONS)).items():
                wanted[app_id(connector, topic, partition)] = 0
    else:
        for tp, offset in offsets.items():
            wanted[app_id(connector, tp.topic, tp.partition)] = 0 if offset is None else int(offset)
    if not wanted:
        return 0
    empty = pa.schema(table.schema().to_arrow()).empty_table()
    write_deltalake(
        table,
        empty,
        mode="append",
        commit_properties=CommitProperties(app_transactions=[Transaction(a, v) for a, v in sorted(wanted.items())]),
    )
    return len(wanted)
