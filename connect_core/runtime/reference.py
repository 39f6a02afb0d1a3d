"""The configuration reference, generated from the plugins' config models.

Every key a connector, transformation or predicate takes is a field of its pydantic config model
(`config_model`); this module renders those fields as Markdown, so the documented keys, types,
defaults and aliases are the ones validation applies and cannot drift from them. Plugins are found
as the runtime finds them (`PluginRegistry`: entry points, then the plugin path).
"""

from __future__ import annotations

import enum
import types
import typing
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Literal, get_args, get_origin

import annotated_types
from pydantic import AliasChoices, AliasPath, BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from connect_core.runtime.plugins import TRANSFORM_ALIASES, Plugin, PluginRegistry, TransformPlugin
from connect_core.runtime.security import is_secret_key
from connect_core.runtime.validation import connector_config_model
from connect_core.sdk.config import ConnectorConfig, SinkConnectorConfig, SourceConnectorConfig
from connect_core.sdk.transforms import PredicateConfig, TransformConfig

__all__ = ["ConfigKey", "builtin_plugin_failures", "config_keys", "config_reference", "field_keys"]

#: The base models whose keys are documented once, in their own section, and not again per plugin.
_BASES: tuple[tuple[type[BaseModel], str, str], ...] = (
    (ConnectorConfig, "Every connector", "Keys every connector takes, source or sink."),
    (SourceConnectorConfig, "Every source connector", "Keys every source connector takes, besides the above."),
    (SinkConnectorConfig, "Every sink connector", "Keys every sink connector takes, besides the above."),
)


@dataclass(frozen=True)
class ConfigKey:
    """One config key as the reference shows it."""

    key: str
    type: str
    default: str
    aliases: tuple[str, ...]
    description: str
    secret: bool


def field_keys(name: str, info: FieldInfo) -> tuple[str, ...]:
    """Every spelling of the config key a field is read from: the first is the one documented (and
    the one validation errors name), the others its aliases (RocketMQ's, Kafka's, Debezium's)."""
    keys: list[str] = []
    alias = info.validation_alias
    if isinstance(alias, str):
        keys.append(alias)
    elif isinstance(alias, AliasChoices):
        keys += [choice for choice in alias.choices if isinstance(choice, str)]
    elif isinstance(alias, AliasPath):
        keys.append(".".join(str(part) for part in alias.path))
    if info.alias and info.alias not in keys:
        keys.append(info.alias)
    if not keys:
        # populate_by_name also accepts a field's Python name (`tasks_max`); it is documented only when
        # it is the field's one spelling, as it is not a key users write otherwise
        keys.append(name)
    return tuple(keys)


def config_keys(model: type[BaseModel], *, skip: type[BaseModel] | None = None) -> list[ConfigKey]:
    """The keys of `model`, in declaration order; without those `skip` (a base model) declares the
    same way (a subclass that changes a base field's default or description keeps it)."""
    inherited = {name: _signature(info) for name, info in skip.model_fields.items()} if skip else {}
    found = []
    for name, info in model.model_fields.items():
        if inherited.get(name) == _signature(info):
            continue
        keys = field_keys(name, info)
        extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
        secret = bool(extra.get("secret")) or any(is_secret_key(k) for k in keys)
        default = _default(info)
        found.append(
            ConfigKey(
                key=keys[0],
                type=_type(info),
                # a secret's default is a secret too (a plugin's built-in key): masked, as in any config shown
                default="`****`" if secret and default and default != "*required*" else default,
                aliases=keys[1:],
                description=" ".join((info.description or "").split()),
                secret=secret,
            )
        )
    return found


def builtin_plugin_failures() -> list[str]:
    """Why each built-in plugin (an entry point of this distribution, `connect-core`) that does not
    load fails to: the registry logs such a plugin and goes on without it, so a reference built
    without it would silently drop its keys. Empty when every one loads."""
    from importlib.metadata import distribution

    failures = []
    for ep in distribution("connect-core").entry_points:
        if not ep.group.startswith("connect_core."):
            continue
        try:
            ep.load()
        except Exception as exc:  # whatever it is, the build must say it
            failures.append(f"`{ep.name}` ({ep.group} = {ep.value}): {type(exc).__name__}: {exc}")
    return failures


