"""Kafka-style config providers: `${env:VAR}` and `${file:/path:key}`, resolved where a task runs.

Configs are stored and shown with the placeholders, so a secret never enters the
metadata store, the API or the DAG; the runner (and the pre-check) resolve them
in the process that uses them. `${file:path:key}` reads `key` from a Java-style
properties file (`key=value` lines), as Kafka's FileConfigProvider does;
`${file:path}` is the whole file, stripped.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from connect_core.sdk.errors import ConfigError

__all__ = ["resolve"]

_PLACEHOLDER = re.compile(r"\$\{(env|file):([^}]*)\}")


def resolve(config: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of `config` with every `${env:…}` / `${file:…}` placeholder replaced."""
    return {key: _resolve_value(key, value) for key, value in config.items()}


def _resolve_value(key: str, value: Any) -> Any:
    if isinstance(value, str):
        return _PLACEHOLDER.sub(lambda m: _lookup(key, m.group(1), m.group(2)), value)
    if isinstance(value, Mapping):
        return resolve(value)
    if isinstance(value, list):
        return [_resolve_value(key, v) for v in value]
    return value


def _lookup(key: str, provider: str, argument: str) -> str:
    if provider == "env":
        if argument not in os.environ:
            raise ConfigError(f"config `{key}` refers to `${{env:{argument}}}`, but `{argument}` is not set here")
        return os.environ[argument]
    path, _, prop = argument.rpartition(":") if _has_key(argument) else (argument, "", "")
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise ConfigError(f"config `{key}` refers to file `{path}`, which cannot be read: {exc}") from exc
    if not prop:
        return text.strip()
    for line in text.splitlines():
        name, sep, val = line.partition("=")
        if sep and name.strip() == prop and not name.lstrip().startswith(("#", "!")):
            return val.strip()
    raise ConfigError(f"config `{key}` refers to `{prop}` in `{path}`, which has no such key")


def _has_key(argument: str) -> bool:
    """`/path/f.properties:key` has a key; a bare path (even `C:/…`-free POSIX) does not."""
    head, sep, tail = argument.rpartition(":")
    return bool(sep and head and tail and "/" not in tail)
