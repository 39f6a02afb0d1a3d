"""Masking secret config values before anything is logged, printed or returned."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = ["MASK", "is_secret_key", "mask_config", "mask_text"]

MASK = "********"

_SECRET_KEY = re.compile(
    r"(password|passwd|secret|token|credential|api[._-]?key|private[._-]?key|access[._-]?key|auth)",
    re.IGNORECASE,
)
_URL_PASSWORD = re.compile(r"(?P<scheme>[a-z][a-z0-9+.-]*://[^:/@\s]+):(?P<pw>[^@\s]+)@", re.IGNORECASE)


def is_secret_key(key: str) -> bool:
    return bool(_SECRET_KEY.search(key))


def mask_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of `config` with secret-looking values masked (nested maps too)."""
    masked: dict[str, Any] = {}
    for key, value in config.items():
        if is_secret_key(str(key)) and value not in (None, ""):
            masked[key] = MASK
        elif isinstance(value, Mapping):
            masked[key] = mask_config(value)
        elif isinstance(value, str):
            masked[key] = mask_text(value)
        else:
            masked[key] = value
    return masked


def mask_text(text: str) -> str:
    """Hide passwords embedded in URLs (`scheme://user:pw@host`)."""
    return _URL_PASSWORD.sub(lambda m: f"{m.group('scheme')}:{MASK}@", text)
