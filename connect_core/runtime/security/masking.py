"""Masking secrets in configs and in free text, in time linear in the input.

Three mechanisms, as Airflow's `secrets_masker` and Kafka's `Password` type combine them:

* by key: values of keys that look secret (`password`, `secret`, `token`, `sasl.jaas.config`,
  `*.key` …) are replaced whole in configs;
* by shape, in text: URL credentials (`scheme://user:pw@host`) and `key=value` / `"key": "value"`
  pairs whose key looks secret (`?password=…`, `password="…"` in a JAAS line);
* by value: every secret value the process has seen (config values of secret keys, passwords in
  URLs, values resolved by config providers) is hidden wherever it appears later, line by line
  for a value that spans lines, and in the encodings a driver or a query may turn it into: any
  letter case (a JDBC driver that lower-cases its URL), hex (SQL `hex()`), base64 (standard and
  URL-safe, also inside a longer base64 text: one form per alignment), percent-encoding, and JSON
  or Python string escapes.

Known values are found in one pass: a case-insensitive substring test per form over the text's
lower-cased copy (C speed), then one alternation of only the forms present, longest first.

Every pattern here starts with a literal (`://`, a key word) and ends in a character class with
nothing after it, so the regex engine never backtracks over user data: a 40 KB value costs
microseconds, not seconds.
"""

from __future__ import annotations

import base64
import json
import logging
import re
import threading
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import quote, quote_plus

from connect_core.runtime.security.urls import mask_url_credentials, url_passwords

__all__ = [
    "MASK",
    "SecretMasker",
    "encoded_forms",
    "is_secret_key",
    "mask_config",
    "mask_text",
    "masker",
]

MASK = "********"

#: Parts of a key that make its value a secret. `.key` at the end (`fs.s3a.secret.key`,
#: `ssl.key`) counts; `key.fields` or `key.converter` do not.
_SECRET_WORDS = r"password|passwd|pwd|secret|token|credential|jaas|api[._-]?key|private[._-]?key|access[._-]?key|auth"
_SECRET_KEY = re.compile(rf"(?:{_SECRET_WORDS})|(?:^|[._-])key$", re.IGNORECASE)

# `password=…`, `"password": "…"`, `pwd = …`: a secret word, then `=` or `:`, then the value up to a
# blank, a quote or `&` (a URL query's separator). The word may be the end of a longer key
# (`connection.password`). `;` and `,` may be part of a password, so the mask runs past them:
# `;password=x;db=y` hides `x;db=y` — more than the secret, never less.
# Not a URL's user named like a key (`://auth:********@host`, its password masked already): the
# search goes on past it, to a `?password=` later in the same URL.
_KEY_VALUE = re.compile(
    rf"(?:{_SECRET_WORDS})[\"']?[ \t]*[:=][ \t]*(?P<q>[\"']?)(?!{re.escape(MASK)}@)(?P<value>[^\s\"'&]+)",
    re.IGNORECASE,
)

#: Cheap substring tests before the key/value regex runs at all (most text has no secret word).
_HINTS = ("pass", "pwd", "secret", "token", "credential", "jaas", "key", "auth")

#: Values shorter than this are not masked by value: `1`, `on`, `app` would blank out half a log.
_MIN_VALUE_LENGTH = 4
#: Encoded forms shorter than this are not masked: a 4-character piece of base64 or hex is in
#: every other identifier; a secret that short is masked as it is and in its letter cases.
_MIN_ENCODED_LENGTH = 8
#: The longest input pydantic's errors show whole.
_PYDANTIC_SHOWN = 50


