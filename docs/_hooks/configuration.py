"""MkDocs hook: the configuration reference pages, from the code.

`reference/configuration.md`: every connector's, transformation's and predicate's keys
(`connect_core.runtime.reference.config_reference`). `reference/settings.md`: the runtime's
`CONNECT_*` environment variables, from the `Settings` model's fields."""

from __future__ import annotations

from typing import Any

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files

from connect_core.runtime.reference import builtin_plugin_failures, config_reference
from connect_core.runtime.settings import Settings


def on_files(files: Files, config: Any) -> Files:
    failures = builtin_plugin_failures()
    if failures:  # the registry would skip them, and the reference silently lose their keys
        raise PluginError("built-in plugins that do not load: " + "; ".join(failures))
    files.append(File.generated(config, "reference/configuration.md", content=config_reference()))
    files.append(File.generated(config, "reference/settings.md", content=settings_markdown()))
    return files


def settings_markdown() -> str:
    prefix = str(Settings.model_config.get("env_prefix", ""))
    lines = [
        "# Runtime settings",
        "",
        "Generated from `connect_core.runtime.settings.Settings`. Every setting is an environment",
        f"variable (prefix `{prefix}`); every one has a working default. Every Airflow process, `connect`",
        "command and REST server of one deployment must see the same values.",
        "",
        "| variable | default | meaning |",
        "|---|---|---|",
    ]
    for name, field in Settings.model_fields.items():
        if not field.description:
            continue  # internal: set by the runtime itself
        meaning = field.description.replace("|", "\\|").replace("\n", " ")
        lines.append(f"| `{prefix}{name.upper()}` | {_default(name)} | {meaning} |")
    return "\n".join(lines) + "\n"


def _default(name: str) -> str:
    """A setting's default as its definition says it, never as this builder's environment makes it:
    a computed default (`default_factory`: the working directory, `$XDG_CACHE_HOME` …) is shown by the
    field's `shown_default`; a secret's default is masked."""
    field = Settings.model_fields[name]
    extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
    if "shown_default" in extra:
        return str(extra["shown_default"])
    if field.default_factory is not None:
        raise PluginError(f"Settings.{name} computes its default: give its Field a `shown_default` (json_schema_extra)")
    value = field.default
    if value is None or value == "":
        return "unset"
    if "Secret" in str(field.annotation):
        return "`****`"
    return f"`{value}`"
