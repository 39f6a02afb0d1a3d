"""What every part of the management room holds: the runtime, and whom to tell of a write."""

from __future__ import annotations

from collections.abc import Callable

from connect_core.runtime.context import Runtime

__all__ = ["Room"]


class Room:
    def __init__(self, runtime: Runtime, on_write: Callable[[], None] | None = None) -> None:
        self.rt = runtime
        self._on_write = on_write

    def _wrote(self) -> None:
        """A connector changed here: tell whoever keeps reads of connectors (the REST API's cache),
        so that its next read sees the write."""
        if self._on_write is not None:
            self._on_write()
