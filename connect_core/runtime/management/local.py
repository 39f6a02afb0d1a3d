"""The management room over this process's runtime: the operations, straight on the metadata store."""

from __future__ import annotations

from connect_core.runtime.management.cluster import Cluster
from connect_core.runtime.management.connector_changes import ConnectorChanges
from connect_core.runtime.management.offsets import Offsets
from connect_core.runtime.management.plugins import Plugins
from connect_core.runtime.management.topics import Topics

__all__ = ["LocalManagement"]


class LocalManagement(ConnectorChanges, Offsets, Cluster, Topics, Plugins):
    """What an admin can do (`Management`), on the runtime given: connectors (reads and changes),
    offsets, pools and rebalancing, topics, plugins.

    HTTP-agnostic: methods take and return JSON-able values and raise the SDK's errors
    (`NotFoundError` → 404, `ConnectorExistsError` → 409, `ConfigError` → 400). Every config that
    leaves here is masked. `on_write` is called after each change of a connector (the REST API
    drops the JSON it keeps).
    """