def config_reference(registry: PluginRegistry | None = None) -> str:
    """The Markdown reference of every installed plugin's config keys (`registry`: by default the
    plugins of entry points and `CONNECT_PLUGIN_PATH`, as the runtime finds them)."""
    registry = registry or PluginRegistry()
    out = [
        "# Configuration reference",
        "",
        "Generated from the config models of the installed plugins: every key below is validated when a "
        "connector is created or updated, and an invalid value is a 400 naming the key. *Aliases* are the "
        "other spellings accepted for the same key (RocketMQ Connect's, Kafka Connect's, Debezium's); "
        "*secret* keys are masked wherever a config is shown or logged.",
        "",
    ]
    for model, title, intro in _BASES:
        skip = ConnectorConfig if model is not ConnectorConfig else None
        out += [f"## {title}", "", intro, "", *_table(config_keys(model, skip=skip)), ""]
    out += ["## Connectors", ""]
    for plugin in sorted(registry.plugins().values(), key=lambda p: p.name):
        out += _connector_section(plugin)
    out += [
        "## Transformations",
        "",
        "Options of a transformation `<alias>` are written `transforms.<alias>.<option>`; `transforms.<alias>.type` "
        "names the transformation, and `transforms.<alias>.predicate` / `.negate` a predicate.",
        "",
    ]
    for section in _transform_sections(registry.transforms().values(), TransformConfig):
        out += section
    out += [
        "## Predicates",
        "",
        "Options of a predicate `<alias>` are written `predicates.<alias>.<option>`; `predicates.<alias>.type` "
        "names the predicate.",
        "",
    ]
    for section in _transform_sections(registry.predicates().values(), PredicateConfig):
        out += section
    return "\n".join(out).rstrip() + "\n"


def connector_base(model: type[ConnectorConfig]) -> type[ConnectorConfig]:
    """The base section a connector's model inherits its common keys from."""
    for base in (SinkConnectorConfig, SourceConnectorConfig):
        if issubclass(model, base):
            return base
    return ConnectorConfig


def _connector_section(plugin: Plugin) -> list[str]:
    model = connector_config_model(plugin.cls)  # the model validation uses: the common keys included
    base = connector_base(model)
    lines = [f"### {plugin.name}", ""]
    lines += _about(plugin.type, plugin.class_path, plugin.aliases, plugin.cls.__doc__ or "")
    lines += [f"Takes the keys of *{_BASES[0][1]}* and of *{_base_title(base)}*, and these:", ""]
    keys = config_keys(model, skip=base) + _pattern_keys(model)
    lines += [*_table(keys), ""] if keys else ["No keys of its own.", ""]
    return lines


def _pattern_keys(model: type[ConnectorConfig]) -> list[ConfigKey]:
    """Keys whose names carry a value (Debezium's `column.mask.with.<n>.chars`), which a model reads
    from its extra keys and declares by pattern (`pattern_keys`)."""
    declared: tuple[tuple[str, str], ...] = getattr(model, "pattern_keys", ())
    return [ConfigKey(pattern, "list", "", (), text, False) for pattern, text in declared]


def _transform_sections(plugins: Iterable[TransformPlugin], base: type[BaseModel]) -> Iterator[list[str]]:
    """One section per transformation, its `$Key` / `$Value` variants together when they take the
    same options (Kafka documents them as one transformation)."""
    groups: dict[tuple[str, type[BaseModel]], list[TransformPlugin]] = {}
    for plugin in sorted(plugins, key=lambda p: p.name):
        stem = plugin.name.split("$", 1)[0]
        groups.setdefault((stem, plugin.cls.config_model), []).append(plugin)
    stems = [stem for stem, _ in groups]
    for (stem, model), members in groups.items():
        title = stem if stems.count(stem) == 1 else " / ".join(p.name for p in members)
        lines = [f"### {title}", ""]
        if len(members) > 1 or members[0].name != stem:
            # Kafka's `$Key` / `$Value`: one transformation applied to the record's key or its value
            variants = ", ".join(f"`{p.name}` (`{p.class_path}`)" for p in members)
            lines += [f"Variants: {variants}.", ""]
        aliases = [alias for p in members for alias in [*p.aliases, *_other_names(p.name)]]
        doc = members[0].cls.doc or members[0].cls.__doc__ or ""
        class_path = members[0].class_path if len(members) == 1 else ""
        lines += _about(members[0].type, class_path, aliases, doc)
        keys = config_keys(model, skip=base)
        lines += [*_table(keys), ""] if keys else ["No options.", ""]
        yield lines


