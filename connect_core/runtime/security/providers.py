"""Kafka-style config providers: `${env:VAR}`, `${file:/path:key}` and `${airflow:conn_id:field}`,
opt-in, resolved where a task runs.

`airflow` reads an Airflow connection (Airflow's own lookup: its secrets backends, `AIRFLOW_CONN_*`
variables, its metadata database from a task): `host`, `port`, `login`, `password`, `schema`,
`extra.<key>`, or `jdbc_url` (`jdbc:postgresql://host:port/schema`, `jdbc:mariadb://…` for a mysql
connection), so a connector takes its settings and secrets from where the platform keeps them.

As in Kafka Connect, no provider is on unless the worker names it (`CONNECT_CONFIG_PROVIDERS=env,file`,
Kafka's `config.providers`). The `file` provider reads only under its allowed directories
(`CONNECT_CONFIG_PROVIDERS_FILE_ALLOWED_PATHS`, Kafka's KIP-993 `allowed.paths`); the `env` provider
only variables its allow-list pattern admits (never the runtime's own `CONNECT_*` by default).

Configs are stored and shown with the placeholders, so a secret never enters the metadata store,
the API or the DAG. The runner and the pre-check resolve them in the process that uses them, and
every resolved value is handed to the process's secret masker first: it never reaches a log line,
a trace or a status, even when a connector echoes it in an error.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from connect_core.runtime.security.masking import SecretMasker, masker
from connect_core.sdk.config import ProvidedValue
from connect_core.sdk.errors import ConfigError

__all__ = ["PROVIDERS", "ConfigProviders", "placeholders"]

PROVIDERS = ("env", "file", "airflow")
#: What `${airflow:conn_id:field}` may read of a connection.
AIRFLOW_FIELDS = ("host", "port", "login", "password", "schema", "jdbc_url")
_CONN_ID = re.compile(r"[A-Za-z0-9_.-]{1,250}")
# `${name:argument}`: a name of word characters, an argument without `}`; linear (no nesting).
_PLACEHOLDER = re.compile(r"\$\{([A-Za-z0-9_.-]+):([^}]*)\}")


def placeholders(config: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """Every `(key, provider, argument)` placeholder in `config` (nested maps and lists too)."""
    found: list[tuple[str, str, str]] = []
    stack: list[tuple[str, Any]] = list(config.items())
    while stack:
        key, value = stack.pop()
        if isinstance(value, str) and "${" in value:
            found.extend((str(key), m.group(1), m.group(2)) for m in _PLACEHOLDER.finditer(value))
        elif isinstance(value, Mapping):
            stack.extend((str(key), v) for v in value.values())
        elif isinstance(value, list):
            stack.extend((str(key), v) for v in value)
    return found


class ConfigProviders:
    """The providers a worker enabled, with their limits."""

    def __init__(
        self,
        enabled: frozenset[str] | set[str] = frozenset(),
        *,
        file_allowed_paths: list[Path] | None = None,
        env_allowlist: str = r"^(?!CONNECT_).*",
        secret_masker: SecretMasker | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.enabled = frozenset(enabled)
        self._file_dirs = [p.resolve() for p in (file_allowed_paths or [])]
        self._env_allowlist = re.compile(env_allowlist)
        self._masker = secret_masker or masker
        self._environ = environ

    @classmethod
    def from_settings(cls, settings: Any) -> ConfigProviders:
        return cls(
            settings.enabled_providers(),
            file_allowed_paths=settings.provider_file_dirs(),
            env_allowlist=settings.config_providers_env_allowlist_pattern,
        )

    # -- at create: what the placeholders may refer to -----------------------

    def problems(self, config: Mapping[str, Any]) -> dict[str, list[str]]:
        """Placeholder problems by key, without resolving anything (no value is read here)."""
        errors: dict[str, list[str]] = {}
        keyed = _key_material(config)
        for key, provider, argument in placeholders(config):
            problem = _key_problem(key, keyed) or self._problem(provider, argument)
            if problem:
                errors.setdefault(key, []).append(problem)
        return errors

    def _problem(self, provider: str, argument: str) -> str | None:
        if provider not in PROVIDERS:
            return f"unknown config provider `{provider}` (known: {', '.join(PROVIDERS)})"
        if provider not in self.enabled:
            return (
                f"config provider `{provider}` is not enabled on this worker: "
                f"add it to CONNECT_CONFIG_PROVIDERS (Kafka's `config.providers`)"
            )
        if provider == "env" and not self._env_allowlist.match(argument):
            return f"environment variable `{argument}` is not allowed by CONNECT_CONFIG_PROVIDERS_ENV_ALLOWLIST_PATTERN"
        if provider == "airflow":
            conn_id, _, field = argument.partition(":")
            if not _CONN_ID.fullmatch(conn_id) or not (field in AIRFLOW_FIELDS or field.startswith("extra.")):
                return (
                    f"`${{airflow:{argument}}}` must be `${{airflow:CONN_ID:FIELD}}`, FIELD one of "
                    f"{', '.join(AIRFLOW_FIELDS)} or extra.<key>"
                )
        if provider == "file":
            path, _prop = _split_file_argument(argument)
            if not self._allowed_file(path):
                return (
                    f"file `{path}` is outside the file provider's allowed paths: "
                    "set CONNECT_CONFIG_PROVIDERS_FILE_ALLOWED_PATHS (Kafka's `allowed.paths`)"
                )
        return None

    def _allowed_file(self, path: str) -> bool:
        if not path or "\x00" in path or not os.path.isabs(path):
            return False
        real = Path(path).resolve()
        return any(real.is_relative_to(d) for d in self._file_dirs)

    # -- where the task runs ---------------------------------------------------

    def resolve(self, config: Mapping[str, Any]) -> dict[str, Any]:
        """A copy of `config` with every placeholder replaced. Each resolved value, and every value of a
        secret-looking key, becomes a known secret of this process: masked wherever it shows up later."""
        keyed = _key_material(config)
        resolved = {key: self._resolve_value(str(key), value, keyed) for key, value in config.items()}
        self._masker.add_config(resolved)
        return resolved

    def _resolve_value(self, key: str, value: Any, keyed: frozenset[str]) -> Any:
        if isinstance(value, str) and "${" in value:
            resolved = _PLACEHOLDER.sub(lambda m: self._lookup(key, m.group(1), m.group(2), keyed), value)
            # The whole value too (`jdbc:…?password=${env:PW}` resolved): a driver that echoes its
            # URL in an error may change it (case, escapes) so that the parts no longer stand alone.
            if resolved != value:
                self._masker.add(resolved)
                if key in keyed:  # a transform's key: not checked in its resolved form (`ProvidedValue`)
                    return ProvidedValue(resolved)
            return resolved
        if isinstance(value, Mapping):
            return self.resolve(value)
        if isinstance(value, list):
            return [self._resolve_value(key, v, keyed) for v in value]
        return value

    def _lookup(self, key: str, provider: str, argument: str, keyed: frozenset[str]) -> str:
        problem = _key_problem(key, keyed) or self._problem(provider, argument)
        if problem:
            raise ConfigError(f"config `{key}`: {problem}", {key: [problem]})
        if provider == "env":
            value = self._env(key, argument)
        elif provider == "airflow":
            value = _airflow(key, argument)
        else:
            value = self._file(key, argument)
        self._masker.add(value)
        return value

    def _env(self, key: str, name: str) -> str:
        environ = os.environ if self._environ is None else self._environ
        if name not in environ:
            raise ConfigError(f"config `{key}` refers to `${{env:{name}}}`, but `{name}` is not set here")
        return environ[name]

    def _file(self, key: str, argument: str) -> str:
        path, prop = _split_file_argument(argument)
        try:
            text = Path(path).read_text()
        except (OSError, UnicodeDecodeError) as exc:
            # The error names the file, never its content.
            raise ConfigError(
                f"config `{key}` refers to file `{path}`, which cannot be read ({type(exc).__name__})"
            ) from None
        if not prop:
            return text.strip()
        for line in text.splitlines():
            name, sep, val = line.partition("=")
            if sep and name.strip() == prop and not name.lstrip().startswith(("#", "!")):
                return val.strip()
        raise ConfigError(f"config `{key}` refers to `{prop}` in `{path}`, which has no such key")


#: Keys whose values a transform or predicate computes over (a SQL query, a replacement, a static value):
#: a secret filled in there could be turned into data or an error message in a form no masking knows
#: (reversed, split, hashed), so no placeholder may fill them. Secrets belong in a connector's own keys.
_COMPUTED_PREFIXES = ("transforms.", "predicates.")


#: Keys that are SQL a connector runs (the JDBC source's `query`): the same, a query computes.
_COMPUTED_KEYS = ("query",)


#: The one exception: a transform's key material, which it only feeds to a keyed hash (HMAC): the
#: option, by the exact names of the transform's `type` (its entry points, with or without Kafka's
#: package, and its class), so no other transform can be handed the secret under the same option.
#: The MACs do not show the key, but they are a test of it: whoever reads the topic and knows a
#: hashed value can try guesses of the key offline, so a low-entropy secret (a password) pointed at
#: here can be found. The same role can already reference any secret the providers read (in a
#: connection key, sent to a server of its choosing): confine the providers (docs/security.md).
_KEY_MATERIAL_OPTION = "hmac.key"
_KEY_MATERIAL_TYPES = frozenset(
    {
        *(
            f"{package}HashField${part}"
            for package in ("", "org.apache.kafka.connect.transforms.")
            for part in ("Value", "Key")
        ),
        "connect_core.transforms.hashing.HashFieldValue",
        "connect_core.transforms.hashing.HashFieldKey",
    }
)


def _key_material(config: Mapping[str, Any]) -> frozenset[str]:
    """The keys of `config` that hold a transform's key material (`transforms.<alias>.hmac.key` of a
    HashField), which a config provider may fill."""
    return frozenset(
        key[: -len("type")] + _KEY_MATERIAL_OPTION
        for key, value in config.items()
        if isinstance(key, str)
        and key.startswith("transforms.")
        and key.endswith(".type")
        and isinstance(value, str)
        and value.strip() in _KEY_MATERIAL_TYPES
    )


def _key_problem(key: str, keyed: frozenset[str] = frozenset()) -> str | None:
    if key in keyed:
        return None
    if key.startswith(_COMPUTED_PREFIXES) or key in _COMPUTED_KEYS or key.endswith(".query"):
        return (
            "a config provider may not fill a query or a transform's or predicate's config (what it computes "
            "could carry the secret out); put secrets in the connector's connection keys"
        )
    return None


def _split_file_argument(argument: str) -> tuple[str, str]:
    """`/path/f.properties:key` → (path, key); a bare path has no key."""
    head, sep, tail = argument.rpartition(":")
    if sep and head and tail and "/" not in tail:
        return head, tail
    return argument, ""


def _airflow(key: str, argument: str) -> str:
    """A field of an Airflow connection, by Airflow's own lookup."""
    conn_id, _, field = argument.partition(":")
    try:
        from airflow.sdk import Connection
    except ImportError:
        raise ConfigError(
            f"config `{key}` refers to Airflow connection `{conn_id}`, but Airflow is not installed here"
        ) from None
    try:
        conn = Connection.get(conn_id)
    except Exception as exc:  # Airflow's not-found error differs between contexts; its message never holds secrets
        raise ConfigError(
            f"config `{key}` refers to Airflow connection `{conn_id}`, which cannot be read: {type(exc).__name__}"
        ) from None
    if field == "jdbc_url":
        kind = {"postgres": "postgresql", "postgresql": "postgresql", "mysql": "mariadb", "mariadb": "mariadb"}.get(
            str(conn.conn_type or "").lower()
        )
        if kind is None:
            raise ConfigError(
                f"config `{key}`: Airflow connection `{conn_id}` is of type `{conn.conn_type}`, not postgres or mysql"
            )
        port = f":{conn.port}" if conn.port else ""
        return f"jdbc:{kind}://{conn.host or 'localhost'}{port}/{conn.schema or ''}"
    if field.startswith("extra."):
        value = (conn.extra_dejson or {}).get(field[len("extra.") :])
    else:
        value = getattr(conn, field, None)
    if value is None:
        raise ConfigError(f"config `{key}`: Airflow connection `{conn_id}` has no `{field}`")
    return str(value)
