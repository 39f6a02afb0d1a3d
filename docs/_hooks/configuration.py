"""MkDocs hook: the configuration reference pages, from the code.

`reference/configuration.md`: every connector's, transformation's and predicate's keys
(`connect_core.runtime.reference.config_reference`). `reference/settings.md`: the runtime's
`CONNECT_*` environment variables, from the `Settings` model's fields."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

from connect_core.runtime.reference import config_reference
from connect_core.runtime.settings import Settings


def on_files(files: Files, config: Any) -> Files:
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
        default = _shown(field.get_default(call_default_factory=True))
        meaning = field.description.replace("|", "\\|").replace("\n", " ")
        lines.append(f"| `{prefix}{name.upper()}` | {default} | {meaning} |")
    return "\n".join(lines) + "\n"


def _shown(value: Any) -> str:
    """A default as a reader's machine would have it: paths under the working or home directory relative."""
    if value is None or value == "":
        return "unset"
    text = str(value).replace(str(Path.cwd()), ".").replace(str(Path.home()), "~")
    return f"`{text}`"