def _other_names(name: str) -> list[str]:
    """Class names of other projects that name the transformation `name` (Debezium's)."""
    return sorted(alias for alias, target in TRANSFORM_ALIASES.items() if target == name)


def _about(kind: str, class_path: str, aliases: list[str], doc: str) -> list[str]:
    lines = [f"{kind.capitalize()} `{class_path}`." if class_path else f"{kind.capitalize()}."]
    if aliases:
        lines.append("Also named: " + ", ".join(f"`{alias}`" for alias in aliases) + ".")
    summary = " ".join(doc.strip().split("\n\n", 1)[0].split())
    if summary:
        lines.append(summary)
    return [" ".join(lines), ""]


def _base_title(base: type[BaseModel]) -> str:
    return next(title for model, title, _ in _BASES if model is base)


def _table(keys: list[ConfigKey]) -> list[str]:
    rows = [
        "| Key | Type | Default | Aliases | Secret | Description |",
        "|---|---|---|---|---|---|",
    ]
    for k in keys:
        aliases = ", ".join(f"`{alias}`" for alias in k.aliases)
        cells = [f"`{k.key}`", k.type, k.default, aliases, "yes" if k.secret else "", k.description]
        rows.append("| " + " | ".join(_cell(cell) for cell in cells) + " |")
    return rows


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _signature(info: FieldInfo) -> tuple[Any, ...]:
    return (
        repr(info.annotation),
        repr(info.get_default(call_default_factory=True)) if not info.is_required() else "required",
        info.alias,
        repr(info.validation_alias),
        info.description,
        repr(info.metadata),
    )


def _default(info: FieldInfo) -> str:
    if info.is_required():
        return "*required*"
    value = info.get_default(call_default_factory=True)
    if value is None or value is PydanticUndefined:
        return ""
    if isinstance(value, list | tuple):
        return ", ".join(f"`{v}`" for v in value) if value else "*empty list*"
    if isinstance(value, dict) and not value:
        return "*empty*"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, enum.Enum):
        value = value.value
    return f"`{value}`" if str(value) != "" else "*empty*"


def _type(info: FieldInfo) -> str:
    """The field's type, with its bounds (`int (>= 1, <= 1024)`)."""
    bounds = []
    for item in info.metadata:
        for cls, attribute, sign in _BOUNDS:
            if isinstance(item, cls):
                bounds.append(f"{sign} {getattr(item, attribute)}")
    text = _type_name(info.annotation)
    return f"{text} ({', '.join(bounds)})" if bounds else text


_BOUNDS = (
    (annotated_types.Ge, "ge", ">="),
    (annotated_types.Gt, "gt", ">"),
    (annotated_types.Le, "le", "<="),
    (annotated_types.Lt, "lt", "<"),
    (annotated_types.MinLen, "min_length", "length >="),
    (annotated_types.MaxLen, "max_length", "length <="),
)


def _type_name(annotation: Any) -> str:
    origin = get_origin(annotation)
    args = [a for a in get_args(annotation) if a is not type(None)]
    if origin is typing.Annotated:
        return _type_name(get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        return " or ".join(dict.fromkeys(_type_name(a) for a in args))
    if origin is Literal:
        return "one of " + ", ".join(f"`{a}`" for a in get_args(annotation))
    if origin in (list, tuple, set, frozenset):
        return f"list of {_type_name(args[0])}" if args else "list"
    if origin is dict:
        return "map"
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return "one of " + ", ".join(f"`{m.value}`" for m in annotation)
    names = {bool: "boolean", int: "int", float: "double", str: "string"}
    if isinstance(annotation, type):
        return names.get(annotation, annotation.__name__)
    return str(annotation)
