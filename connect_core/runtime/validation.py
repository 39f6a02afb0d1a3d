"""Validating a connector config, reporting every problem at once.

The result has Kafka Connect's `ConfigInfos` shape (what
`PUT /connector-plugins/{p}/config/validate` returns), so REST, CLI and the
error raised on create all say the same thing.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, cast

from pydantic import TypeAdapter, ValidationError, create_model
from pydantic.fields import FieldInfo

from connect_core.runtime.plugins import Plugin, PluginRegistry, TransformPlugin
from connect_core.runtime.processing import config as transforms_config
from connect_core.runtime.security import ConfigProviders, is_secret_key, mask_config, mask_text
from connect_core.runtime.security.paths import AllowedPaths
from connect_core.runtime.topics.config import TopicConfigError, creation_config
from connect_core.sdk.config import ConnectorConfig, SinkConnectorConfig, SourceConnectorConfig
from connect_core.sdk.connector import Connector, SinkConnector
from connect_core.sdk.errors import ConfigError

__all__ = [
    "ValidatedConnector",
    "claim_conflicts",
    "config_infos",
    "connector_config_model",
    "transform_definitions",
    "validate_connector",
]


@functools.cache
def connector_config_model(cls: type[Connector[Any]]) -> type[ConnectorConfig]:
    """The model a connector's config is validated and read with: its `config_model`, with the keys
    every source (`SourceConnectorConfig`) or sink (`SinkConnectorConfig`) has when the model was
    written without them (a plugin's model may subclass `ConnectorConfig` itself). So `topic.partitions`
    is checked at create, and read by the runner, for every source whatever its model."""
    model = cls.config_model
    kind = SinkConnectorConfig if issubclass(cls, SinkConnector) else SourceConnectorConfig
    if issubclass(model, kind):
        return model
    if issubclass(kind, model):  # the model is `ConnectorConfig` itself
        return kind
    merged = create_model(model.__name__, __base__=(model, kind), __module__=model.__module__)
    return cast(type[ConnectorConfig], merged)


@dataclass(frozen=True)
class ValidatedConnector:
    name: str
    plugin: Plugin
    config: dict[str, Any]  # as the user wrote it (stored verbatim)
    model: ConnectorConfig
    task_configs: list[dict[str, Any]]


def _field_key(name: str, info: FieldInfo) -> str:
    """The config key a field is written as (its first alias)."""
    alias = info.validation_alias
    if isinstance(alias, str):
        return alias
    if alias is not None and hasattr(alias, "choices"):
        first = alias.choices[0]
        return first if isinstance(first, str) else name
    return info.alias or name


def _errors(
    config: Mapping[str, Any],
    registry: PluginRegistry,
    providers: ConfigProviders | None = None,
    allowed_paths: AllowedPaths | None = None,
) -> tuple[Plugin | None, ConnectorConfig | None, dict[str, list[str]]]:
    errors: dict[str, list[str]] = {}
    plugin: Plugin | None = None
    model_cls: type[ConnectorConfig] = ConnectorConfig
    connector_class = config.get("connector.class")
    if not connector_class:
        errors["connector.class"] = ["Missing required configuration `connector.class` which has no default value."]
    elif not isinstance(connector_class, str):
        errors["connector.class"] = ["must be a string naming a connector plugin"]
    else:
        try:
            plugin = registry.resolve(connector_class)
            model_cls = connector_config_model(plugin.cls)
        except ConfigError as exc:
            errors.update(exc.errors)
    model: ConnectorConfig | None = None
    try:
        model = model_cls.model_validate(dict(config))
    except ValidationError as exc:
        keys = {name: _field_key(name, info) for name, info in model_cls.model_fields.items()}
        for err in exc.errors():
            loc = err["loc"]
            key = str(loc[0]) if loc else "config"
            key = keys.get(key, key)
            if key == "connector.class" and key in errors:
                continue  # already explained with the list of plugins
            message = (
                f"Missing required configuration `{key}` which has no default value."
                if err["type"] == "missing"
                else _problem(key, err)
            )
            errors.setdefault(key, []).append(message)
    for key, problems in _spelling_problems(model_cls, config).items():
        errors.setdefault(key, []).extend(problems)
    for key, problems in _family_problems(model_cls, config).items():
        errors.setdefault(key, []).extend(problems)
    if issubclass(model_cls, SourceConnectorConfig):
        try:  # the very check the runner makes when it creates the source's topics
            creation_config(config)
        except TopicConfigError as exc:
            for key, problem in exc.problems.items():
                errors.setdefault(f"topic.creation.default.{key}", [problem])
    # Before the connector's own `validate`, which may look at the disk: it must never touch (or
    # tell whether there is) a path outside `file.allowed.paths`.
    path_errors = (allowed_paths or AllowedPaths.from_env()).problems(model_cls, config)
    for key, problems in path_errors.items():
        errors.setdefault(key, []).extend(problems)
    if plugin is not None and model is not None and not path_errors:
        for key, problems in plugin.cls().validate(model).items():
            errors.setdefault(key, []).extend(problems)
        for key, problems in _upkeep_problems(plugin, model, config).items():
            errors.setdefault(key, []).extend(problems)
    for key, problems in transforms_config.problems(config, registry).items():
        errors.setdefault(key, []).extend(problems)
    for key, problems in (providers or ConfigProviders()).problems(config).items():
        errors.setdefault(key, []).extend(problems)
    return plugin, model, errors


def _upkeep_problems(plugin: Plugin, model: ConnectorConfig, config: Mapping[str, Any]) -> dict[str, list[str]]:
    """An `upkeep.schedule` of a connector that has no upkeep jobs would schedule nothing: said."""
    if not isinstance(model, SinkConnectorConfig) or model.upkeep_schedule is None:
        return {}
    connector: Any = plugin.cls()
    try:
        jobs = connector.upkeep(str(config.get("name") or ""), model) if isinstance(connector, SinkConnector) else ()
    except Exception as exc:  # a plugin's bug: said by key rather than a 500
        return {"upkeep.schedule": [f"the connector's upkeep jobs cannot be listed: {mask_text(str(exc))[:200]}"]}
    if not jobs:
        return {"upkeep.schedule": [f"connector `{plugin.name}` has no table upkeep: leave `upkeep.schedule` out"]}
    return {}


def _spelling_problems(model_cls: type[ConnectorConfig], config: Mapping[str, Any]) -> dict[str, list[str]]:
    """A setting given in more than one of its spellings (`topic.partitions` and Kafka's
    `topic.creation.default.partitions`): pydantic reads only the first, so every other is validated
    here too, and all must agree (else which one counts would be a silent choice)."""
    problems: dict[str, list[str]] = {}
    for info in model_cls.model_fields.values():
        choices = [c for c in getattr(info.validation_alias, "choices", ()) if isinstance(c, str)]
        given = [c for c in choices if c in config]
        if len(given) < 2:
            continue
        field_type: Any = Annotated[info.annotation, *info.metadata]  # the field's type and constraints
        adapter: TypeAdapter[Any] = TypeAdapter(field_type)
        values: dict[str, Any] = {}
        for key in given:
            try:
                values[key] = adapter.validate_python(config[key])
            except ValidationError as exc:
                if key != given[0]:  # the first one's problems are reported by the model's validation
                    problems.setdefault(key, []).extend(_problem(key, err) for err in exc.errors())
        if len(values) == len(given) and len({repr(v) for v in values.values()}) > 1:
            both = " and ".join(f"`{key}`" for key in given)
            for key in given:
                problems.setdefault(key, []).append(
                    f"{both} are one setting, given with different values; give one of them"
                )
    return problems


#: Key families whose every key the runtime knows: a key of one that no field has is a typo (a
#: contract silently not applied is worse than an error), not a setting of a newer version.
_FAMILIES = ("schema.contract", "schema.propagation")


def _family_problems(model_cls: type[ConnectorConfig], config: Mapping[str, Any]) -> dict[str, list[str]]:
    """A key of a known family (`schema.contract.*`, `schema.propagation`) that the connector's
    model has no field for: misspelt, or a sink's setting given to a source."""
    known = {_field_key(name, info) for name, info in model_cls.model_fields.items()}
    family = sorted(k for k in known if k.startswith(_FAMILIES))
    problems: dict[str, list[str]] = {}
    for key in config:
        if not isinstance(key, str) or not key.startswith(_FAMILIES) or key in known:
            continue
        shown = key if len(key) <= 80 else key[:80] + "…"
        if key == "schema.propagation":
            problems[shown] = ["`schema.propagation` is a sink's setting (what a change does to its target)"]
        else:
            problems[shown] = [f"unknown key: the keys of this family are {', '.join(f'`{k}`' for k in family)}"]
    return problems


def _problem(key: str, err: Any) -> str:
    """pydantic's message, with the value it got unless that could be a secret or is long."""
    given = err.get("input")
    if is_secret_key(key) or isinstance(given, dict | list) or len(repr(given)) > 80:
        return str(err["msg"])
    return f"{err['msg']} (got {mask_text(repr(given))})"


def validate_connector(
    name: str,
    config: Mapping[str, Any],
    registry: PluginRegistry,
    providers: ConfigProviders | None = None,
    allowed_paths: AllowedPaths | None = None,
) -> ValidatedConnector:
    """Validate `config` and split it into task configs; ConfigError lists every problem.

    `allowed_paths` confines `LocalPath` fields; by default this process's `file.allowed.paths`."""
    plugin, model, errors = _errors(config, registry, providers, allowed_paths)
    if errors or plugin is None or model is None:
        lines = [f"{key}: {problem}" for key, problems in sorted(errors.items()) for problem in problems]
        raise ConfigError(
            f"Connector configuration for `{name}` is invalid and contains the following "
            f"{len(lines)} error(s):\n" + "\n".join(lines),
            errors,
        )
    try:
        tasks = plugin.cls().task_configs(model, model.tasks_max)
    except ConfigError:
        raise
    except Exception as exc:
        raise ConfigError(f"connector `{name}` could not split into tasks: {exc}") from exc
    if not tasks:
        raise ConfigError(f"connector `{name}` produced no task configs; check its config")
    return ValidatedConnector(name, plugin, dict(config), model, tasks[: model.tasks_max])


def claim_conflicts(
    validated: ValidatedConnector,
    others: Callable[[], Iterable[tuple[str, Mapping[str, Any]]]],
    registry: PluginRegistry,
) -> dict[str, list[str]]:
    """What `validated` claims (`Connector.claims`) that another stored connector (`others()`: name and
    config) claims too, by config key. The connector itself (an update) claims nothing against itself;
    a stored config its plugin cannot read any more claims nothing."""
    mine = validated.plugin.cls().claims(validated.name, validated.model)
    if not mine:
        return {}
    errors: dict[str, list[str]] = {}
    for other, config in others():
        if other == validated.name:
            continue
        try:
            plugin = registry.resolve(str(config.get("connector.class")))
            theirs = plugin.cls().claims(other, plugin.cls.config_model.model_validate(dict(config)))
        except Exception:
            continue
        for claim in mine.keys() & theirs.keys():
            errors.setdefault(mine[claim], []).append(
                f"{claim} is connector `{other}`'s: give this connector its own (or delete `{other}`)"
            )
    return errors


def config_infos(
    config: Mapping[str, Any],
    registry: PluginRegistry,
    providers: ConfigProviders | None = None,
    allowed_paths: AllowedPaths | None = None,
) -> dict[str, Any]:
    """Kafka Connect's `ConfigInfos` for `config`: one entry per known key, with its errors."""
    plugin, _model, errors = _errors(config, registry, providers, allowed_paths)
    model_cls = connector_config_model(plugin.cls) if plugin else ConnectorConfig
    shown = mask_config(config)
    configs: list[dict[str, Any]] = []
    seen: set[str] = set()
    for name, info in model_cls.model_fields.items():
        key = _field_key(name, info)
        seen.add(key)
        configs.append(
            {
                "definition": {
                    "name": key,
                    "type": _type_name(info),
                    "required": info.is_required(),
                    "default_value": None if info.is_required() else _jsonable(info.get_default()),
                    "documentation": info.description or "",
                    "group": "Common" if key in _COMMON else (plugin.name if plugin else "Common"),
                },
                "value": {
                    "name": key,
                    "value": shown.get(key),
                    "recommended_values": [],
                    "errors": errors.get(key, []),
                    "visible": True,
                },
            }
        )
    for key in sorted(set(errors) - seen):
        configs.append(
            {
                "definition": None,
                "value": {
                    "name": key,
                    "value": shown.get(key),
                    "recommended_values": [],
                    "errors": errors[key],
                    "visible": True,
                },
            }
        )
    return {
        "name": plugin.class_path if plugin else str(config.get("connector.class")),
        "error_count": sum(len(v) for v in errors.values()),
        "groups": sorted({c["definition"]["group"] for c in configs if c["definition"]}),
        "configs": configs,
    }


def transform_definitions(plugin: TransformPlugin) -> list[dict[str, Any]]:
    """A transformation's or predicate's options as Kafka's `ConfigKeyInfo`s."""
    return [
        {
            "name": _field_key(name, info),
            "type": _type_name(info),
            "required": info.is_required(),
            "default_value": None if info.is_required() else _jsonable(info.get_default()),
            "documentation": info.description or "",
            "group": plugin.name,
        }
        for name, info in plugin.cls.config_model.model_fields.items()
    ]


_COMMON = {"name", "connector.class", "tasks.max", "transforms", "predicates"}


def _type_name(info: FieldInfo) -> str:
    annotation = str(info.annotation)
    for token, kafka_type in (("list", "LIST"), ("int", "INT"), ("float", "DOUBLE"), ("bool", "BOOLEAN")):
        if token in annotation:
            return kafka_type
    return "STRING"


def _jsonable(value: Any) -> Any:
    return value if isinstance(value, str | int | float | bool | list | type(None)) else str(value)
