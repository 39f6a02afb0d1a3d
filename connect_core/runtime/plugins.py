"""Finding plugins (connectors, transformations, predicates): entry points, a `plugin.path` of
directories, and aliases.

A connector plugin is a `SourceConnector` or `SinkConnector` subclass; a transformation a
`Transformation`, a predicate a `Predicate` subclass (entry-point groups `connect_core.transforms`
and `connect_core.predicates`). A plugin is found

* through the `connect_core.connectors` entry-point group (how built-ins and
  installed packages register), or
* as a module or package in a `plugin.path` directory (`CONNECT_PLUGIN_PATH`),
  like RocketMQ Connect's `pluginPaths`.

`connector.class` may name a plugin by entry-point name, by class name, by
fully qualified name (`pkg.mod.Class` or `pkg.mod:Class`), or by a RocketMQ or
Kafka class name that is an alias of a built-in.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import inspect
import logging
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path
from types import ModuleType
from typing import Any

from connect_core.sdk.connector import Connector, SinkConnector, SourceConnector
from connect_core.sdk.errors import ConfigError
from connect_core.sdk.transforms import Predicate, Transformation

__all__ = ["ALIASES", "ENTRY_POINT_GROUP", "Plugin", "PluginRegistry", "TransformPlugin"]

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "connect_core.connectors"
TRANSFORM_GROUP = "connect_core.transforms"
PREDICATE_GROUP = "connect_core.predicates"
#: Kafka's packages of its transforms and predicates: `org.apache.kafka.connect.transforms.Cast$Value`
#: names the built-in `Cast$Value`, so a Kafka Connect config runs unchanged.
_KAFKA_TRANSFORMS = "org.apache.kafka.connect.transforms."
_KAFKA_PREDICATES = "org.apache.kafka.connect.transforms.predicates."

#: Class names users bring from RocketMQ Connect and Kafka Connect.
ALIASES: dict[str, str] = {
    "org.apache.rocketmq.connect.file.FileSourceConnector": "FileSourceConnector",
    "org.apache.rocketmq.connect.file.FileSinkConnector": "FileSinkConnector",
    "org.apache.kafka.connect.file.FileStreamSourceConnector": "FileSourceConnector",
    "org.apache.kafka.connect.file.FileStreamSinkConnector": "FileSinkConnector",
    "FileStreamSource": "FileSourceConnector",
    "FileStreamSink": "FileSinkConnector",
    "io.confluent.connect.jdbc.JdbcSourceConnector": "JdbcSourceConnector",
    "io.confluent.connect.jdbc.JdbcSinkConnector": "JdbcSinkConnector",
    "org.apache.rocketmq.connect.jdbc.connector.JdbcSourceConnector": "JdbcSourceConnector",
    "org.apache.rocketmq.connect.jdbc.connector.JdbcSinkConnector": "JdbcSinkConnector",
    "io.debezium.connector.postgresql.PostgresConnector": "PostgresCdcSourceConnector",
    "io.debezium.connector.mysql.MySqlConnector": "MariaDbCdcSourceConnector",
    "io.debezium.connector.mariadb.MariaDbConnector": "MariaDbCdcSourceConnector",
    "io.confluent.connect.s3.S3SinkConnector": "S3SinkConnector",
    "org.apache.iceberg.connect.IcebergSinkConnector": "IcebergSinkConnector",
    "io.tabular.iceberg.connect.IcebergSinkConnector": "IcebergSinkConnector",
}
#: Transformations' class names from other projects, as ours.
TRANSFORM_ALIASES: dict[str, str] = {
    "io.debezium.transforms.ExtractNewRecordState": "ExtractNewRecordState",
}


@dataclass(frozen=True)
class Plugin:
    name: str
    cls: type[Connector[Any]]
    origin: str  # "entry point" or the plugin directory it was found in

    @property
    def class_path(self) -> str:
        return f"{self.cls.__module__}.{self.cls.__qualname__}"

    @property
    def type(self) -> str:
        return self.cls.connector_type

    @property
    def version(self) -> str:
        return self.cls.version

    @property
    def aliases(self) -> list[str]:
        return sorted(alias for alias, target in ALIASES.items() if target == self.name)


@dataclass(frozen=True)
class TransformPlugin:
    """A transformation or a predicate."""

    name: str
    cls: type[Transformation[Any]] | type[Predicate[Any]]
    origin: str

    @property
    def class_path(self) -> str:
        return f"{self.cls.__module__}.{self.cls.__qualname__}"

    @property
    def type(self) -> str:
        """Kafka's plugin type names (`GET /connector-plugins?connectorsOnly=false`)."""
        return "transformation" if issubclass(self.cls, Transformation) else "predicate"

    @property
    def version(self) -> str:
        return self.cls.version

    @property
    def aliases(self) -> list[str]:
        package = _KAFKA_TRANSFORMS if self.type == "transformation" else _KAFKA_PREDICATES
        return (
            [package + self.name]
            if self.origin == "entry point" and self.cls.__module__.startswith("connect_core.")
            else []
        )


