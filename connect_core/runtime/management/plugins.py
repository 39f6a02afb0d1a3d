"""Plugins: connectors, transformations and predicates; their config definitions; validation."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from connect_core.runtime.management._room import Room
from connect_core.runtime.validation import config_infos, transform_definitions
from connect_core.sdk.errors import ConfigError, NotFoundError

__all__ = ["Plugins"]


class Plugins(Room):
    def plugins(self, connectors_only: bool = False) -> list[dict[str, Any]]:
        """Connector plugins, then (unless `connectors_only`) transformations and predicates."""
        registry = self.rt.registry
        found: list[Any] = sorted(registry.plugins().values(), key=lambda p: p.name)
        if not connectors_only:
            found += sorted(registry.transforms().values(), key=lambda p: p.name)
            found += sorted(registry.predicates().values(), key=lambda p: p.name)
        return [
            {"class": p.class_path, "type": p.type, "version": p.version, "name": p.name, "aliases": p.aliases}
            for p in found
        ]

    def plugin_config(self, plugin: str) -> list[dict[str, Any]]:
        """A plugin's config definitions (Kafka's ConfigKeyInfo): a transformation's, a predicate's
        or a connector's."""
        registry = self.rt.registry
        for predicate in (False, True):
            try:
                return transform_definitions(registry.resolve_transform(plugin, predicate=predicate))
            except ConfigError:
                continue
        infos = config_infos({"connector.class": plugin}, registry)
        if infos["configs"] and any("not found" in e for c in infos["configs"] for e in c["value"]["errors"]):
            raise NotFoundError(f"plugin `{plugin}` not found")
        return [c["definition"] for c in infos["configs"] if c["definition"]]

    def validate(self, plugin: str | None, config: Mapping[str, Any]) -> dict[str, Any]:
        """Kafka's ConfigInfos of `config`; `plugin` (when given) is its `connector.class`."""
        config = dict(config)
        if plugin is not None:
            given = config.get("connector.class")
            if given is not None and self.rt.registry.resolve(given).cls is not self.rt.registry.resolve(plugin).cls:
                raise ConfigError(f"`connector.class` ({given}) does not match the plugin in the URL (`{plugin}`)")
            config.setdefault("connector.class", plugin)
        return config_infos(config, self.rt.registry, self.rt.providers)

    def reload_plugins(self) -> list[str]:
        """Look for plugins again (entry points, plugin path); the names found."""
        return sorted(self.rt.registry.reload())
