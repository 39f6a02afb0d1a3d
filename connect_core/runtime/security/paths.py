"""`file.allowed.paths`: the directories where connectors may read and write local files.

Every config field a plugin types as `LocalPath` (connect_core.sdk) is confined here: at create
(validation, a 400 naming the setting) and again where the task runs, on the resolved task
config, because a `${env:…}` placeholder is only filled there and a symlink may be swapped
after create. A path is judged by what it really names: `~`, `..` and every symlink are
resolved first, so neither a link inside an allowed directory nor `../..` gets out.

The runner hands the task the resolved path, not the one written, so what the task opens is
what was checked (a later swap of the last component is refused by the task's `O_NOFOLLOW`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from connect_core.runtime.security.driver_jars import DriverJars
from connect_core.runtime.security.providers import placeholders
from connect_core.sdk._paths import local_path_fields
from connect_core.sdk.errors import ConfigError

__all__ = ["SETTING", "AllowedPaths"]

SETTING = "file.allowed.paths"
_ENV = "CONNECT_FILE_ALLOWED_PATHS"
_SHOWN_CHARS = 200  # a path echoed in an error is cut here: errors are no place for a 100 KB value


class AllowedPaths:
    """The worker's allowed directories, resolved; judges one path at a time."""

    def __init__(
        self,
        dirs: Iterable[Path | str],
        *,
        runtime_dirs: Iterable[Path | str] = (),
        pools: Mapping[str, Iterable[Path | str]] | None = None,
        driver_dirs: Iterable[Path | str] = (),
    ) -> None:
        self.dirs = tuple(Path(os.path.realpath(d)) for d in dirs)
        #: `DriverJar` fields: jars under these (`jdbc_driver_paths`), never under `dirs`.
        self.jars = DriverJars(driver_dirs, self.dirs)
        #: At create: the directories each pool's worker allows, for the pools that recorded theirs
        #: (`connect airflow up` does): the tasks run there, so a path must be allowed there too.
        self.pools = {name: tuple(Path(os.path.realpath(d)) for d in ds) for name, ds in (pools or {}).items()}
        # The runtime's own state (`Settings.runtime_data_dirs`: the embedded Postgres, the topics, the
        # config provider's secrets, the pools' files …) is never a connector's, even under an allowed
        # directory: with the defaults it is (`.connect/` in the working directory).
        self.runtime_dirs = tuple(Path(os.path.realpath(d)) for d in runtime_dirs)

    @classmethod
    def from_settings(cls, settings: Any) -> AllowedPaths:
        return cls(
            settings.allowed_file_dirs(),
            runtime_dirs=settings.runtime_data_dirs(),
            driver_dirs=DriverJars.from_settings(settings).driver_dirs,
        )

    def where_tasks_run(self, pools: Mapping[str, Iterable[Path | str]]) -> AllowedPaths:
        """These directories, and at create also those of `pools` (pool → its worker's directories)."""
        return AllowedPaths(self.dirs, runtime_dirs=self.runtime_dirs, pools=pools, driver_dirs=self.jars.driver_dirs)

    @classmethod
    def from_env(cls) -> AllowedPaths:
        """This process's setting (`CONNECT_FILE_ALLOWED_PATHS`; unset: the working directory)."""
        from connect_core.runtime.settings import Settings

        return cls.from_settings(Settings())

    def resolve(self, value: str) -> tuple[str | None, str | None]:
        """`(real path, None)` when `value` names a path inside the allowed directories, else `(None, why)`."""
        shown = value if len(value) <= _SHOWN_CHARS else value[:_SHOWN_CHARS] + "…"
        if not value.strip():
            return None, "is empty: name a file"
        if "\x00" in value:
            return None, "contains a NUL byte, which no file name can hold"
        try:
            # os.path (not pathlib): it never raises for `~unknown-user` or a symlink loop.
            real = os.path.realpath(os.path.expanduser(value))
        except (OSError, ValueError) as exc:
            return None, f"`{shown}` cannot be resolved to a file name ({type(exc).__name__})"
        if not os.path.isabs(real):
            return None, f"`{shown}` does not resolve to an absolute file name"
        if not any(Path(real).is_relative_to(d) for d in self.dirs):
            # The resolved target is not echoed: it would tell a caller where a symlink points.
            return None, (
                f"`{shown}` is outside the directories file connectors may use (symlinks and `..` resolved): "
                f"allow its directory in the worker setting `{SETTING}` ({_ENV})"
            )
        if any(Path(real).is_relative_to(d) for d in self.runtime_dirs):
            return None, (
                f"`{shown}` is inside the runtime's own data (the embedded Postgres, the topics, the "
                f"config provider's secrets, the pools' or Airflow's files, the plugins), which file connectors may not use, whatever `{SETTING}` allows"
            )
        return real, None

    def problems(self, model: type[BaseModel], config: Mapping[str, Any]) -> dict[str, list[str]]:
        """At create: the problems of every `LocalPath` value in `config`, by the field's key.
        A value with a config-provider placeholder is judged where the task runs, once filled."""
        errors: dict[str, list[str]] = {}
        for keys in local_path_fields(model):
            for value in _values(config, keys):
                if placeholders({keys[0]: value}):
                    continue
                real, problem = self.resolve(value)
                if real is not None:
                    problem = self._outside_a_pool(value, real)
                if problem:
                    errors.setdefault(keys[0], []).append(problem)
        for key, problems in self.jars.problems(model, config).items():
            errors.setdefault(key, []).extend(problems)
        return errors

    def _outside_a_pool(self, value: str, real: str) -> str | None:
        """Why a path allowed here is not where the tasks run (a pool's worker allows other directories)."""
        refusing = {
            name: dirs
            for name, dirs in sorted(self.pools.items())
            if not any(Path(real).is_relative_to(d) for d in dirs)
        }
        if not refusing:
            return None
        shown = value if len(value) <= _SHOWN_CHARS else value[:_SHOWN_CHARS] + "…"
        where = "; ".join(
            f"pool `{name}` allows {', '.join(map(str, dirs)) or 'none'}" for name, dirs in refusing.items()
        )
        return (
            f"`{shown}` is outside the directories file connectors may use where its tasks run ({where}): "
            f"allow its directory in `{SETTING}` ({_ENV}) where that pool's worker starts (`connect airflow up`)"
        )

    def confine(self, model: type[BaseModel], config: Mapping[str, Any]) -> dict[str, Any]:
        """Where the task runs: a copy of the (resolved) `config` whose `LocalPath` and `DriverJar` values
        are their real paths, so the task opens what was checked; ConfigError when one is not allowed."""
        confined = self.jars.confine(model, config)
        for keys in local_path_fields(model):
            for key in keys:
                value = confined.get(key)
                if isinstance(value, str):
                    confined[key] = self._real_or_raise(key, value)
                elif isinstance(value, list | tuple):
                    confined[key] = [self._real_or_raise(key, v) if isinstance(v, str) else v for v in value]
        return confined

    def _real_or_raise(self, key: str, value: str) -> str:
        real, problem = self.resolve(value)
        if real is None:
            raise ConfigError(f"config `{key}`: {problem}", {key: [str(problem)]})
        return real


def _values(config: Mapping[str, Any], keys: tuple[str, ...]) -> list[str]:
    """The string values written under any of a field's keys (one string, or a list of them)."""
    found: list[str] = []
    for key in keys:
        value = config.get(key)
        if isinstance(value, str):
            found.append(value)
        elif isinstance(value, list | tuple):
            found.extend(v for v in value if isinstance(v, str))
    return found
