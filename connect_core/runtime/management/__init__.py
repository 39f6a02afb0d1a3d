"""The management room: what an admin can do (Kafka Connect's Herder), in one place.

`Management` is the interface (connectors, offsets, pools and rebalancing, topics, plugins);
`LocalManagement` implements it on this process's runtime, by concern: `connectors` (reads),
`connector_changes`, `offsets`, `cluster`, `topics`, `plugins`, over the Kafka JSON `shapes`.
The REST API and the CLI call it; they do not decide again.
"""

from connect_core.runtime.management.connector_changes import ApplyAction
from connect_core.runtime.management.local import LocalManagement
from connect_core.runtime.management.offsets import NotStoppedError
from connect_core.runtime.management.protocol import Management
from connect_core.runtime.management.shapes import expand_kinds, expanded_dict

__all__ = ["ApplyAction", "LocalManagement", "Management", "NotStoppedError", "expand_kinds", "expanded_dict"]