class PluginRegistry:
    def __init__(self, plugin_dirs: list[Path] | None = None, *, extra: Sequence[type[Any]] = ()) -> None:
        """Plugins come from entry points, `plugin_dirs`, and `extra` classes (an embedding program's
        own connectors, transformations and predicates)."""
        self._plugin_dirs = list(plugin_dirs or [])
        self._extra = [cls for cls in extra if _is_plugin(cls)]
        self._extra_kinds = [cls for cls in extra if not _is_plugin(cls)]
        self._plugins: dict[str, Plugin] | None = None
        self._transforms: dict[str, TransformPlugin] | None = None
        self._predicates: dict[str, TransformPlugin] | None = None

    def plugins(self) -> dict[str, Plugin]:
        """Every plugin found, by name (scanned once; `reload()` scans again)."""
        if self._plugins is None:
            self._plugins = self._discover()
        return self._plugins

    def reload(self) -> dict[str, Plugin]:
        self._plugins = self._transforms = self._predicates = None
        return self.plugins()

    def transforms(self) -> dict[str, TransformPlugin]:
        """Every transformation found, by name (`InsertField$Value`)."""
        if self._transforms is None:
            self._transforms = self._discover_kind(TRANSFORM_GROUP, Transformation)
        return self._transforms

    def predicates(self) -> dict[str, TransformPlugin]:
        """Every predicate found, by name (`TopicNameMatches`)."""
        if self._predicates is None:
            self._predicates = self._discover_kind(PREDICATE_GROUP, Predicate)
        return self._predicates

    def resolve_transform(self, type_name: str, *, predicate: bool = False) -> TransformPlugin:
        """The transformation (or predicate) `type_name` names: its name, a Kafka class name, or a
        class path; ConfigError listing the available ones if none."""
        found = self.predicates() if predicate else self.transforms()
        kind = "predicate" if predicate else "transformation"
        package = _KAFKA_PREDICATES if predicate else _KAFKA_TRANSFORMS
        if not isinstance(type_name, str) or not type_name:
            raise ConfigError(f"the {kind} `type` must be a class name")
        name = type_name[len(package) :] if type_name.startswith(package) else type_name
        name = name if predicate else TRANSFORM_ALIASES.get(name, name)
        if name in found:
            return found[name]
        for plugin in found.values():
            if type_name in (plugin.class_path, plugin.cls.__name__):
                return plugin
        raise ConfigError(f"{kind} `{type_name}` not found; available: {', '.join(sorted(found)) or 'none'}")

    def _discover_kind(self, group: str, base: type[Any]) -> dict[str, TransformPlugin]:
        accept = functools.partial(_is_kind, base=base)
        return {name: TransformPlugin(name, cls, origin) for name, cls, origin in self._scan(group, accept)}

    def _scan(self, group: str, accept: Callable[[object], bool]) -> list[tuple[str, Any, str]]:
        """(name, class, origin) of every class `accept`s: from the entry points of `group`, the
        embedding program's own classes, then the plugin path; the first of a name wins."""
        found: dict[str, tuple[str, Any, str]] = {}
        for ep in entry_points(group=group):
            try:
                cls = ep.load()
            except Exception:  # one broken plugin must not hide the others
                log.exception("could not load plugin entry point `%s`", ep.value)
                continue
            if accept(cls):
                found.setdefault(ep.name, (ep.name, cls, "entry point"))
        for cls in self._extra + self._extra_kinds:
            if accept(cls):
                found.setdefault(cls.__name__, (cls.__name__, cls, "registered"))
        for directory in self._plugin_dirs:
            for module in _modules_in(directory):
                for _, cls in inspect.getmembers(module, accept):
                    if cls.__module__ == module.__name__:
                        found.setdefault(cls.__name__, (cls.__name__, cls, str(directory)))
        return list(found.values())

    def resolve(self, connector_class: str) -> Plugin:
        """The plugin `connector_class` names; ConfigError listing the available ones if none."""
        if not isinstance(connector_class, str):
            message = (
                f"`connector.class` must be a string naming a connector plugin, not {type(connector_class).__name__}"
            )
            raise ConfigError(message, {"connector.class": [message]})
        plugins = self.plugins()
        name = ALIASES.get(connector_class, connector_class)
        if name in plugins:
            return plugins[name]
        # Only installed plugins (entry points, the plugin path) are ever loaded, as Kafka loads only
        # what plugin.path holds: a class path from a request never makes the server import a module.
        for plugin in plugins.values():
            if connector_class in (plugin.class_path, plugin.cls.__name__):
                return plugin
        available = ", ".join(sorted(plugins)) or "none"
        message = f"connector class `{connector_class}` not found; available plugins: {available}"
        raise ConfigError(message, {"connector.class": [message]})

    def _discover(self) -> dict[str, Plugin]:
        return {name: Plugin(name, cls, origin) for name, cls, origin in self._scan(ENTRY_POINT_GROUP, _is_plugin)}


def _is_plugin(obj: object) -> bool:
    return (
        inspect.isclass(obj)
        and issubclass(obj, (SourceConnector, SinkConnector))
        and obj not in (SourceConnector, SinkConnector)
        and not inspect.isabstract(obj)
    )


def _is_kind(obj: object, *, base: type[Any]) -> bool:
    return inspect.isclass(obj) and issubclass(obj, base) and obj is not base and not inspect.isabstract(obj)


def _modules_in(directory: Path) -> list[ModuleType]:
    if not directory.is_dir():
        log.warning("plugin path `%s` is not a directory; skipped", directory)
        return []
    if str(directory) not in sys.path:
        sys.path.append(str(directory))  # so plugin modules can import their siblings
    modules = []
    for entry in sorted(directory.iterdir()):
        if entry.name.startswith(("_", ".")):
            continue
        if entry.suffix == ".py" or (entry.is_dir() and (entry / "__init__.py").exists()):
            module_name = entry.stem
            try:
                modules.append(importlib.import_module(module_name))
            except Exception:
                log.exception("could not import plugin module `%s`", entry)
    return modules
