"""Crash points for failure tests: `CONNECT_FAULT=<point>` kills the process there with SIGKILL.

The runner calls `checkpoint` at the moments whose crash safety the tests
prove (e.g. after staging output, before committing it). Unset, it does nothing.
"""

from __future__ import annotations

import os
import signal

__all__ = ["checkpoint"]


def checkpoint(point: str) -> None:
    if os.environ.get("CONNECT_FAULT") == point:
        os.kill(os.getpid(), signal.SIGKILL)
