"""`LocalPath`: the type of a config field that names a file or directory on the worker's disk.

A connector declares such a field as `filename: LocalPath = Field(...)` (also `LocalPath | None`
or `list[LocalPath]`). The runtime then confines every value of it to the worker's allowed
directories (`file.allowed.paths`), at create and again where the task runs, so a connector
author never writes that check and a user can never point a connector at `/etc/shadow`.

This module only marks fields; the check lives in the runtime, which knows the worker's settings.
"""

from __future__ import annotations

import typing
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo

__all__ = ["DriverJar", "LocalPath", "driver_jar_fields", "local_path_fields"]


@dataclass(frozen=True)
class _Marker:
    """Metadata pydantic ignores and the runtime looks for."""

    kind: str


_MARKER = _Marker("local path")
_JAR = _Marker("driver jar")

LocalPath = Annotated[str, _MARKER]
#: A JDBC driver jar (code Spark loads): one `.jar` under the worker's `jdbc_driver_paths`, never
#: where file connectors may write; the runtime checks it at create and again right before Spark.
DriverJar = Annotated[str, _JAR]


def _mentions_marker(annotation: Any, marker: _Marker = _MARKER) -> bool:
    """Whether `annotation` is, or contains (`X | None`, `list[X]`), one marked `marker`."""
    stack = [annotation]
    while stack:
        tp = stack.pop()
        if typing.get_origin(tp) is Annotated and marker in tp.__metadata__:
            return True
        stack.extend(typing.get_args(tp))
    return False


def _keys(name: str, info: FieldInfo) -> tuple[str, ...]:
    """Every key the field may be written as, the one errors are reported under first."""
    keys: list[str] = []
    alias = info.validation_alias
    if isinstance(alias, str):
        keys.append(alias)
    elif alias is not None and hasattr(alias, "choices"):
        keys.extend(c for c in alias.choices if isinstance(c, str))
    keys.extend(k for k in (info.alias, name) if k and k not in keys)
    return tuple(keys)


def local_path_fields(model: type[BaseModel]) -> list[tuple[str, ...]]:
    """The keys of each `LocalPath` field of a config model (first: the key errors name)."""
    return _marked(model, _MARKER)


def driver_jar_fields(model: type[BaseModel]) -> list[tuple[str, ...]]:
    """The keys of each `DriverJar` field of a config model (first: the key errors name)."""
    return _marked(model, _JAR)


def _marked(model: type[BaseModel], marker: _Marker) -> list[tuple[str, ...]]:
    return [
        _keys(name, info)
        for name, info in model.model_fields.items()
        if marker in info.metadata or _mentions_marker(info.annotation, marker)
    ]
