"""What the sinks share to judge a `connect resync` re-read of a topic (`SinkConnector.resync_problem`)."""

from __future__ import annotations

from functools import cache
from importlib.metadata import entry_points

from connect_core.sdk.config import ConnectorConfig

__all__ = ["may_route"]

#: The prefix Kafka's own transformations' class names carry (`….transforms.RegexRouter`).
_KAFKA = "org.apache.kafka.connect.transforms."


def may_route(config: ConnectorConfig) -> bool:
    """Whether the connector's transforms may rename a record's topic (a router): any transform that
    is not a registered one known not to route counts, a third party's class included (a sink cannot
    tell then which topics share a table)."""
    extra = config.model_extra or {}
    return any(_routes(str(extra.get(f"transforms.{alias}.type", ""))) for alias in config.transforms)


@cache
def _routes(name: str) -> bool:
    found = [ep for ep in entry_points(group="connect_core.transforms") if ep.name == name.removeprefix(_KAFKA)]
    if not found:
        return True
    try:
        return bool(getattr(found[0].load(), "routes", True))
    except Exception:  # a plugin that does not load: the runtime refuses it; here it may route
        return True
