"""Crash points for failure tests: `CONNECT_FAULT=<point>` kills the process there with SIGKILL.

The runner calls `checkpoint` at the moments whose crash safety the tests
prove: `before_stage` (read, nothing written), `after_stage` (output staged or the sink's
target written), `before_commit`, `after_commit`; sinks call `mid_sink` half-way through
writing their target, and the CDC sources `mid_source` when they have read an incremental
snapshot's chunk and not yet its WAL. Unset, it does nothing.
"""

from __future__ import annotations

import os
import signal

__all__ = ["checkpoint"]


def checkpoint(point: str) -> None:
    if os.environ.get("CONNECT_FAULT") == point:
        os.kill(os.getpid(), signal.SIGKILL)
