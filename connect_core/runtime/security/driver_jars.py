"""`connection.jar`: a JDBC driver jar the operator put on the machine, never one a user could write.

A jar on `spark.jars` is code the Spark driver and executors load, so the path a config names is
judged by what it really names (`~`, `..` and every symlink resolved) and must be a regular `.jar`
file under the worker setting `jdbc_driver_paths` (CONNECT_JDBC_DRIVER_PATHS; default Debian's
/usr/share/java). It must also be outside every directory file connectors may write
(`file.allowed.paths`), even one `jdbc_driver_paths` lists too: a file sink could plant a jar there,
so an operator's overlap of the two settings never reopens the hole.

One path, in a narrow alphabet: Spark splits `spark.jars` on `,` and a classpath on `:`, and reads a
path as a URI (`#`, `%`), so nothing a user writes can become a second path. No `${provider:…}`
placeholder either: the jar reaches spark-submit from the stored config, which no provider fills.

A connector marks such a field `DriverJar` (connect_core.sdk). It is checked at create (validation,
through `AllowedPaths`) and again where the jar reaches Spark (`Runtime.spark_conf_for`, in the
worker right before spark-submit), which hands the plugin's `spark_conf` the real path that was checked.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from connect_core.sdk._paths import driver_jar_fields
from connect_core.sdk.errors import ConfigError

__all__ = ["SETTING", "DriverJars"]

SETTING = "jdbc_driver_paths"
_ENV = "CONNECT_JDBC_DRIVER_PATHS"
_FILE_SETTING = "file.allowed.paths"
#: What a driver jar's path may hold, written and resolved: an allow-list with no list separator
#: (`,` `:` `;`), blank, URI syntax (`#` `%` `?`) or placeholder (`$` `{`). Bounded: no backtracking.
_PATH_CHARS = re.compile(r"[A-Za-z0-9._+@/~-]{1,1024}")
_SHOWN_CHARS = 200  # a value echoed in an error is cut here


class DriverJars:
    """The directories driver jars may come from and those connectors may write, resolved; judges a path."""

    def __init__(self, driver_dirs: Iterable[Path | str], writable_dirs: Iterable[Path | str]) -> None:
        self.driver_dirs = tuple(Path(os.path.realpath(os.path.expanduser(d))) for d in driver_dirs)
        self.writable_dirs = tuple(Path(os.path.realpath(d)) for d in writable_dirs)

    @classmethod
    def from_settings(cls, settings: Any) -> DriverJars:
        dirs = [d.strip() for d in str(settings.jdbc_driver_paths).split(",") if d.strip()]
        return cls(dirs, settings.allowed_file_dirs())

    def resolve(self, value: str) -> tuple[str | None, str | None]:
        """`(real path, None)` when `value` names an allowed driver jar, else `(None, why)`."""
        shown = value if len(value) <= _SHOWN_CHARS else value[:_SHOWN_CHARS] + "…"
        if not _PATH_CHARS.fullmatch(value):
            return None, (
                f"`{shown}` is not one plain path of a .jar file: letters, digits and `._+@/~-` only, at most "
                "1024 (no list of jars, URL, blank or `${…}` placeholder)"
            )
        real = os.path.realpath(os.path.expanduser(value))  # os.path: never raises for a loop or `~nobody`
        if not os.path.isabs(real) or not _PATH_CHARS.fullmatch(real):
            return None, f"`{shown}` does not resolve to a plain absolute file name"
        # Where before what: a path outside the allowed directories gets the same answer whether or
        # not it exists, and the resolved target is not echoed (it would tell where a symlink points).
        if any(Path(real).is_relative_to(d) for d in self.writable_dirs):
            return None, (
                f"`{shown}` is inside a directory file connectors may write (`{_FILE_SETTING}`; symlinks and "
                f"`..` resolved), so a connector could have put it there: keep driver jars out of `{_FILE_SETTING}` "
                f"and in a directory of the worker setting `{SETTING}` ({_ENV})"
            )
        if not any(Path(real).is_relative_to(d) for d in self.driver_dirs):
            return None, (
                f"`{shown}` is outside the directories driver jars may come from (symlinks and `..` resolved): "
                f"put the jar in, or allow its directory with, the worker setting `{SETTING}` ({_ENV})"
            )
        if not real.endswith(".jar"):
            return None, f"`{shown}` does not name a .jar file (symlinks resolved)"
        try:
            regular = stat.S_ISREG(os.stat(real).st_mode)
        except OSError:
            regular = False
        if not regular:
            return None, f"`{shown}` is not a regular file on this worker"
        return real, None

    def problems(self, model: type[BaseModel], config: Mapping[str, Any]) -> dict[str, list[str]]:
        """At create: the problems of every `DriverJar` value in `config`, by the field's key."""
        errors: dict[str, list[str]] = {}
        for keys in driver_jar_fields(model):
            for key in keys:
                value = config.get(key)
                if isinstance(value, str):
                    _real, problem = self.resolve(value)
                    if problem:
                        errors.setdefault(keys[0], []).append(problem)
        return errors

    def confine(self, model: type[BaseModel], config: Mapping[str, Any]) -> dict[str, Any]:
        """Where the jar reaches Spark: a copy of `config` whose `DriverJar` values are their real paths,
        checked again; ConfigError when one is refused."""
        confined = dict(config)
        for keys in driver_jar_fields(model):
            for key in keys:
                value = confined.get(key)
                if isinstance(value, str):
                    real, problem = self.resolve(value)
                    if real is None:
                        raise ConfigError(f"config `{key}`: {problem}", {key: [str(problem)]})
                    confined[key] = real
        return confined
