"""Lakehouse sinks: topics into table formats whose commit is their own (Iceberg; Delta to come).

Such a target commits apart from the runtime's fenced Postgres commit, so each of its commits
records the topic offsets it covers (`iceberg/`: in the snapshot summary) and a rerun after a
crash between the two commits skips what already landed. `_changes` is what every lakehouse sink
shares: CDC records reduced to the newest change per key of a batch.
"""

from connect_core.connectors.lakehouse._changes import ChangeSet, changes

__all__ = ["ChangeSet", "changes"]
