"""Which JDBC URLs a config may name: one database server, plain parameters from an allow-list.

A JDBC URL is handed to the JVM driver (Spark's JDBC source) as it is, and its parameters
configure that driver. Many of them are a way into the worker: pgjdbc's `socketFactory`,
`sslfactory`, `sslhostnameverifier`, `sslpasswordcallback` and `authenticationPluginClassName`
instantiate a class named by the user (with `socketFactoryArg` as its argument); MySQL and MariaDB
Connector/J's `allowLoadLocalInfile`/`allowLocalInfile` and `allowUrlInLocalInfile` let the server
read the worker's files, `autoDeserialize` deserializes Java objects the server sends, the
`*Interceptors`, `socketFactory`, `authenticationPlugins`, `propertiesTransform` load classes,
`localSocket`/`pipe`/`serverRSAPublicKeyFile` name local files, `initSql`/`sessionVariables` run
SQL. Confluent's JDBC connector and Kafka's JAAS (`org.apache.kafka.disallowed.login.modules`)
refuse such options by deny-list; a new driver release adds new ones, so here only parameters
known to be harmless pass, and a URL in any form this module does not parse exactly (another
scheme, sub-protocol, several hosts, `address=(…)`, key-value host parts, user info, encoded or
odd parameter names) is refused rather than guessed at. Keys are compared case-insensitively,
every occurrence of a repeated key is checked, and `;` separates parameters as `&` does. Each
database's schemes and harmless parameters are its dialect's (`dialects/`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from connect_core.sdk.errors import ConfigError

__all__ = ["check_jdbc_url"]

_SCHEME = re.compile(r"jdbc:([a-z][a-z0-9]{0,30})://")
# An optional `user[:password]@` (no `=`, `,`, `(`, `;`, `&`: percent-encode them) and one host (a
# name, an IPv4 or a bracketed IPv6 address) with an optional port: no list of hosts, no
# `address=(…)` or `(host=…,key=value)` parts, where the drivers read parameters.
_LOGIN_CHAR = r"(?:[A-Za-z0-9._~!$'*+-]|%[0-9A-Fa-f]{2})"
_AUTHORITY = re.compile(
    rf"(?:{_LOGIN_CHAR}{{1,256}}(?::{_LOGIN_CHAR}{{0,256}})?@)?"
    r"(?:[A-Za-z0-9][A-Za-z0-9._-]{0,252}|\[[0-9A-Fa-f:.]{2,45}\])(?::[0-9]{1,5})?"
)
_DATABASE = re.compile(r"[A-Za-z0-9_$.-]{0,64}")
_KEY = re.compile(r"[A-Za-z][A-Za-z0-9_.]{0,99}")
_MAX_LENGTH = 4096


def check_jdbc_url(url: str, allowed: Mapping[str, frozenset[str]], supported: str, key: str = "connection.url") -> str:
    """`url`'s scheme when it is one of `allowed`'s (scheme: its harmless parameters, lower-case) in
    the supported form and its parameters are all allowed; a ConfigError naming what is refused
    otherwise (`supported`: the URL forms, for the message)."""
    if len(url) > _MAX_LENGTH:
        raise ConfigError(f"`{key}` is longer than {_MAX_LENGTH} characters", {key: ["too long"]})
    if any(c.isspace() or not c.isprintable() or not c.isascii() for c in url):
        raise ConfigError(
            f"`{key}` must not contain whitespace, control or non-ASCII characters (percent-encode them)",
            {key: ["whitespace, control or non-ASCII character"]},
        )
    scheme = _SCHEME.match(url)
    if scheme is None or scheme.group(1) not in allowed:
        raise ConfigError(
            f"`{key}` must be {supported}; other drivers, sub-protocols (replication, loadbalance, …) "
            "and URL forms are refused",
            {key: [f"unsupported JDBC URL: use {supported}"]},
        )
    kind = scheme.group(1)
    rest, _, query = url[scheme.end() :].partition("?")
    authority, _, database = rest.partition("/")
    if not _AUTHORITY.fullmatch(authority):
        raise ConfigError(
            f"`{key}`: the server must be one `[user[:password]@]host[:port]` (no host list or `(key=value)` "
            f"parts, nothing but letters, digits and `._~!$'*+-` or %-escapes in the login), not "
            f"`{_masked(authority)[:100]}`",
            {key: ["the server must be one [user[:password]@]host[:port]"]},
        )
    if not _DATABASE.fullmatch(database):
        raise ConfigError(
            f"`{key}`: the database name `{database[:100]}` must be letters, digits, `_`, `$`, `.` or `-`",
            {key: ["the database name is not a plain name"]},
        )
    refused = [name for name in _parameter_names(query, key) if name.lower() not in allowed[kind]]
    if refused:
        names = ", ".join(f"`{name}`" for name in dict.fromkeys(refused))
        raise ConfigError(
            f"`{key}`: parameter(s) {names} of the JDBC URL are not allowed (they can make the driver load "
            "classes, read local files or run SQL, or are not known to be harmless); remove them",
            {key: [f"parameter `{name}` is not allowed" for name in dict.fromkeys(refused)]},
        )
    return kind


def _masked(authority: str) -> str:
    """The authority without a password it may hold."""
    login, at, host = authority.rpartition("@")
    return f"{login.split(':', 1)[0]}:****@{host}" if at and ":" in login else authority


def _parameter_names(query: str, key: str) -> list[str]:
    """The names of the query string's parameters (`&` or `;` between them; a name alone is one)."""
    if "?" in query:
        raise ConfigError(f"`{key}`: a second `?` in the JDBC URL (percent-encode it)", {key: ["a second `?`"]})
    names = []
    for part in re.split(r"[&;]", query):
        if not part:
            continue
        name = part.split("=", 1)[0]
        if not _KEY.fullmatch(name):
            raise ConfigError(
                f"`{key}`: the JDBC URL parameter name `{name[:100]}` is not a plain name (letters, digits, "
                "`_`, `.`; nothing percent-encoded)",
                {key: [f"parameter name `{name[:100]}` is not a plain name"]},
            )
        names.append(name)
    return names