def encoded_forms(value: str) -> set[str]:
    """The forms `value` takes when a driver, a query or a serializer echoes it (letter case aside:
    forms are matched ignoring case): the pieces of a long value pydantic's errors show, hex, base64 (whole, and the part made only of its bytes at
    each of the three alignments inside a longer base64 text), percent-encoded, JSON- and
    Python-escaped."""
    raw = value.encode("utf-8", "surrogatepass")
    forms = {raw.hex()}
    for encode in (base64.b64encode, base64.urlsafe_b64encode):
        whole = encode(raw).decode()
        forms |= {whole, whole.rstrip("=")}
        for start in range(3):
            chunk = raw[start:]
            forms.add(encode(chunk[: len(chunk) // 3 * 3]).decode())
    forms |= {quote(value, safe=""), quote(value), quote_plus(value)}
    forms |= {json.dumps(value)[1:-1], json.dumps(value, ensure_ascii=False)[1:-1], repr(value)[1:-1]}
    if len(value) > _PYDANTIC_SHOWN:
        # pydantic shows a long input by the ends of its repr (`input_value='<24>...<23>'`)
        forms |= {value[:24], value[-23:]}
    return {f for f in forms if len(f) >= _MIN_ENCODED_LENGTH and f != value}


def is_secret_key(key: str) -> bool:
    return bool(_SECRET_KEY.search(key))


class SecretMasker:
    """Masks by key, shape and known value. Thread-safe; one per process (`masker`) serves logs."""

    def __init__(self) -> None:
        self._values: set[str] = set()
        self._lock = threading.Lock()
        #: every form of every known value, lower-cased, longest first (a form that contains
        #: another is masked whole)
        self._forms: tuple[str, ...] = ()

    # -- what is secret -----------------------------------------------------

    def add(self, value: Any) -> None:
        """Remember a secret value: it is masked wherever it appears from now on (each line of it too)."""
        if not isinstance(value, str):
            return
        parts = {value.strip(), *(line.strip() for line in value.splitlines())}
        fresh = {p for p in parts if len(p) >= _MIN_VALUE_LENGTH and p != MASK} - self._values
        if fresh:
            forms = {f.lower() for p in fresh for f in (p, *encoded_forms(p))}
            with self._lock:
                self._values |= fresh
                forms |= set(self._forms)
                self._forms = tuple(sorted(forms, key=lambda f: (-len(f), f)))

    def add_config(self, config: Mapping[str, Any]) -> None:
        """Remember the secret values of a config: secret keys' values and URL passwords."""
        for key, value in _walk(config):
            if is_secret_key(key):
                self.add(value if isinstance(value, str) else None)
            if isinstance(value, str) and "://" in value:
                for password in url_passwords(value):
                    self.add(password)

    # -- masking ------------------------------------------------------------

    def text(self, text: str) -> str:
        """`text` with URL credentials, secret `key=value` pairs and every known secret value hidden."""
        if not text:
            return text
        text = self._known_values(text)
        if "://" in text:
            text = mask_url_credentials(text, MASK)
        lowered = text.lower()
        if not any(hint in lowered for hint in _HINTS):
            return text
        return _KEY_VALUE.sub(_mask_pair, text)

    def _known_values(self, text: str) -> str:
        """`text` with every form of every known value masked, in any letter case."""
        forms = self._forms
        if not forms:
            return text
        lowered = text.lower()
        if len(lowered) == len(text):
            present = [f for f in forms if f in lowered]
            if not present:
                return text
        else:  # a letter whose lower case is longer (`İ`): the filter could miss; match every form
            present = list(forms)
        pattern = re.compile("|".join(map(re.escape, present)), re.IGNORECASE)
        return pattern.sub(MASK, text)

    def config(self, config: Mapping[str, Any]) -> dict[str, Any]:
        """A copy of `config` with secret keys' values masked whole and every string value masked as text."""
        masked: dict[str, Any] = {}
        for key, value in config.items():
            masked[key] = self._value(str(key), value)
        return masked

    def _value(self, key: str, value: Any) -> Any:
        if is_secret_key(key) and value not in (None, "") and not isinstance(value, Mapping | list):
            return MASK
        if isinstance(value, Mapping):
            return self.config(value)
        if isinstance(value, list):
            return [self._value(key, v) for v in value]
        if isinstance(value, str):
            return self.text(value)
        return value


def _mask_pair(match: re.Match[str]) -> str:
    start, end = match.span("value") if match.group("value") != MASK else (0, 0)
    if start == end:
        return match.group(0)
    offset = match.start()
    whole = match.group(0)
    return whole[: start - offset] + MASK + whole[end - offset :]


def _walk(config: Mapping[str, Any], prefix: str = "") -> Iterable[tuple[str, Any]]:
    """Every (key, leaf value) of a nested config, iteratively (a deep config must not recurse)."""
    stack: list[tuple[str, Any]] = [(str(k), v) for k, v in config.items()]
    while stack:
        key, value = stack.pop()
        if isinstance(value, Mapping):
            stack.extend((f"{key}.{k}" if key else str(k), v) for k, v in value.items())
        elif isinstance(value, list):
            stack.extend((key, v) for v in value)
        else:
            yield key, value


#: The process's masker: its known values are masked in every log record (`MaskingFilter`).
masker = SecretMasker()


def mask_text(text: str) -> str:
    return masker.text(text)


def mask_config(config: Mapping[str, Any]) -> dict[str, Any]:
    return masker.config(config)


class MaskingFilter(logging.Filter):
    """A logging filter that masks every record's message (and its exception text) with `masker`."""

    def __init__(self, secret_masker: SecretMasker | None = None) -> None:
        super().__init__()
        self._masker = secret_masker or masker

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a broken format string: leave it to the handler to report
            return True
        masked = self._masker.text(message)
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = self._masker.text(record.exc_text)
        if masked != message or record.args:
            record.msg, record.args = masked, None
        return True


def install_log_masking(secret_masker: SecretMasker | None = None) -> None:
    """Mask every record that reaches the root logger's handlers (idempotent)."""
    for handler in logging.getLogger().handlers:
        if not any(isinstance(f, MaskingFilter) for f in handler.filters):
            handler.addFilter(MaskingFilter(secret_masker))


__all__ += ["MaskingFilter", "install_log_masking"]
