"""A connector's `transforms` and `predicates`, configured with exactly Kafka Connect's keys:

    transforms=route,drop
    transforms.route.type=org.apache.kafka.connect.transforms.RegexRouter
    transforms.route.regex=(.*)_raw
    transforms.route.replacement=$1
    transforms.drop.type=Filter
    transforms.drop.predicate=isTest
    transforms.drop.negate=false
    predicates=isTest
    predicates.isTest.type=org.apache.kafka.connect.transforms.predicates.TopicNameMatches
    predicates.isTest.pattern=test-.*

`problems` reports every bad key at once (for the 400 of a create); `build_chain` makes the
`TransformChain` a run applies, raising ConfigError with the same messages.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from connect_core.runtime.plugins import PluginRegistry, TransformPlugin
from connect_core.runtime.processing.chain import Step, TransformChain
from connect_core.runtime.processing.deadletter import ErrorSettings
from connect_core.sdk.config import split_list
from connect_core.sdk.errors import ConfigError

__all__ = ["build_chain", "problems"]

_RESERVED = ("type", "predicate", "negate")


def _aliases(config: Mapping[str, Any], key: str, errors: dict[str, list[str]]) -> list[str]:
    raw = config.get(key)
    if raw is None or raw == "":
        return []
    listed = split_list(raw)
    if not isinstance(listed, list) or not all(isinstance(a, str) for a in listed):
        errors.setdefault(key, []).append(f"`{key}` must be a list of aliases or a comma-separated string")
        return []
    seen: set[str] = set()
    for alias in listed:
        if alias in seen:
            errors.setdefault(key, []).append(f"alias `{alias}` is listed twice")
        seen.add(alias)
    return list(dict.fromkeys(listed))


def _options_by_alias(config: Mapping[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    """`kind.<alias>.<option>` keys of `config`, by alias, without the prefix (the reserved ones
    excluded): one pass over the config for every alias, not one per alias (8,000 transforms would
    otherwise cost 8,000 passes over 24,000 keys)."""
    found: dict[str, dict[str, Any]] = {}
    start = len(kind) + 1
    for key, value in config.items():
        if not isinstance(key, str) or not key.startswith(kind) or key[len(kind) : start] != ".":
            continue
        # An alias may hold dots (`transforms=a.b`): every split of the rest into alias and option
        # is a candidate, as a prefix scan per alias would find it.
        rest = key[start:]
        dot = rest.find(".")
        while dot >= 0:
            option = rest[dot + 1 :]
            if option not in _RESERVED:
                found.setdefault(rest[:dot], {})[option] = value
            dot = rest.find(".", dot + 1)
    return found


def _instance(
    config: Mapping[str, Any],
    registry: PluginRegistry,
    prefix: str,
    alias: str,
    options: Mapping[str, Any],
    errors: dict[str, list[str]],
    *,
    predicate: bool,
) -> Any:
    """The configured transform or predicate `prefix.alias`, or None (its problems in `errors`)."""
    type_key = f"{prefix}.{alias}.type"
    type_name = config.get(type_key)
    if not type_name:
        errors.setdefault(type_key, []).append(
            f"Missing required configuration `{type_key}` which has no default value."
        )
        return None
    try:
        plugin: TransformPlugin = registry.resolve_transform(type_name, predicate=predicate)
    except ConfigError as exc:
        errors.setdefault(type_key, []).append(str(exc))
        return None
    try:
        model = plugin.cls.config_model.model_validate(options)
    except ValidationError as exc:
        for err in exc.errors():
            option = str(err["loc"][0]) if err["loc"] else "type"
            key = f"{prefix}.{alias}.{_option_key(plugin, option)}"
            message = (
                f"Missing required configuration `{key}` which has no default value."
                if err["type"] == "missing"
                else f"{err['msg']}"
            )
            errors.setdefault(key, []).append(message)
        return None
    try:
        return plugin.cls(model)
    except (ConfigError, ValueError) as exc:
        errors.setdefault(type_key, []).append(str(exc))
        return None


def _option_key(plugin: TransformPlugin, field: str) -> str:
    info = plugin.cls.config_model.model_fields.get(field)
    return info.alias if info is not None and info.alias else field


def _steps(config: Mapping[str, Any], registry: PluginRegistry) -> tuple[list[Step], dict[str, list[str]]]:
    errors: dict[str, list[str]] = {}
    predicates: dict[str, Any] = {}
    declared = _aliases(config, "predicates", errors)
    declared_set = set(declared)
    predicate_options = _options_by_alias(config, "predicates")
    for alias in declared:
        found = _instance(
            config, registry, "predicates", alias, predicate_options.get(alias, {}), errors, predicate=True
        )
        if found is not None:
            predicates[alias] = found
    steps: list[Step] = []
    transform_options = _options_by_alias(config, "transforms")
    for alias in _aliases(config, "transforms", errors):
        transform = _instance(
            config, registry, "transforms", alias, transform_options.get(alias, {}), errors, predicate=False
        )
        predicate_key, negate_key = f"transforms.{alias}.predicate", f"transforms.{alias}.negate"
        predicate_alias = config.get(predicate_key)
        negate = config.get(negate_key, False)
        if isinstance(negate, str) and negate.strip().lower() in ("true", "false"):
            negate = negate.strip().lower() == "true"
        if not isinstance(negate, bool):
            errors.setdefault(negate_key, []).append("must be `true` or `false`")
            negate = False
        predicate = None
        if predicate_alias:
            if predicate_alias not in declared_set:
                errors.setdefault(predicate_key, []).append(
                    f"predicate `{predicate_alias}` is not declared in `predicates`"
                )
            predicate = predicates.get(predicate_alias)
        elif negate:
            errors.setdefault(negate_key, []).append("`negate` needs a `predicate`")
        if transform is not None and predicate_alias and transform.whole_batch:
            errors.setdefault(predicate_key, []).append(
                f"transform `{alias}` is a query over the whole batch and takes no predicate"
            )
        if transform is not None:
            steps.append(Step(alias, transform, predicate, bool(negate)))
    for key in config:
        if key.startswith("predicates.") and key.count(".") >= 2 and key.split(".")[1] not in declared_set:
            errors.setdefault(key, []).append(f"predicate `{key.split('.')[1]}` is not listed in `predicates`")
    return steps, errors


def problems(config: Mapping[str, Any], registry: PluginRegistry) -> dict[str, list[str]]:
    """Every problem of the config's transforms and predicates, by config key."""
    return _steps(config, registry)[1]


def build_chain(config: Mapping[str, Any], registry: PluginRegistry) -> TransformChain:
    """The connector's transform chain (empty without `transforms`); ConfigError on a bad config.
    Under `errors.tolerance=all` it marks the records it cannot convert instead of failing."""
    steps, errors = _steps(config, registry)
    if errors:
        lines = [f"{key}: {problem}" for key, found in sorted(errors.items()) for problem in found]
        raise ConfigError("invalid transforms:\n" + "\n".join(lines), errors)
    return TransformChain(steps, tolerate=ErrorSettings(config).tolerate)
